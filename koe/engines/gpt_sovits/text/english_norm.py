"""English text normalisation as GPT-SoVITS v2 does it before its g2p (upstream's
`text/english.py:text_normalize` and `text/en_normalization/expend.py:normalize`): numbers,
currencies, times, units, fractions and ordinals spelled out with inflect, accents stripped, every
character but ASCII letters, spaces and `'.,?!-` dropped, and runs of punctuation cut to their first
mark.

Upstream's quirks are kept on purpose, since the phonemes the model saw in training came from them:
- its table of CJK punctuation is applied as a regex of *escaped* keys, so only `。！？` become
  `.!?`; `；：，` and curly quotes are not mapped here (the first two are then dropped as
  non-ASCII, so a Chinese comma is no pause in English text);
- `1. ` (a number, a dot, a space) is read as an ordinal with a comma: "1st, ";
- `a + b`, `a - b`, `a × b`, `a ÷ b`, `a = b` between numbers or single letters are read as
  arithmetic, repeatedly, so `x - y` inside words such as "well - known" becomes "minus";
- a minus sign after whitespace (or at the start) is "negative", the whitespace before it eaten
  ("is -5" -> "isnegative five");
- `$`/`£` amounts with dollars and cents, `12:30` as a 12-hour time with a.m./p.m., a number with
  a unit (m, km, km/h, ft, L, tbsp, tsp, h, min, s, °C, °F) singular only for a bare 1;
- years 1001-2999 read in pairs ("nineteen ninety-nine", "two thousand five", "eleven hundred");
- every capital letter not at the start of the text or after whitespace starts a new word
  ("OpenAI" -> "Open A I", "USA" -> "U S A").
"""

from __future__ import annotations

import re
import unicodedata

import inflect

__all__ = ["expand", "normalize"]

_inflect = inflect.engine()

