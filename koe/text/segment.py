"""Splitting long text into segments a TTS model speaks well.

Rules, in order:
1. A text that fits in `max_chars` is one segment, unchanged (so short texts are spoken exactly as
   given, and match upstream).
2. Otherwise it is cut into sentences: after CJK enders (。！？；… and full-width ！？；), then any
   closing quotes or brackets; after Western enders (. ! ? …) followed by whitespace — except after
   a known abbreviation (Mr., Dr., e.g., ...) or a single-letter initial; never inside a number
   (3.14, 1,000); and at blank lines.
3. Sentences are packed greedily into segments of at most `max_chars`; a sentence longer than that
   is cut at clause punctuation (，、,;:：), then at spaces, then hard.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf fig no vol pp approx dept est inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec mt ft".split()
)
CJK_ENDERS = "。！？；…!?;"
CLOSERS = "\"'”’」』）)]】》〉"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
CLAUSE_MARKS = "，、,;:：；"


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, each stripped, none empty."""
    sentences: list[str] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        end = None
        if ch == "\n" and text[i + 1 : i + 2] == "\n":
            end = i
        elif ch in "。！？；…" or (ch in "!?;" and _is_cjk_context(text, i)):
            end = _after_closers(text, i + 1)
        elif ch in ".!?":
            j = _after_closers(text, i + 1)
            while j < n and text[j] in ".!?":
                j = _after_closers(text, j + 1)
            if (j >= n or text[j].isspace()) and not (ch == "." and _is_abbreviation(text, i)):
                end = j
        if end is not None:
            piece = text[start:end].strip()
            if piece:
                sentences.append(piece)
            start = end
            i = max(end, i + 1)
            continue
        i += 1
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def segment_text(text: str, max_chars: int = 300) -> list[str]:
    """Segments of at most `max_chars` characters (see the module's rules)."""
    if max_chars < 8:
        raise ValueError(f"max_chars must be at least 8 (got {max_chars})")
    if len(text) <= max_chars:
        return [text] if text.strip() else []
    segments: list[str] = []
    current = ""
    for sentence in split_sentences(text):
        for piece in _fit(sentence, max_chars):
            joiner = "" if (not current or _CJK.search(current[-1:]) or _CJK.search(piece[:1])) else " "
            if current and len(current) + len(joiner) + len(piece) > max_chars:
                segments.append(current)
                current = piece
            else:
                current = f"{current}{joiner}{piece}" if current else piece
    if current:
        segments.append(current)
    return segments


def _fit(sentence: str, max_chars: int) -> list[str]:
    if len(sentence) <= max_chars:
        return [sentence]
    for marks in (CLAUSE_MARKS, " "):
        parts = _split_keep(sentence, marks)
        if len(parts) > 1:
            out: list[str] = []
            current = ""
            for part in parts:
                if current and len(current) + len(part) > max_chars:
                    out.append(current.strip())
                    current = part
                else:
                    current += part
            if current.strip():
                out.append(current.strip())
            return [p for chunk in out for p in _fit(chunk, max_chars)] if any(len(p) > max_chars for p in out) else out
    return [sentence[i : i + max_chars] for i in range(0, len(sentence), max_chars)]


def _split_keep(text: str, marks: str) -> list[str]:
    parts, start = [], 0
    for i, ch in enumerate(text):
        if ch in marks:
            parts.append(text[start : i + 1])
            start = i + 1
    if start < len(text):
        parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _after_closers(text: str, j: int) -> int:
    while j < len(text) and text[j] in CLOSERS:
        j += 1
    return j


def _is_cjk_context(text: str, i: int) -> bool:
    return bool(i > 0 and _CJK.match(text[i - 1]))


def _is_abbreviation(text: str, i: int) -> bool:
    """Is the '.' at `i` the end of an abbreviation or an initial rather than of a sentence?"""
    j = i
    while j > 0 and (text[j - 1].isalpha() or text[j - 1] == "."):
        j -= 1
    word = text[j:i].lower()
    if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha() and text[j].isupper()):
        return True
    return bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))
