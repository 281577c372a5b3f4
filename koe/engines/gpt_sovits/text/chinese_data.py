"""The Chinese front end's tables, shipped in `data/` (see `data/NOTICE-chinese.md`): upstream's
pinyin-to-symbol table (`opencpop-strict.txt`) and its polyphone dictionary (`polyphonic.rep`, then
`polyphonic-fix.rep` over it), each read once, on first use."""

from __future__ import annotations

import gzip
import re
from functools import cache
from pathlib import Path

__all__ = ["correct_pronunciation", "pinyin_to_symbols", "polyphones"]

DATA = Path(__file__).resolve().parent / "data"
_READING = re.compile(r"'([^']*)'")


@cache
def pinyin_to_symbols() -> dict[str, tuple[str, str]]:
    """Toneless pinyin ("zhang") -> its initial and final symbols (("zh", "ang"))."""
    table = {}
    for line in (DATA / "opencpop-strict.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            pinyin, symbols = line.split("\t")[:2]
            initial, final = symbols.strip().split(" ")
            table[pinyin] = (initial, final)
    return table


def _read_polyphones(lines, into: dict[str, list[str]]) -> None:
    # each line `word: ['py1', 'py2']`: a word, then a Python list of quoted TONE3 readings
    for line in lines:
        word, readings = line.split(":")
        into[word.strip()] = _READING.findall(readings)


@cache
def polyphones() -> dict[str, list[str]]:
    """Upstream's polyphone dictionary: word -> one TONE3 reading per character."""
    table: dict[str, list[str]] = {}
    _read_polyphones((DATA / "polyphonic.rep").read_text(encoding="utf-8").splitlines(), table)
    with gzip.open(DATA / "polyphonic-fix.rep.gz", "rt", encoding="utf-8") as f:
        _read_polyphones(f.read().splitlines(), table)
    return table


def correct_pronunciation(word: str, pinyins: list[str]) -> list[str]:
    """A word's readings after upstream's polyphone dictionary: the dictionary's own when it has the
    word; else `pinyins` with each character the dictionary has replaced by its first reading."""
    table = polyphones()
    if word in table:
        return table[word]
    for i, char in enumerate(word):
        if char in table:
            pinyins[i] = table[char][0]
    return pinyins