UNITS = {
    "m": ("meter", "meters"),
    "km": ("kilometer", "kilometers"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "ft": ("feet", "feet"),
    "L": ("liter", "liters"),
    "tbsp": ("tablespoon", "tablespoons"),
    "tsp": ("teaspoon", "teaspoons"),
    "h": ("hour", "hours"),
    "min": ("minute", "minutes"),
    "s": ("second", "seconds"),
    "°C": ("degree celsius", "degrees celsius"),
    "°F": ("degree fahrenheit", "degrees fahrenheit"),
}
ARITHMETIC = {"+": " plus ", "-": " minus ", "×": " times ", "÷": " divided by ", "=": " Equals "}

# The operand of an arithmetic sign: a signed decimal, a bare decimal fraction, or one letter, each
# with optional superscripts (upstream's groups: 1 the left operand, 8 the sign, 9 the right one).
_SUPERSCRIPTS = "[⁰¹²³⁴⁵⁶⁷⁸⁹ˣʸⁿ]*"
_OPERAND = rf"((-?)((\d+)(\.\d+)?{_SUPERSCRIPTS})|(\.\d+{_SUPERSCRIPTS})|([A-Za-z]{_SUPERSCRIPTS}))"
_ARITHMETIC_RE = re.compile(_OPERAND + r"\s+([+\-×÷=])\s+" + _OPERAND)
_NEGATIVE_RE = re.compile(r"(?:^|\s+)(-)(\d+)")
_NUMBERED_ITEM_RE = re.compile(r"\b([0-9]+)\. ")
_GROUPED_RE = re.compile(r"([0-9][0-9,]+[0-9])")
_TIME_RE = re.compile(r"\b([01]?[0-9]|2[0-3]):([0-5][0-9])\b")
_UNIT_RE = re.compile(r"\b([0-9]+(\.[0-9]+)?(m|km|km/h|ft|L|tbsp|tsp|h|min|s|°C|°F))\b")
_POUNDS_BEFORE_RE = re.compile(r"£([0-9.,]*[0-9]+)")
_POUNDS_AFTER_RE = re.compile(r"([0-9.,]*[0-9]+)£")
_DOLLARS_BEFORE_RE = re.compile(r"\$([0-9.,]*[0-9]+)")
_DOLLARS_AFTER_RE = re.compile(r"([(0-9.,]*[0-9]+)\$")  # upstream's class holds a stray "(": "(5$" fails to parse
_DECIMAL_RE = re.compile(r"([0-9]+\.\s*[0-9]+)")
_FRACTION_RE = re.compile(r"([0-9]+/[0-9]+)")
_ORDINAL_RE = re.compile(r"[0-9]+(st|nd|rd|th)")
_NUMBER_RE = re.compile(r"[0-9]+")
_NOT_KEPT_RE = re.compile(r"[^ A-Za-z'.,?!\-]")
_INNER_CAPITAL_RE = re.compile(r"(?<!^)(?<![\s])([A-Z])")

# Upstream's CJK punctuation table is turned into a regex of escaped keys: the bracketed "classes"
# only ever match themselves, literally.
_CJK_MARKS = {"[;:：，；]": ",", '["’]': "'", "。": ".", "！": "!", "？": "?"}
_CJK_MARKS_RE = re.compile("|".join(re.escape(k) for k in _CJK_MARKS))
_PAUSES = "!?…,.-"
_PUNCTUATION_RUN_RE = re.compile(f"([{re.escape(_PAUSES)}\\s])([{re.escape(_PAUSES)}])+")


def _numbered_item(m: re.Match) -> str:
    return _inflect.ordinal(m.group(1)) + ", "


def _arithmetic(m: re.Match) -> str:
    return m.group(1) + ARITHMETIC[m.group(8)] + m.group(9)


def _negative(m: re.Match) -> str:
    return ("negative " if m.group(1) else "") + m.group(2)


def _time(m: re.Match) -> str:
    hours, minutes = int(m.group(1)), int(m.group(2))
    period = "a.m." if hours < 12 else "p.m."
    if hours > 12:
        hours -= 12
    hour = _inflect.number_to_words(hours)
    if minutes == 0:
        return f"{hour} o'clock {period}"
    return f"{hour} {_inflect.number_to_words(minutes)} {period}"


def _unit(m: re.Match) -> str:
    unit = m.group(3)
    amount = int(m.group(1).replace(unit, "").replace(".", ""))  # "1.2" -> 12: any decimal reads plural
    plural = not (m.group(2) is None and amount == 1)
    return m.group(1).replace(unit, " " + UNITS[unit][plural])


def _money(whole: str, wholes: str, part: str, parts: str):
    """Upstream's `_expand_pounds` / `_expand_dollars`: "3.5" -> "3 dollars and 50 cents" (digits,
    spelled out later), the fraction padded to two digits but never cut."""

    def expand(m: re.Match) -> str:
        amount = m.group(1)
        pieces = amount.split(".")
        if len(pieces) > 2:
            return amount + " " + wholes
        units = int(pieces[0]) if pieces[0] else 0
        cents = int(pieces[1].ljust(2, "0")) if len(pieces) > 1 and pieces[1] else 0
        unit_word = whole if units == 1 else wholes
        cent_word = part if cents == 1 else parts
        if units and cents:
            return f"{units} {unit_word} and {cents} {cent_word}"
        if units:
            return f"{units} {unit_word}"
        if cents:
            return f"{cents} {cent_word}"
        return "zero " + wholes

    return expand


def _decimal(m: re.Match) -> str:
    whole, fraction = m.group(1).split(".")
    return whole + " point " + " ".join(fraction)  # digit by digit (spaces after the dot too)


def _fraction(m: re.Match) -> str:
    numerator, denominator = (int(x) for x in m.group(0).split("/"))
    said = _inflect.number_to_words(numerator)
    if denominator == 1:
        return said
    if denominator == 2:
        return f"{said} {'half' if numerator == 1 else 'halves'}"
    under = _inflect.ordinal(_inflect.number_to_words(denominator))
    return f"{said} {under}{'s' if numerator > 1 else ''}"


def _ordinal(m: re.Match) -> str:
    return _inflect.number_to_words(m.group(0))


def _number(m: re.Match) -> str:
    n = int(m.group(0))
    if 1000 < n < 3000:
        if n == 2000:
            return "two thousand"
        if 2000 < n < 2010:
            return "two thousand " + _inflect.number_to_words(n % 100)
        if n % 100 == 0:
            return _inflect.number_to_words(n // 100) + " hundred"
        return _inflect.number_to_words(n, andword="", zero="oh", group=2).replace(", ", " ")
    return _inflect.number_to_words(n, andword="")


def expand(text: str) -> str:
    """Upstream's `en_normalization.expend.normalize`: the spelled-out, ASCII-only text."""
    text = _NUMBERED_ITEM_RE.sub(_numbered_item, text)
    while _ARITHMETIC_RE.search(text):
        text = _ARITHMETIC_RE.sub(_arithmetic, text)
    text = _NEGATIVE_RE.sub(_negative, text)
    text = _GROUPED_RE.sub(lambda m: m.group(1).replace(",", ""), text)
    text = _TIME_RE.sub(_time, text)
    text = _UNIT_RE.sub(_unit, text)
    pounds, dollars = _money("pound", "pounds", "penny", "pence"), _money("dollar", "dollars", "cent", "cents")
    text = _POUNDS_BEFORE_RE.sub(pounds, text)
    text = _POUNDS_AFTER_RE.sub(pounds, text)
    text = _DOLLARS_BEFORE_RE.sub(dollars, text)
    text = _DOLLARS_AFTER_RE.sub(dollars, text)
    text = _DECIMAL_RE.sub(_decimal, text)
    text = _FRACTION_RE.sub(_fraction, text)
    text = _ORDINAL_RE.sub(_ordinal, text)
    text = _NUMBER_RE.sub(_number, text)
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    text = text.replace("%", " percent")
    text = _NOT_KEPT_RE.sub("", text)
    text = re.sub(r"(?i)i\.e\.", "that is", text)
    text = re.sub(r"(?i)e\.g\.", "for example", text)
    return _INNER_CAPITAL_RE.sub(r" \1", text)


def normalize(text: str) -> str:
    """Upstream's English `text_normalize`: its CJK punctuation table, `expand`, then every run of
    pause marks after a pause mark or whitespace cut to that first character (so "wait..." is
    "wait." and "a , b" is "a  b"), which keeps a reference's trailing punctuation from leaking."""
    text = _CJK_MARKS_RE.sub(lambda m: _CJK_MARKS[m.group()], text)
    text = expand(text)
    return _PUNCTUATION_RUN_RE.sub(r"\1", text)
