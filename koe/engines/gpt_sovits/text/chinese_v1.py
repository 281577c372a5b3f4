"""GPT-SoVITS v1's Chinese front end (upstream `GPT_SoVITS/text/chinese.py`, which `clean_text` uses for
`zh` when the version is v1): v2's normaliser, and a g2p without G2PW, the polyphone dictionary or erhua.

Upstream v1's g2p: the text cut after each punctuation mark, Latin letters dropped; each segment tagged
by jieba's part-of-speech segmenter and re-merged for the tone rules; each word's initials and finals
from pypinyin's `lazy_pinyin` (its own phrase dictionary; neutral tone as 5), then tone sandhi; each
(initial, final) to two symbols through the opencpop-strict table, punctuation one symbol. The tone
rules, the segmenter and the table are v2's (`chinese`): upstream's two modules share them.
"""

from __future__ import annotations

import re

from koe.engines.gpt_sovits.text.chinese import _jieba, _symbols, _tone_sandhi, segments
from koe.engines.gpt_sovits.text.zh_norm import normalize

__all__ = ["g2p", "normalize", "syllables"]


def syllables(word: str) -> tuple[list[str], list[str]]:
    """pypinyin's initials and TONE3 finals of `word` (a mark is its own initial and final)."""
    from pypinyin import Style, lazy_pinyin

    initials = lazy_pinyin(word, neutral_tone_with_five=True, style=Style.INITIALS)
    finals = lazy_pinyin(word, neutral_tone_with_five=True, style=Style.FINALS_TONE3)
    return initials, finals


def g2p(norm_text: str) -> tuple[list[str], list[int]]:
    """Normalised Chinese text to (phones, word2ph) as upstream v1 (2 per syllable, 1 per mark)."""
    posseg, _ = _jieba()
    sandhi = _tone_sandhi()
    phones: list[str] = []
    word2ph: list[int] = []
    for segment in segments(norm_text):
        segment = re.sub("[a-zA-Z]+", "", segment)
        words = sandhi.pre_merge_for_modify([(w.word, w.flag) for w in posseg(segment)])
        initials: list[str] = []
        finals: list[str] = []
        for word, pos in words:
            if pos == "eng":
                continue
            word_initials, word_finals = syllables(word)
            initials += word_initials
            finals += sandhi.modified_tone(word, pos, word_finals)
        for initial, final in zip(initials, finals):
            symbols = _symbols(initial, final)
            phones += symbols
            word2ph.append(len(symbols))
    return phones, word2ph
