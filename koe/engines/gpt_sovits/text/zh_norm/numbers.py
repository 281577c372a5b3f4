"""Numbers read out in Chinese characters, as upstream's normaliser does (`GPT_SoVITS/text/zh_normalization/num.py`,
PaddleSpeech's, Apache-2.0): cardinals with 十/百/千/万/亿, digit strings, decimals, fractions, percentages,
signed numbers, ranges, numbers before measure words, arithmetic, powers, version numbers.

Each rule is a compiled pattern and a `replace_*` function for `re.sub`; `normalize_sentence` (the package's
`__init__`) applies them in upstream's order. Upstream's quirks are kept: a decimal part ending in zeros keeps
one zero ("3.20" -> 三点二零), "+" after a count reads 多, a lone 二 before a measure word reads 两."""

from __future__ import annotations

import re

DIGITS = dict(zip("0123456789", "零一二三四五六七八九", strict=True))
UNITS = {1: "十", 2: "百", 3: "千", 4: "万", 8: "亿"}  # digits below the unit -> the unit

# The measure words a count reads before (upstream's alternation, in its order: the first that matches wins).
MEASURE_WORDS = (
    "(处|台|架|枚|趟|幅|平|方|堵|间|床|株|批|项|例|列|篇|栋|注|亩|封|艘|把|目|套|段|人|所|朵|匹|张|座|回|场|尾|条|个|首|阙|阵|网|炮|顶|丘|棵|只|支|袭|辆|挑|担|"
    "颗|壳|窠|曲|墙|群|腔|砣|座|客|贯|扎|捆|刀|令|打|手|罗|坡|山|岭|江|溪|钟|队|单|双|对|出|口|头|脚|板|跳|枝|件|贴|针|线|管|名|位|身|堂|课|本|页|家|户|层|丝|毫|"
    "厘|分|钱|两|斤|担|铢|石|钧|锱|忽|(千|毫|微)克|毫|厘|(公)分|分|寸|尺|丈|里|寻|常|铺|程|(千|分|厘|毫|微)米|米|撮|勺|合|升|斗|石|盘|碗|碟|叠|桶|笼|盆|盒|杯|钟|斛|"
    "锅|簋|篮|盘|桶|罐|瓶|壶|卮|盏|箩|箱|煲|啖|袋|钵|年|月|日|季|刻|时|周|天|秒|分|小时|旬|纪|岁|世|更|夜|春|夏|秋|冬|代|伏|辈|丸|泡|粒|颗|幢|堆|条|根|支|道|面|"
    "片|张|颗|块|元|(亿|千万|百万|万|千|百)|(亿|千万|百万|万|千|百|美|)元|(亿|千万|百万|万|千|百|十|)吨|(亿|千万|百万|万|千|百|)块|角|毛|分)"
)


# --- verbalisation -----------------------------------------------------------------------------------
def _cardinal_parts(digits: str, use_zero: bool = True) -> list[str]:
    # the characters of a digit string's value: the largest unit below its length splits it in two,
    # each half read the same way; a single digit after stripped zeros is read with a 零 before it
    stripped = digits.lstrip("0")
    if not stripped:
        return []
    if len(stripped) == 1:
        if use_zero and len(stripped) < len(digits):
            return [DIGITS["0"], DIGITS[stripped]]
        return [DIGITS[stripped]]
    unit = max(power for power in UNITS if power < len(stripped))
    return _cardinal_parts(digits[:-unit]) + [UNITS[unit]] + _cardinal_parts(digits[-unit:])


def verbalize_cardinal(digits: str) -> str:
    """A digit string as a cardinal: "1024" -> 一千零二十四, "10" -> 十 (a leading 一十 drops its 一),
    zeros only -> 零, "" -> ""."""
    if not digits:
        return ""
    digits = digits.lstrip("0")
    if not digits:
        return DIGITS["0"]
    parts = _cardinal_parts(digits)
    if len(parts) >= 2 and parts[0] == DIGITS["1"] and parts[1] == UNITS[1]:
        parts = parts[1:]
    return "".join(parts)


def verbalize_digit(digits: str, alt_one: bool = False) -> str:
    """Digit by digit ("2024" -> 二零二四); `alt_one` reads 1 as 幺, as in phone numbers."""
    text = "".join(DIGITS[d] for d in digits)
    return text.replace("一", "幺") if alt_one else text


def num2str(number: str) -> str:
    """An unsigned decimal: its integer part as a cardinal, then 点 and the decimals digit by digit
    (trailing zeros dropped but one, as upstream: "3.20" -> 三点二零); "" before a point reads 零."""
    parts = number.split(".")
    if len(parts) > 2:
        raise ValueError(f"{number!r} has more than one decimal point")
    integer, decimals = parts[0], parts[1] if len(parts) == 2 else ""
    text = verbalize_cardinal(integer)
    decimals = decimals.rstrip("0") + "0" if decimals.endswith("0") else decimals.rstrip("0")
    if decimals:
        text = (text or "零") + "点" + verbalize_digit(decimals)
    return text


