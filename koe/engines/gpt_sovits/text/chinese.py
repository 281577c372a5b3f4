"""GPT-SoVITS v2's Chinese grapheme-to-phoneme step (upstream `GPT_SoVITS/text/chinese2.py`, `g2p`):
normalised Chinese text to phoneme symbols and, per character, how many symbols it became.

Upstream's order, kept here:

1. The text is cut after each punctuation mark into segments; Latin letters are dropped from each.
2. G2PW reads all segments in one call and gives a pinyin per character (`predict`: the polyphone
   model for the characters it knows as polyphonic, pypinyin for the rest, punctuation as itself).
3. Each segment is tagged by jieba's part-of-speech segmenter (`posseg`) and re-merged for the tone
   rules (`ToneSandhi.pre_merge_for_modify`). For each word: its slice of G2PW's pinyin, replaced by
   upstream's polyphone dictionary where it has the word (or, character by character, the first
   reading it lists); initials and finals by pypinyin's tone converters; tone sandhi; erhua.
4. Each (initial, final) pair becomes two symbols through the opencpop-strict table (finals carry
   the tone digit); punctuation stays one symbol.

The segmenter is jieba's (`jieba_fast` when installed, as upstream imports, else `jieba`: the same
dictionary and algorithm in pure Python). koe's `rjieba` cannot stand in: its `tag` looks each word
up in the dictionary and calls anything else `x`/`eng`/`m`, where jieba's `posseg` tags unknown
words with its part-of-speech HMM (and cuts them by it), and the tone and erhua rules read those
tags.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache

from koe.engines.gpt_sovits.text import chinese_data
from koe.engines.gpt_sovits.text.tone_sandhi import ToneSandhi
from koe.engines.gpt_sovits.text.zh_norm import normalize

__all__ = ["PUNCTUATION", "ChineseFrontEnd", "G2PWPredict", "g2p", "merge_erhua", "normalize", "segments"]

PUNCTUATION = "!?…,.-"  # upstream's `symbols.punctuation`: what normalised Chinese text keeps

G2PWPredict = Callable[[list[str]], list[list[str]]]
"""G2PW over a batch of segments: for each, one pinyin (TONE3, "hang2") or punctuation mark per character."""

# erhua: words whose 儿 always merges, and words (or last two characters) whose 儿 never does
MUST_ERHUA = frozenset("小院儿 胡同儿 范儿 老汉儿 撒欢儿 寻老礼儿 妥妥儿 媳妇儿".split())
NOT_ERHUA = frozenset(
    """
