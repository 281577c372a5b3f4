"""Splitting long text into segments a TTS model speaks well.

Rules, in order:
1. A text that fits in `max_chars` is one segment, unchanged (so short texts are spoken exactly as
   given, and match upstream).
2. Otherwise it is cut into sentences (`split_sentences`, in the text's language): after CJK
   enders (。！？；… and full-width ！？；, a run of them counting as one), then any closing quotes
   or brackets; after Western enders (. ! ? …) followed by whitespace (and a French » after a
   space); and at blank lines. Never inside a number (3.14, 1,000), a URL or an e-mail address.
3. Sentences are packed greedily into segments of at most `max_chars`; a sentence longer than that
   is cut at clause punctuation (，、,;:：), then at spaces, then hard.

Which full stops end a sentence. koe's own rules decide what they know, in this order: an ellipsis
or ?/! ends one; a stop before a lowercase word does not (p. ex. des pommes, т.е. дорого); nor
after a single-letter initial (J. K. Rowling, А. С. Пушкин) or an abbreviation that leads into a
name or a number (Dr., Nr., p., ул., `koe.text.abbreviations`); a list-closing abbreviation (etc.,
usw., ecc., т.д.) before a capital does; so does a stop after a number (Nr. 5. Es ...) or before
closing quotes, except German ordinals (am 3. Mai, der 2. Weltkrieg). What is left, a word koe does
not know followed by a stop and a capital ("Franken. Vgl.", "Gen. Miller"), is decided by
sentencex (Wikimedia's segmenter: MIT, maintained, abbreviation lists for ~300 languages, Rust,
well under a millisecond for thousands of characters). Measured on tests/data/sentences.json (73
cases in ten languages): the library alone splits 53 right, koe's earlier hand-written rules 39,
the rules above alone 68, the two together all 73. The library misses German ordinals, "etc."
closing a sentence, "1.º", CJK ellipses and the pinned "Wait... what?"; the rules fix those, and
the library supplies the abbreviations no table here lists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from koe.text.abbreviations import is_german_ordinal, non_terminal, terminal
from koe.text.language import resolve_language

CLOSERS = "\"'”’“‘」』）)]】》〉»«›"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
CLAUSE_MARKS = "，、,;:：；"
_SPACED_CLOSERS = "»›"  # French puts a space before its closing guillemet: « Je viens. »


def split_sentences(text: str, language: str | None = None) -> list[str]:
    """Sentences of `text`, each stripped, none empty. `language`: a model's language name
    ("german"), a code ("de") or None/"auto" (guessed from the text's script and words)."""
    sentences: list[str] = []
    judge = _Stops(text, *resolve_language(language, text))
    start = 0
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        end = None
        if ch == "\n" and text[i + 1 : i + 2] == "\n":
            end = i
        elif ch in "。！？；…" or (ch in "!?;" and _is_cjk_context(text, i)):
            j = i + 1
            while j < n and text[j] in "。！？；…!?":
                j += 1
            end = _after_closers(text, j)
        elif ch in ".!?":
            j = _after_closers(text, i + 1)
            while j < n and text[j] in ".!?":
                j = _after_closers(text, j + 1)
            j = _after_spaced_closer(text, j)
            if (j >= n or text[j].isspace()) and judge.ends(i, j):
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


def segment_text(text: str, max_chars: int = 300, language: str | None = None) -> list[str]:
    """Segments of at most `max_chars` characters (see the module's rules); `language` as for
    `split_sentences`."""
    if max_chars < 8:
        raise ValueError(f"max_chars must be at least 8 (got {max_chars})")
    if len(text) <= max_chars:
        return [text] if text.strip() else []
    segments: list[str] = []
    current = ""
    for sentence in split_sentences(text, language):
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


def stream_segments(pieces: Iterable[str], max_chars: int = 300, language: str | None = None) -> Iterator[str]:
    """Segments of text that arrives in pieces (as an LLM writes it), each as soon as it is
    complete: a sentence once the next one has begun with a whole word (a space after it, or a CJK
    character), so that more text cannot change where it ends (`split_sentences`' rules); a
    sentence longer than `max_chars` cut as `segment_text` cuts one, its parts but the last as soon
    as they are known; whatever is left when the pieces end. Each sentence is its own segment (not
    packed with the next, which would mean waiting for it). A piece that is not a string is a
    `TypeError`."""
    if max_chars < 8:
        raise ValueError(f"max_chars must be at least 8 (got {max_chars})")
    buffer = ""
    for piece in pieces:
        if not isinstance(piece, str):
            raise TypeError(f"text pieces must be strings, got {type(piece).__name__}")
        buffer += piece
        while True:
            sentences = split_sentences(buffer, language)
            if not sentences:
                break
            first = sentences[0]
            end = buffer.find(first) + len(first)
            rest = buffer[end:]
            if len(sentences) > 1 and (re.search(r"\S\s", rest) or _CJK.match(rest.lstrip()[:1])):
                yield from _fit(first, max_chars)
                buffer = rest
                continue
            parts = _fit(first, max_chars) if len(first) > max_chars else [first]
            if len(parts) > 1:  # a long sentence: its parts but the last are final
                for part in parts[:-1]:
                    yield part
                    buffer = buffer[buffer.find(part) + len(part) :]
            break
    yield from (p for sentence in split_sentences(buffer, language) for p in _fit(sentence, max_chars))


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


def _after_spaced_closer(text: str, j: int) -> int:
    """Past a closing guillemet set off by spaces ("demain. »"), if one follows `j`."""
    k = j
    while k < len(text) and text[k] in " \u00a0\u202f":
        k += 1
    return _after_closers(text, k) if k > j and k < len(text) and text[k] in _SPACED_CLOSERS else j


def _is_cjk_context(text: str, i: int) -> bool:
    return bool(i > 0 and _CJK.match(text[i - 1]))


class _Stops:
    """Does the ender at `i` (its run and closers reach `j`, whitespace or the end follows) end a
    sentence? koe's rules first, sentencex for the rest (see the module doc)."""

    def __init__(self, text: str, code: str, guessed: bool = False) -> None:
        self.text = text
        self.code = code
        self.non_terminal = non_terminal(code, guessed=guessed)
        self.terminal = terminal(code, guessed=guessed)
        self._library: frozenset[int] | None = None

    def ends(self, i: int, j: int) -> bool:
        text = self.text
        if text[i] != "." or "." in text[i + 1 : j] or any(c in "!?" for c in text[i:j]):
            return True  # ?, ! and ellipses end a sentence
        k = j
        while k < len(text) and text[k].isspace():
            k += 1
        if k >= len(text):
            return True
        following = text[k]
        if following.islower():
            return False
        word = _word_before(text, i)
        if word and word[-1].isdigit():  # a number: a sentence end, unless a German ordinal
            return not (self.code == "de" and word.isdigit() and is_german_ordinal(word, _word_before(text, i - len(word), skip_space=True), _word_at(text, k)))
        key = word.lower()
        if key in self.non_terminal or (len(word) == 1 and word.isalpha() and word.isupper()):
            return False
        if key in self.terminal:
            return following.isupper()
        if re.fullmatch(r"(?:[^\W\d_]\.)+[^\W\d_]", key):
            return False  # dotted initialisms (U.S., d.h.)
        if j > i + 1 or not (following.isupper() or following.isdigit()):
            return True  # closing quotes after the stop, or an uncased script (hangul) follows
        return self._library_ends(j, k)

    def _library_ends(self, j: int, k: int) -> bool:
        if self._library is None:
            self._library = _library_boundaries(self.text, self.code)
        return any(e in self._library for e in range(j, k + 1))


def _library_boundaries(text: str, code: str) -> frozenset[int]:
    """Where sentencex ends sentences in `text` (character offsets, trailing whitespace included)."""
    from sentencex import get_sentence_boundaries

    return frozenset(int(b["end_index"]) for b in get_sentence_boundaries(code, text))


def _word_before(text: str, i: int, *, skip_space: bool = False) -> str:
    """The word (letters, digits and inner stops) that ends just before `i`."""
    if skip_space:
        while i > 0 and text[i - 1].isspace():
            i -= 1
    j = i
    while j > 0 and (text[j - 1].isalnum() or (text[j - 1] == "." and j - 1 > 0 and text[j - 2].isalnum())):
        j -= 1
    return text[j:i].strip(".")


def _word_at(text: str, k: int) -> str:
    j = k
    while j < len(text) and text[j].isalpha():
        j += 1
    return text[k:j]
