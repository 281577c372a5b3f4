"""GPT-SoVITS v2's Cantonese front end (upstream `GPT_SoVITS/text/cantonese.py`, from Bert-VITS2-Cantonese):
text to Jyutping initials and toned finals, each marked with a leading `Y` (so no symbol collides with
Mandarin's), and how many symbols each character became.

Upstream's steps, kept:

- `normalize`: the Chinese normaliser's sentences (numbers, dates, units read out in Mandarin's words;
  `zh_norm`), each folded by Cantonese's own punctuation table (quotes and brackets become `'`, dashes
  and tildes `-`) and stripped of everything but CJK and "!?…,.-". Unlike Mandarin, 嗯/呣 are kept as
  they are and runs of punctuation are not cut (upstream's `text_normalize`). `'` is not kept, so the
  quotes fold to nothing.
- `g2p`: ToJyutping's readings of the text (its own word segmentation); a run of punctuation becomes
  one mark per character; each syllable is cut at the first of upstream's `INITIALS` it starts with
  (that list holds whole finals too: `aa`, `ou`, `ung`..., so a syllable without an onset is cut into
  its vowel and the rest, and a syllable that is only an initial keeps its last letter as the final);
  `nga...` is cut after `ng`. The final carries the tone digit; both get `Y`, punctuation stays bare.
  word2ph: 2 per syllable, 1 per mark.
"""

from __future__ import annotations

import re
from functools import cache

from koe.engines.gpt_sovits.text.zh_norm import normalize_sentence, sentences

__all__ = ["INITIALS", "g2p", "jyutping", "normalize", "syllable_phones"]

PUNCTUATION = ("!", "?", "…", ",", ".", "-")
INITIALS = ("aa aai aak aap aat aau ai au ap at ak a p b e ts t dz d kw k gw g f h l m ng n s y w c z j ong on ou oi ok o uk ung sp spl spn sil").split()
"""Upstream's list, in its order: the first a syllable starts with is its initial."""
_FOLDS = {
    "：": ",", "；": ",", "，": ",", "。": ".", "！": "!", "？": "?", "\n": ".", "·": ",", "、": ",", "...": "…", "$": ".",
    "“": "'", "”": "'", '"': "'", "‘": "'", "’": "'", "（": "'", "）": "'", "(": "'", ")": "'", "《": "'", "》": "'",
    "【": "'", "】": "'", "[": "'", "]": "'", "—": "-", "～": "-", "~": "-", "「": "'", "」": "'",
}  # fmt: skip
_FOLD = re.compile("|".join(re.escape(p) for p in _FOLDS))
_MARKS = re.escape("".join(PUNCTUATION))
_NOT_KEPT = re.compile(r"[^\u4e00-\u9fa5" + "".join(PUNCTUATION) + r"]+")
_ONLY_PUNCTUATION = re.compile(f"^[{_MARKS}]+$")
_JYUTPING = re.compile(r"^([a-z]+[1-6]+[ ]?)+$")


@cache
def _to_jyutping():
    import ToJyutping

    return ToJyutping


def normalize(text: str) -> str:
    """Upstream's `text_normalize` for Cantonese."""
    return "".join(_NOT_KEPT.sub("", _FOLD.sub(lambda m: _FOLDS[m.group()], normalize_sentence(s))) for s in sentences(text))


def jyutping(text: str) -> list[str]:
    """ToJyutping's reading of `text`: per word its syllables ("hoeng1 gong2"), per punctuation mark
    the mark (upstream's `get_jyutping`). A word ToJyutping cannot read is an error, as upstream's."""
    readings: list[str] = []
    for word, syllables in _to_jyutping().get_jyutping_list(text):
        if _ONLY_PUNCTUATION.match(word):
            readings += [c for c in re.split(f"([{_MARKS}])", word) if c]
        elif syllables is None or not _JYUTPING.search(syllables):
            raise ValueError(f"Failed to convert {word} to jyutping: {syllables}")
        else:
            readings.append(syllables)
    return readings


def syllable_phones(syllable: str) -> list[str]:
    """One reading (a mark, or a Jyutping entry) to its symbols, as upstream's
    `jyuping_to_initials_finals_tones` cuts it. An entry no initial matches gives none (upstream's too)."""
    if syllable in PUNCTUATION or syllable == "_":
        return [syllable] if syllable in PUNCTUATION else ["Y_"]
    try:
        tone, bare = int(syllable[-1]), syllable[:-1]
    except ValueError:
        tone, bare = 0, syllable
    for initial in INITIALS:
        if bare.startswith(initial):
            if bare.startswith("nga"):
                parts = [bare[:2], bare[2:] or bare[-1]]
            else:
                parts = [initial, bare[len(initial) :] or initial[-1]]
            final = f"{parts[1]}{tone}" if tone not in (-1, 0) else parts[1]
            return [f"Y{parts[0]}", final if final in PUNCTUATION else f"Y{final}"]
    return []


def g2p(norm_text: str) -> tuple[list[str], list[int]]:
    """Normalised Cantonese text to (phones, word2ph)."""
    phones: list[str] = []
    word2ph: list[int] = []
    for reading in jyutping(norm_text):
        symbols = syllable_phones(reading)
        phones += symbols
        if reading in PUNCTUATION or reading == "_":
            word2ph.append(1)
        elif symbols:
            word2ph.append(2)
    return phones, word2ph
