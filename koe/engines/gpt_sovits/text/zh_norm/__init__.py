"""GPT-SoVITS v2's Chinese text normaliser (upstream `chinese2.text_normalize` over its
`zh_normalization.TextNormalizer`, PaddleSpeech's, Apache-2.0): numbers, dates, times, money, phone
numbers, units, Greek letters and arithmetic read out in Chinese characters, punctuation folded to
upstream's few marks, everything else dropped.

`normalize(text)`:

1. The text is split into sentences (spaces and brackets/quotes removed first) after each of
   "：、，；。？！,;?!" (and a closing quote after it).
2. Each sentence: traditional characters to simplified (upstream's own table), full-width letters
   and digits to ASCII, then the rules in upstream's order (dates, time ranges, times, ~ ranges with
   units, temperatures, units, arithmetic until none is left, powers, fractions, percentages, mobile
   numbers, landlines, 400 numbers, ranges, negative numbers, version numbers, decimals, counts before
   measure words, digit strings, the remaining numbers), then the leftovers (/ as 每, circled digits,
   Greek letters, + - × ÷ =, brackets and the like dropped).
3. Each sentence's punctuation is folded (：；，、· to ",", 。 to ".", ... to …, and so on), 嗯 and 呣
   become 恩 and 母, and every character that is neither a CJK ideograph (U+4E00..U+9FA5) nor one of
   "!?…,.-" is dropped; the sentences are joined and any run of punctuation keeps its first mark.
"""

from __future__ import annotations

import re
from functools import cache

from koe.engines.gpt_sovits.text.zh_norm import dates, numbers

__all__ = ["normalize", "normalize_sentence", "sentences", "traditional_to_simplified"]

PUNCTUATION = "!?…,.-"

_SENTENCE_END = re.compile(r"([：、，；。？！,;?!][”’]?)")
_DROPPED_BEFORE = re.compile(r"[——《》【】<>{}()（）#&@“”^_|\\]")
_DROPPED_AFTER = re.compile(r"[-——《》【】<=>{}()（）#&@“”^_|\\]")

_FULL_WIDTH = {ord(c) + 0xFEE0: ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}

# after the rules: what is left of symbols, in upstream's order
_LEFTOVERS = (
    ("/", "每"),
    *zip("①②③④⑤⑥⑦⑧⑨⑩", "一二三四五六七八九十", strict=True),
    ("α", "阿尔法"),
    ("β", "贝塔"),
    ("γ", "伽玛"),
    ("Γ", "伽玛"),
    ("δ", "德尔塔"),
    ("Δ", "德尔塔"),
    ("ε", "艾普西龙"),
    ("ζ", "捷塔"),
    ("η", "依塔"),
    ("θ", "西塔"),
    ("Θ", "西塔"),
    ("ι", "艾欧塔"),
    ("κ", "喀帕"),
    ("λ", "拉姆达"),
    ("Λ", "拉姆达"),
    ("μ", "缪"),
    ("ν", "拗"),
    ("ξ", "克西"),
    ("Ξ", "克西"),
    ("ο", "欧米克伦"),
    ("π", "派"),
    ("Π", "派"),
    ("ρ", "肉"),
    ("ς", "西格玛"),
    ("Σ", "西格玛"),
    ("σ", "西格玛"),
    ("τ", "套"),
    ("υ", "宇普西龙"),
    ("φ", "服艾"),
    ("Φ", "服艾"),
    ("χ", "器"),
    ("ψ", "普赛"),
    ("Ψ", "普赛"),
    ("ω", "欧米伽"),
    ("Ω", "欧米伽"),
    ("+", "加"),
    ("-", "减"),
    ("×", "乘"),
    ("÷", "除"),
    ("=", "等"),
)

# chinese2's punctuation folding, one alternation in this order (as upstream's `rep_map`)
_FOLDS = {
    "：": ",",
    "；": ",",
    "，": ",",
    "。": ".",
    "！": "!",
    "？": "?",
    "\n": ".",
    "·": ",",
    "、": ",",
    "...": "…",
    "$": ".",
    "/": ",",
    "—": "-",
    "~": "…",
    "～": "…",
}
_FOLD = re.compile("|".join(re.escape(p) for p in _FOLDS))
_NOT_KEPT = re.compile(r"[^\u4e00-\u9fa5" + "".join(PUNCTUATION) + r"]+")
_REPEATED_PUNCTUATION = re.compile(f"([{re.escape(PUNCTUATION)}])([{re.escape(PUNCTUATION)}])+")

