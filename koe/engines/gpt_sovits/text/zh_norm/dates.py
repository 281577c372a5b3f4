"""Dates, times, phone numbers, temperatures and units, read out as upstream's normaliser does
(`GPT_SoVITS/text/zh_normalization/chronology.py`, `phonecode.py`, `quantifier.py`; PaddleSpeech's, Apache-2.0).

Upstream's quirks are kept: in a time range, the end's minutes read 半 when the START's minutes are 30; a
date's year is read digit by digit; units are replaced wherever their letters stand, in upstream's order
(so "m" before "mm", and every "s" in the sentence reads 秒)."""

from __future__ import annotations

import re

from koe.engines.gpt_sovits.text.zh_norm.numbers import DIGITS, num2str, verbalize_cardinal, verbalize_digit

# --- times -------------------------------------------------------------------------------------------
_CLOCK = r"([0-1]?[0-9]|2[0-3]):([0-5][0-9])(:([0-5][0-9]))?"
RE_TIME = re.compile(_CLOCK)
RE_TIME_RANGE = re.compile(_CLOCK + r"(~|-)" + _CLOCK)


def _time_part(digits: str) -> str:
    # minutes and seconds: a leading zero is read (08 -> 零八)
    text = num2str(digits.lstrip("0"))
    return DIGITS["0"] + text if digits.startswith("0") else text


def _clock(hour: str, minute: str, second: str | None, half_when: str) -> str:
    text = f"{num2str(hour)}点"
    if minute.lstrip("0"):
        text += "半" if int(half_when) == 30 else f"{_time_part(minute)}分"
    if second and second.lstrip("0"):
        text += f"{_time_part(second)}秒"
    return text


def replace_time(m: re.Match) -> str:
    """8:30 -> 八点半, 8:05:09 -> 八点零五分零九秒; a range (8:30-12:00, with RE_TIME_RANGE) joined by 至."""
    text = _clock(m.group(1), m.group(2), m.group(4), m.group(2))
    if len(m.groups()) > 5:
        text += "至" + _clock(m.group(6), m.group(7), m.group(9), m.group(2))
    return text


# --- dates -------------------------------------------------------------------------------------------
RE_DATE = re.compile(r"(\d{4}|\d{2})年((0?[1-9]|1[0-2])月)?(((0?[1-9])|((1|2)[0-9])|30|31)([日号]))?")


def replace_date(m: re.Match) -> str:
    """2024年3月5日 -> 二零二四年三月五日 (日 or 号 as written)."""
    text = f"{verbalize_digit(m.group(1))}年"
    if m.group(3):
        text += f"{verbalize_cardinal(m.group(3))}月"
    if m.group(5):
        text += f"{verbalize_cardinal(m.group(5))}{m.group(9)}"
    return text


RE_DATE2 = re.compile(r"(\d{4})([- /.])(0[1-9]|1[012])\2(0[1-9]|[12][0-9]|3[01])")


def replace_date2(m: re.Match) -> str:
    """2024-03-05 (or with / . or a space) -> 二零二四年三月五日."""
    return f"{verbalize_digit(m.group(1))}年{verbalize_cardinal(m.group(3))}月{verbalize_cardinal(m.group(4))}日"


# --- phone numbers -----------------------------------------------------------------------------------
RE_MOBILE_PHONE = re.compile(r"(?<!\d)((\+?86 ?)?1([38]\d|5[0-35-9]|7[678]|9[89])\d{8})(?!\d)")
RE_TELEPHONE = re.compile(r"(?<!\d)((0(10|2[1-3]|[3-9]\d{2})-?)?[1-9]\d{6,7})(?!\d)")
RE_NATIONAL_UNIFORM_NUMBER = re.compile(r"(400)(-)?\d{3}(-)?\d{4}")


def replace_mobile(m: re.Match) -> str:
    """A mobile number digit by digit (1 as 幺), its space-separated parts joined by "，"."""
    return "，".join(verbalize_digit(part, alt_one=True) for part in m.group(0).strip("+").split())


def replace_phone(m: re.Match) -> str:
    """A landline or 400 number digit by digit (1 as 幺), its dash-separated parts joined by "，"."""
    return "，".join(verbalize_digit(part, alt_one=True) for part in m.group(0).split("-"))


# --- temperatures and units --------------------------------------------------------------------------
RE_TEMPERATURE = re.compile(r"(-?)(\d+(\.\d+)?)(°C|℃|度|摄氏度)")

UNITS = {
    "cm2": "平方厘米",
    "cm²": "平方厘米",
    "cm3": "立方厘米",
    "cm³": "立方厘米",
    "cm": "厘米",
    "db": "分贝",
    "ds": "毫秒",
    "kg": "千克",
    "km": "千米",
    "m2": "平方米",
    "m²": "平方米",
    "m³": "立方米",
    "m3": "立方米",
    "ml": "毫升",
    "m": "米",
    "mm": "毫米",
    "s": "秒",
}  # replaced in this order


def replace_temperature(m: re.Match) -> str:
    """-3°C -> 零下三度 (摄氏度 when written so)."""
    unit = "摄氏度" if m.group(4) == "摄氏度" else "度"
    return f"{'零下' if m.group(1) else ''}{num2str(m.group(2))}{unit}"


def replace_measure(sentence: str) -> str:
    """Every unit's letters, wherever they stand, by its Chinese name (in `UNITS`' order)."""
    for notation, name in UNITS.items():
        sentence = sentence.replace(notation, name)
    return sentence
