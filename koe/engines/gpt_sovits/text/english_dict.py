"""GPT-SoVITS's English pronunciation dictionaries (shipped in `data/`, see its NOTICE-english.md): which
pronunciation a word in the dictionaries gets, merged as upstream's `english.get_dict` merges them.

- `cmudict.rep` (CMUdict 0.7b) from its 57th line: `WORD  PH PH ...` (two spaces after the word),
  a later line of the same (lower-cased) word replacing an earlier one; alternates such as
  `READ(1)` stay separate keys nobody looks up;
- `cmudict-fast.rep`: `WORD PH ...` (one space), only for words cmudict.rep lacks;
- `engdict-hot.rep`: upstream's own fixes (`CHATGPT`, `JSON`, `CONDA`), replacing any other entry;
- then six abbreviations upstream removes because the dictionaries read them as words (ae, ai,
  ar, ios, hud, os: they are spelled letter by letter instead).

`namedict.rep` is its name dictionary (first names), used only for words written capitalised.
Each entry is one pronunciation: a list of ARPAbet phonemes.
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources

__all__ = ["DROPPED", "cmu_dictionary", "name_dictionary"]

DROPPED = ("ae", "ai", "ar", "ios", "hud", "os")
CMUDICT_FIRST_LINE = 57  # upstream skips the header by line number (1-based)


def _lines(name: str) -> list[str]:
    data = resources.files(__package__).joinpath("data", name).read_bytes()
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    # Upstream reads line by line to the end: lines split at "\n" only (never str.splitlines's others).
    lines = data.decode("utf-8").split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@functools.cache
def cmu_dictionary() -> dict[str, list[str]]:
    """word (lower case) -> its phonemes, read once per process (a fresh copy is the caller's to keep)."""
    words: dict[str, list[str]] = {}
    for line in _lines("cmudict.rep.gz")[CMUDICT_FIRST_LINE - 1 :]:
        word, phones = line.strip().split("  ")[:2]
        words[word.lower()] = phones.split(" ")
    for line in _lines("cmudict-fast.rep.gz"):
        word, *phones = line.strip().split(" ")
        words.setdefault(word.lower(), phones)
    for line in _lines("engdict-hot.rep"):
        word, *phones = line.strip().split(" ")
        words[word.lower()] = phones
    for word in DROPPED:
        del words[word]
    return words


@functools.cache
def name_dictionary() -> dict[str, list[str]]:
    """first name (lower case) -> its phonemes."""
    words: dict[str, list[str]] = {}
    for line in _lines("namedict.rep.gz"):
        word, *phones = line.rstrip("\n").split(" ")
        words[word] = phones
    return words
