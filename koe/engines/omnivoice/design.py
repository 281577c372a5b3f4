"""Voice design: the instruction vocabulary OmniVoice was trained on, checked and normalised as
upstream's `generate(instruct=...)` does it.

An instruction is items separated by commas (half- or full-width): a gender, an age, a pitch,
whispering, an English accent or a Chinese dialect, at most one of each kind, in English or
Chinese. Items are matched lower-cased; an unknown item is an error that suggests the closest
valid one. A dialect makes the instruction Chinese, an accent English (both together are an
error); otherwise it is Chinese when the text to speak holds a CJK ideograph. Items are
translated into that language where they have a counterpart and joined with ", " (or "，" when
any item is Chinese).
"""

from __future__ import annotations

import difflib
import re

__all__ = ["InvalidInstruction", "resolve_instruct", "valid_items"]

_CJK_RE = re.compile(r"[\u4e00-\u9fff]")

# The kinds of item: (English, Chinese) pairs, or items of one language only.
_PAIRED = (
    (("male", "男"), ("female", "女")),
    (("child", "儿童"), ("teenager", "少年"), ("young adult", "青年"), ("middle-aged", "中年"), ("elderly", "老年")),
    (("very low pitch", "极低音调"), ("low pitch", "低音调"), ("moderate pitch", "中音调"), ("high pitch", "高音调"), ("very high pitch", "极高音调")),
    (("whisper", "耳语"),),
)
_ACCENTS = frozenset(
    f"{a} accent" for a in ("american", "british", "australian", "chinese", "canadian", "indian", "korean", "portuguese", "russian", "japanese")
)
_DIALECTS = frozenset(f"{d}话" for d in ("河南", "陕西", "四川", "贵州", "云南", "桂林", "济南", "石家庄", "甘肃", "宁夏", "青岛", "东北"))

_TO_ZH = {en: zh for kind in _PAIRED for en, zh in kind}
_TO_EN = {zh: en for en, zh in _TO_ZH.items()}
_KINDS = [frozenset(x for pair in kind for x in pair) for kind in _PAIRED] + [_ACCENTS, _DIALECTS]
_VALID = frozenset(_TO_ZH) | frozenset(_TO_EN) | _ACCENTS | _DIALECTS


class InvalidInstruction(ValueError):
    """An instruction outside OmniVoice's vocabulary, or one that contradicts itself."""


def valid_items() -> tuple[list[str], list[str]]:
    """(English items, Chinese items), sorted."""
    return sorted(i for i in _VALID if not _CJK_RE.search(i)), sorted(i for i in _VALID if _CJK_RE.search(i))


def resolve_instruct(instruct: str | None, text: str = "") -> str | None:
    """The instruction as the prompt carries it for speaking `text`, or None for none (module docstring)."""
    if instruct is None or not instruct.strip():
        return None
    whole = instruct.strip()
    items = [x for x in re.split(r"\s*[,，]\s*", whole) if x]
    normalised, unknown = [], []
    for raw in items:
        item = raw.strip().lower()
        if item in _VALID:
            normalised.append(item)
        else:
            close = difflib.get_close_matches(item, _VALID, n=1, cutoff=0.6)
            unknown.append(f"{raw!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if unknown:
        english, chinese = valid_items()
        raise InvalidInstruction(
            f"unsupported voice-design items in {whole!r}: {', '.join(unknown)}. "
            f"Valid English items: {', '.join(english)}. Valid Chinese items: {'，'.join(chinese)}."
        )
    dialect = any(i in _DIALECTS for i in normalised)
    accent = any(i in _ACCENTS for i in normalised)
    if dialect and accent:
        raise InvalidInstruction("a voice design cannot mix a Chinese dialect and an English accent (dialects are for Chinese speech, accents for English)")
    chinese = True if dialect else False if accent else bool(text and _CJK_RE.search(text))
    table = _TO_ZH if chinese else _TO_EN
    normalised = [table.get(i, i) for i in normalised]
    clashes = [hits for kind in _KINDS if len(hits := [i for i in normalised if i in kind]) > 1]
    if clashes:
        raise InvalidInstruction(
            "conflicting voice-design items of one kind: "
            + "; ".join(" vs ".join(repr(x) for x in c) for c in clashes)
            + " (at most one gender, age, pitch, style, accent or dialect)"
        )
    return ("，" if any(_CJK_RE.search(i) for i in normalised) else ", ").join(normalised)
