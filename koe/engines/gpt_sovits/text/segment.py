"""GPT-SoVITS's ways of cutting a long text into the sentences it synthesises one by one (upstream's
`TTS_infer_pack/text_segmentation_method.py`; the API's `text_split_method`). Each method returns
the text with "\\n" where it cuts; pieces that are nothing but punctuation and spaces are dropped.

- cut0: no cut;
- cut1: every four sentences (a sentence ends at any of `SENTENCE_ENDS`), the last group taking
  what is left over (up to seven);
- cut2: pieces of more than 50 characters, a shorter last piece joined to the one before;
- cut3: at each Chinese full stop 。;
- cut4: at each "." that is not between two digits;
- cut5: after every punctuation mark of `CUT5_MARKS` (not a "." between digits).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["METHODS", "SENTENCE_ENDS", "cut0", "cut1", "cut2", "cut3", "cut4", "cut5", "get_method", "sentences", "split_long"]

SENTENCE_ENDS = frozenset("，。？！,.?!~:：—…")
"""Upstream's `splits`: the marks a sentence ends at."""
BLANK = frozenset("!?…,.- ")
"""A piece made of these alone is dropped."""
CUT5_MARKS = frozenset(",.;?!、，。？！;：…")


def _blank(piece: str, marks: frozenset[str] = BLANK) -> bool:
    return set(piece).issubset(marks)


def sentences(text: str) -> list[str]:
    """Upstream's `split`: "……" read as 。 and "——" as ，, a 。 added unless the text ends a sentence,
    then the text cut after every sentence end."""
    text = text.replace("……", "。").replace("——", "，")
    if text[-1] not in SENTENCE_ENDS:
        text += "。"
    out, start = [], 0
    for i, c in enumerate(text):
        if c in SENTENCE_ENDS:
            out.append(text[start : i + 1])
            start = i + 1
    return out


def cut0(text: str) -> str:
    return "\n" if _blank(text) else text


def cut1(text: str) -> str:
    text = text.strip("\n")
    parts = sentences(text)
    starts = list(range(0, len(parts), 4))
    starts[-1] = None  # the last group runs to the end
    if len(starts) > 1:
        pieces = ["".join(parts[a:b]) for a, b in zip(starts[:-1], starts[1:])]
    else:
        pieces = [text]
    return "\n".join(p for p in pieces if not _blank(p))


def cut2(text: str) -> str:
    text = text.strip("\n")
    parts = sentences(text)
    if len(parts) < 2:
        return text
    pieces, current = [], ""
    for part in parts:
        current += part
        if len(current) > 50:  # upstream counts the pieces' lengths: the same as the joined length
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    if len(pieces) > 1 and len(pieces[-1]) < 50:
        pieces[-2:] = [pieces[-2] + pieces[-1]]
    return "\n".join(p for p in pieces if not _blank(p))


def cut3(text: str) -> str:
    text = text.strip("\n")
    return "\n".join(p for p in text.strip("。").split("。") if not _blank(p))


def cut4(text: str) -> str:
    text = text.strip("\n")
    return "\n".join(p for p in re.split(r"(?<!\d)\.(?!\d)", text.strip(".")) if not _blank(p))


def cut5(text: str) -> str:
    text = text.strip("\n")
    pieces, current = [], []
    for i, c in enumerate(text):
        current.append(c)
        between_digits = c == "." and 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit()
        if c in CUT5_MARKS and not between_digits:
            pieces.append("".join(current))
            current = []
    if current:
        pieces.append("".join(current))
    return "\n".join(p for p in pieces if not _blank(p, CUT5_MARKS))


METHODS: dict[str, Callable[[str], str]] = {"cut0": cut0, "cut1": cut1, "cut2": cut2, "cut3": cut3, "cut4": cut4, "cut5": cut5}


def get_method(name: str) -> Callable[[str], str]:
    if name not in METHODS:
        raise ValueError(f"Method {name} not found")
    return METHODS[name]


_SENTENCE_END_RE = re.compile("([" + "".join(re.escape(c) for c in sorted(SENTENCE_ENDS)) + "])")


def split_long(text: str, max_len: int = 510) -> list[str]:
    """Upstream's `split_big_text`: a sentence longer than BERT takes, cut at sentence ends into
    pieces of at most `max_len` characters (a piece between two ends may still be longer)."""
    out, current = [], ""
    for part in _SENTENCE_END_RE.split(text):
        if len(current + part) > max_len:
            out.append(current)
            current = part
        else:
            current += part
    if current:
        out.append(current)
    return out