def _sign(sign: str, word: str = "负") -> str:
    return word if sign else ""


# --- the rules ---------------------------------------------------------------------------------------
RE_FRAC = re.compile(r"(-?)(\d+)/(\d+)")


def replace_frac(m: re.Match) -> str:
    """3/4 -> 四分之三."""
    return f"{_sign(m.group(1))}{num2str(m.group(3))}分之{num2str(m.group(2))}"


RE_PERCENTAGE = re.compile(r"(-?)(\d+(\.\d+)?)%")


def replace_percentage(m: re.Match) -> str:
    """12.5% -> 百分之十二点五."""
    return f"{_sign(m.group(1))}百分之{num2str(m.group(2))}"


RE_INTEGER = re.compile(r"(-)(\d+)")


def replace_negative_num(m: re.Match) -> str:
    """-10 -> 负十."""
    return f"{_sign(m.group(1))}{num2str(m.group(2))}"


RE_DEFAULT_NUM = re.compile(r"\d{3}\d*")


def replace_default_num(m: re.Match) -> str:
    """Three or more digits left over (a code, 00078) are read digit by digit, 1 as 幺."""
    return verbalize_digit(m.group(0), alt_one=True)


_POWERS = "⁰¹²³⁴⁵⁶⁷⁸⁹ˣʸⁿ"
_OPERAND = rf"((-?)((\d+)(\.\d+)?[{_POWERS}]*)|(\.\d+[{_POWERS}]*)|([A-Za-z][{_POWERS}]*))"
RE_ASMD = re.compile(_OPERAND + r"([\+\-\×÷=])" + _OPERAND)
_OPERATORS = {"+": "加", "-": "减", "×": "乘", "÷": "除", "=": "等于"}


def replace_asmd(m: re.Match) -> str:
    """a+b, a-b, a×b, a÷b, a=b: the operator read out, the operands left for the later rules."""
    return m.group(1) + _OPERATORS[m.group(8)] + m.group(9)


RE_POWER = re.compile(f"[{_POWERS}]+")
_POWER_DIGITS = dict(zip(_POWERS, "0123456789xyn", strict=True))


def replace_power(m: re.Match) -> str:
    """x² -> x的2次方 (the exponent's digits are read by a later rule)."""
    return "的" + "".join(_POWER_DIGITS[c] for c in m.group(0)) + "次方"


RE_DECIMAL_NUM = re.compile(r"(-?)((\d+)(\.\d+))|(\.(\d+))")
RE_POSITIVE_QUANTIFIERS = re.compile(r"(\d+)([多余几\+])?" + MEASURE_WORDS)
RE_NUMBER = re.compile(r"(-?)((\d+)(\.\d+)?)|(\.(\d+))")


def replace_positive_quantifier(m: re.Match) -> str:
    """A count before a measure word: 2个 -> 两个, 10+人 -> 十多人."""
    number = num2str(m.group(1))
    approx = "多" if m.group(2) == "+" else (m.group(2) or "")
    return f"{'两' if number == '二' else number}{approx}{m.group(3)}"


def replace_number(m: re.Match) -> str:
    """A signed number (-1.5 -> 负一点五); a bare decimal (.5) is read from its digits alone (五), as upstream."""
    if m.group(5):
        return num2str(m.group(5))
    return f"{_sign(m.group(1))}{num2str(m.group(2))}"


RE_RANGE = re.compile(r"(?<![\d\+\-\×÷=])((-?)((\d+)(\.\d+)?))[-~]((-?)((\d+)(\.\d+)?))(?![\d\+\-\×÷=])")


def replace_range(m: re.Match) -> str:
    """1-3 or 1~3 -> 一到三."""
    return f"{RE_NUMBER.sub(replace_number, m.group(1))}到{RE_NUMBER.sub(replace_number, m.group(6))}"


_RANGE_UNITS = "(%|°C|℃|度|摄氏度|cm2|cm²|cm3|cm³|cm|db|ds|kg|km|m2|m²|m³|m3|ml|m|mm|s)"
RE_TO_RANGE = re.compile(r"((-?)((\d+)(\.\d+)?)|(\.(\d+)))" + _RANGE_UNITS + r"[~]((-?)((\d+)(\.\d+)?)|(\.(\d+)))" + _RANGE_UNITS)


def replace_to_range(m: re.Match) -> str:
    """A range of measured values with ~ (20℃~30℃): the ~ read 至, the rest left for the later rules."""
    return m.group(0).replace("~", "至")


RE_VERSION_NUM = re.compile(r"((\d+)(\.\d+)(\.\d+)?(\.\d+)+)")


def replace_version_num(m: re.Match) -> str:
    """1.2.3 -> 一点二点三 (each digit alone)."""
    return "".join("点" if c == "." else num2str(c) for c in m.group(1))
