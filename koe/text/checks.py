"""Checks on text a caller hands koe (what to say, instructions, voice names, transcripts).

Shared by every entry point (the engine contract, the service planner, the HTTP server, the CLI)
so each gives the same answer, worded with its own name for the field:

- a lone surrogate (U+D800-U+DFFF: half of a UTF-16 pair, which no UTF-8 text can hold) is
  refused everywhere; a tokenizer, SQLite or a JSON encoder would fail on it later;
- control characters (C0, DEL, C1) other than the whitespace ones (tab, line feed, vertical tab,
  form feed, carriage return, next line U+0085) are refused where the service takes text: a NUL
  or an escape sequence is never meant to be spoken, and refusing it (naming where it is) is
  clearer than speaking around it;
- text with nothing to speak (only whitespace, zero-width and other format characters such as
  U+200B or the BOM, controls, combining marks on nothing, blank fillers) is refused.

Valid text passes unchanged: nothing here rewrites what is spoken.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")  # Cc less \t \n \v \f \r and U+0085
# Letters and symbols that render as nothing (Hangul fillers, the blank braille pattern).
_BLANK_LOOKALIKES = frozenset("\u115f\u1160\u3164\uffa0\u2800")


@dataclass(frozen=True)
class TextProblem:
    """What is wrong with a text: `kind` is "type", "surrogate", "control" or "silent"; `index` the
    first offending character (None for "type" and "silent"); `message` says it in words."""

    kind: str
    message: str
    index: int | None = None


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text`, or None."""
    m = _SURROGATE.search(text)
    return None if m is None else m.start()


def control_character(text: str) -> int | None:
    """The index of the first control character that is not whitespace, or None."""
    m = _CONTROL.search(text)
    return None if m is None else m.start()


def has_speech(text: str) -> bool:
    """Whether `text` holds at least one letter, digit, punctuation mark or symbol that shows."""
    for ch in text:
        if unicodedata.category(ch)[0] in "LNPS" and ch not in _BLANK_LOOKALIKES:
            return True
    return False


def _codepoint(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def text_problem(text: object, what: str, *, controls: bool = False, speech: bool = False) -> TextProblem | None:
    """The first problem of `text` (named `what` in the message), or None.

    Always: it must be a str without lone surrogates. `speech=True` also refuses text with
    nothing to speak, then `controls=True` control characters that are not whitespace (so text
    of NULs alone has "nothing to speak", a NUL among words is named where it is).
    """
    if not isinstance(text, str):
        return TextProblem("type", f"{what} must be a string, got {type(text).__name__}")
    i = lone_surrogate(text)
    if i is not None:
        return TextProblem(
            "surrogate", f"{what}: a lone surrogate ({_codepoint(text[i])}, half of a UTF-16 pair) at character {i} is not valid Unicode text", i
        )
    if speech and not has_speech(text):
        return TextProblem("silent", f"{what} has nothing to speak: only whitespace, invisible or control characters")
    if controls:
        i = control_character(text)
        if i is not None:
            return TextProblem("control", f"{what}: the control character {_codepoint(text[i])} at character {i} cannot be spoken; remove it", i)
    return None


class Utf8Error(ValueError):
    """Bytes that are not UTF-8 text; `offset` is the first bad byte's position."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def decode_utf8(data: bytes, what: str) -> str:
    """`data` as UTF-8 text (a leading byte-order mark dropped); `Utf8Error` naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        raise Utf8Error(f"{what} is not UTF-8 text: byte 0x{data[start]:02x} at offset {start} cannot be decoded", start) from None


def argument_bytes_problem(text: str, what: str) -> str | None:
    """For a command-line argument: where it held bytes that are not UTF-8 (Python decodes those as
    lone surrogates U+DC80-U+DCFF, "surrogateescape"), the message naming the first one's byte
    offset; else None (other surrogates are left to `text_problem`)."""
    if lone_surrogate(text) is None:
        return None
    try:
        raw = text.encode("utf-8", "surrogateescape")
        raw.decode("utf-8")
    except UnicodeEncodeError:
        return None
    except UnicodeDecodeError as e:
        return f"{what} is not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start} cannot be decoded"
    return None