# (pattern, replacement) in upstream's order; RE_ASMD is applied until it no longer matches
_RULES_BEFORE_ASMD = (
    (dates.RE_DATE, dates.replace_date),
    (dates.RE_DATE2, dates.replace_date2),
    (dates.RE_TIME_RANGE, dates.replace_time),
    (dates.RE_TIME, dates.replace_time),
    (numbers.RE_TO_RANGE, numbers.replace_to_range),
    (dates.RE_TEMPERATURE, dates.replace_temperature),
)
_RULES_AFTER_ASMD = (
    (numbers.RE_POWER, numbers.replace_power),
    (numbers.RE_FRAC, numbers.replace_frac),
    (numbers.RE_PERCENTAGE, numbers.replace_percentage),
    (dates.RE_MOBILE_PHONE, dates.replace_mobile),
    (dates.RE_TELEPHONE, dates.replace_phone),
    (dates.RE_NATIONAL_UNIFORM_NUMBER, dates.replace_phone),
    (numbers.RE_RANGE, numbers.replace_range),
    (numbers.RE_INTEGER, numbers.replace_negative_num),
    (numbers.RE_VERSION_NUM, numbers.replace_version_num),
    (numbers.RE_DECIMAL_NUM, numbers.replace_number),
    (numbers.RE_POSITIVE_QUANTIFIERS, numbers.replace_positive_quantifier),
    (numbers.RE_DEFAULT_NUM, numbers.replace_default_num),
    (numbers.RE_NUMBER, numbers.replace_number),
)


@cache
def _traditional_table() -> dict[int, int]:
    from koe.engines.gpt_sovits.text.chinese_data import DATA

    traditional, simplified = (DATA / "traditional-to-simplified.txt").read_text(encoding="utf-8").splitlines()[:2]
    return {ord(t): ord(s) for t, s in zip(traditional, simplified, strict=True)}


def traditional_to_simplified(text: str) -> str:
    """Traditional characters to simplified, character by character, by upstream's table."""
    return text.translate(_traditional_table())


def sentences(text: str) -> list[str]:
    """Upstream's sentence split: spaces and brackets/quotes dropped, a cut after each sentence mark."""
    text = _DROPPED_BEFORE.sub("", text.replace(" ", ""))
    text = _SENTENCE_END.sub(r"\1\n", text).strip()
    return [s.strip() for s in re.split(r"\n+", text)]


def normalize_sentence(sentence: str) -> str:
    """One sentence's numbers, dates, units and symbols read out (upstream's `normalize_sentence`)."""
    sentence = traditional_to_simplified(sentence).translate(_FULL_WIDTH)
    for pattern, replace in _RULES_BEFORE_ASMD:
        sentence = pattern.sub(replace, sentence)
    sentence = dates.replace_measure(sentence)
    while numbers.RE_ASMD.search(sentence):
        sentence = numbers.RE_ASMD.sub(numbers.replace_asmd, sentence)
    for pattern, replace in _RULES_AFTER_ASMD:
        sentence = pattern.sub(replace, sentence)
    for symbol, reading in _LEFTOVERS:
        sentence = sentence.replace(symbol, reading)
    return _DROPPED_AFTER.sub("", sentence)


def fold_punctuation(sentence: str) -> str:
    """chinese2's `replace_punctuation`: 嗯/呣 to 恩/母, punctuation folded, all but CJK and "!?…,.-" dropped."""
    sentence = sentence.replace("嗯", "恩").replace("呣", "母")
    sentence = _FOLD.sub(lambda m: _FOLDS[m.group()], sentence)
    return _NOT_KEPT.sub("", sentence)


def normalize(text: str) -> str:
    """Chinese `text` as upstream v2 hands it to g2p (`chinese2.text_normalize`)."""
    joined = "".join(fold_punctuation(normalize_sentence(s)) for s in sentences(text))
    return _REPEATED_PUNCTUATION.sub(r"\1", joined)