虐儿 为儿 护儿 瞒儿 救儿 替儿 有儿 一儿 我儿 俺儿 妻儿 拐儿 聋儿 乞儿 患儿 幼儿 孤儿 婴儿 婴幼儿 连体儿 脑瘫儿 流浪儿 体弱儿 混血儿 蜜雪儿 舫儿 祖儿 美儿
应采儿 可儿 侄儿 孙儿 侄孙儿 女儿 男儿 红孩儿 花儿 虫儿 马儿 鸟儿 猪儿 猫儿 狗儿 少儿
""".split()
)

# pinyin spelled without an initial, as the opencpop table spells it
_ZERO_INITIAL = {"ing": "ying", "i": "yi", "in": "yin", "u": "wu"}
_ZERO_INITIAL_FIRST = {"v": "yu", "e": "e", "i": "y", "u": "w"}
_CONTRACTED = {"uei": "ui", "iou": "iu", "uen": "un"}  # after an initial


@cache
def _jieba():
    try:
        import jieba_fast as jieba
        import jieba_fast.posseg as posseg
    except ImportError:
        import jieba
        import jieba.posseg as posseg
    jieba.setLogLevel(60)  # above CRITICAL: upstream silences its dictionary-loading messages
    return posseg.lcut, jieba.cut_for_search


@cache
def _tone_sandhi() -> ToneSandhi:
    return ToneSandhi(_jieba()[1])


def segments(text: str) -> list[str]:
    """`text` cut after each punctuation mark (and the whitespace after it); blank pieces dropped."""
    pieces = re.split(f"(?<=[{re.escape(PUNCTUATION)}])\\s*", text)
    return [p for p in pieces if p.strip() != ""]


def merge_erhua(initials: list[str], finals: list[str], word: str, pos: str) -> tuple[list[str], list[str]]:
    """Erhua: a word-final 儿 read er1 becomes er2; then, unless the word is listed as never merging
    (or tagged a, j or nr and not listed as always merging), a word-final 儿 read er2/er5 takes the
    tone of the final before it. Words whose finals do not match their characters are left alone."""
    for i, final in enumerate(finals):
        if i == len(finals) - 1 and word[i] == "儿" and final == "er1":
            finals[i] = "er2"
    if word not in MUST_ERHUA and (word in NOT_ERHUA or pos in ("a", "j", "nr")):
        return initials, finals
    if len(finals) != len(word):
        return initials, finals
    merged: list[str] = []
    for i, final in enumerate(finals):
        if i == len(finals) - 1 and word[i] == "儿" and final in ("er2", "er5") and word[-2:] not in NOT_ERHUA and merged:
            final = "er" + merged[-1][-1]
        merged.append(final)
    return list(initials), merged


def _symbols(initial: str, final: str) -> list[str]:
    # one syllable (or punctuation mark) to its symbols through the opencpop-strict table
    if initial == final:
        if initial not in PUNCTUATION:
            raise ValueError(f"{initial!r} is neither a syllable nor punctuation")
        return [initial]
    tone, bare = final[-1], final[:-1]
    if tone not in "12345":
        raise ValueError(f"no tone on the final {final!r}")
    pinyin = initial + bare
    if initial:
        pinyin = initial + _CONTRACTED.get(bare, bare)
    elif pinyin in _ZERO_INITIAL:
        pinyin = _ZERO_INITIAL[pinyin]
    elif pinyin[0] in _ZERO_INITIAL_FIRST:
        pinyin = _ZERO_INITIAL_FIRST[pinyin[0]] + pinyin[1:]
    table = chinese_data.pinyin_to_symbols()
    if pinyin not in table:
        raise ValueError(f"pinyin {pinyin!r} ({initial + final!r}) is not in the opencpop-strict table")
    symbol_initial, symbol_final = table[pinyin]
    return [symbol_initial, symbol_final + tone]


def _word_syllables(word: str, pinyins: Sequence[str]) -> tuple[list[str], list[str]]:
    from pypinyin.contrib.tone_convert import to_finals_tone3, to_initials

    initials, finals = [], []
    for pinyin in chinese_data.correct_pronunciation(word, list(pinyins)):
        if pinyin[0].isalpha():
            initials.append(to_initials(pinyin))
            finals.append(to_finals_tone3(pinyin, neutral_tone_with_five=True))
        else:
            initials.append(pinyin)
            finals.append(pinyin)
    return initials, finals


def g2p(text: str, predict: G2PWPredict) -> tuple[list[str], list[int]]:
    """Normalised Chinese `text` to (phones, word2ph): the symbols, and how many each character of the
    text became (2 for a syllable, 1 for punctuation), as upstream v2 with G2PW. `predict` is G2PW
    (`koe.engines.gpt_sovits.g2pw.G2PW`, or anything with its contract, `G2PWPredict`)."""
    pieces = [re.sub("[a-zA-Z]+", "", s) for s in segments(text)]
    batch = [p for p in pieces if p]
    predicted = iter(predict(batch) if batch else [])
    posseg, _ = _jieba()
    sandhi = _tone_sandhi()
    phones: list[str] = []
    word2ph: list[int] = []
    for piece in pieces:
        pinyins = next(predicted) if piece else []
        words = sandhi.pre_merge_for_modify([(w.word, w.flag) for w in posseg(piece)])
        initials: list[str] = []
        finals: list[str] = []
        start = 0
        for word, pos in words:
            end = start + len(word)
            if pos == "eng":
                start = end
                continue
            word_initials, word_finals = _word_syllables(word, pinyins[start:end])
            start = end
            word_finals = sandhi.modified_tone(word, pos, word_finals)
            word_initials, word_finals = merge_erhua(word_initials, word_finals, word, pos)
            initials += word_initials
            finals += word_finals
        for initial, final in zip(initials, finals):
            symbols = _symbols(initial, final)
            phones += symbols
            word2ph.append(len(symbols))
    return phones, word2ph


class ChineseFrontEnd:
    """The v2 Chinese front end with a G2PW bound, in the shape `text.clean` asks of a language:
    `normalize(text) -> str` and `g2p(norm_text) -> (phones, word2ph)`."""

    def __init__(self, predict: G2PWPredict) -> None:
        self.predict = predict

    @staticmethod
    def normalize(text: str) -> str:
        return normalize(text)

    def g2p(self, norm_text: str) -> tuple[list[str], list[int]]:
        return g2p(norm_text, self.predict)
