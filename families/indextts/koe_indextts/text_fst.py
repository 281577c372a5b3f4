"""The two WeTextProcessing normalisers IndexTTS calls on Linux, run from their compiled FSTs.

Upstream builds `tn.chinese.normalizer.Normalizer(remove_interjections=False, remove_erhua=False)`
(its other options at their defaults: traditional to simplified Chinese before tagging, full-width
to half-width after verbalising) and `tn.english.normalizer.Normalizer()`, both WeTextProcessing
1.2.0 on pynini. Building the Chinese FSTs takes seconds on first use; koe loads compiled ones with
kaldifst instead:

- Chinese: wetext's FSTs (the tagger and the verbaliser that keeps erhua, with its
  traditional-to-simplified and full-to-half-width FSTs around them), always run: wetext's own
  `Normalizer` skips Chinese text without digits and strips, where WeTextProcessing tags every text
  and keeps its outer blanks.
- English: WeTextProcessing's own compiled FSTs (`tn/en_tn_*.fst`, shipped in its wheel and read
  as files: pynini is never imported). wetext's English FSTs are another build and read some text
  differently ("M.2", "0.08"); where WeTextProcessing is not installed (upstream uses wetext on
  macOS and Windows) koe falls back to them, with a warning.

Between tagging and verbalising, tokens are reordered as WeTextProcessing's token parser does
(`reorder`). Measured against WeTextProcessing 1.2.0 on 1,650 texts (numbers, dates, money, units,
traditional and full-width characters, erhua, interjections, quotes, backslashes, blanks): equal.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import string
from dataclasses import dataclass
from pathlib import Path

import kaldifst

__all__ = ["FstNormalizer", "NoNormalization", "chinese_normalizer", "english_normalizer", "reorder"]

log = logging.getLogger(__name__)

# the order verbalisers expect a token's fields in (other fields of such a token are dropped)
_ZH_ORDERS = {
    "date": ("year", "month", "day"),
    "fraction": ("denominator", "numerator"),
    "measure": ("denominator", "numerator", "value"),
    "money": ("value", "currency"),
    "time": ("noon", "hour", "minute", "second"),
}
_EN_ORDERS = {
    "date": ("preserve_order", "text", "day", "month", "year"),
    "money": ("integer_part", "fractional_part", "quantity", "currency_maj"),
}
_KEY_CHARS = frozenset(string.ascii_letters + "_")


class NoNormalization(ValueError):
    """An FST that has no path for the text (WeTextProcessing raises pynini's FstOpError there)."""


def _tokens(tagged: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """`name { key: "value" ... } ...` read as WeTextProcessing's parser reads it: each of the
    separators optional, a value running to the next unescaped quote (escapes kept)."""
    tokens, i, n = [], 0, len(tagged)

    def skip(chars: str) -> None:
        nonlocal i
        for ch in chars:
            if i < n and tagged[i] == ch:
                i += 1

    def key() -> str:
        nonlocal i
        start = i
        while i < n and tagged[i] in _KEY_CHARS:
            i += 1
        return tagged[start:i]

    while True:
        while i < n and tagged[i] == " ":
            i += 1
        if i >= n:
            return tokens
        name = key()
        skip(" { ")
        fields: list[tuple[str, str]] = []
        tokens.append((name, fields))
        while True:
            while i < n and tagged[i] == " ":
                i += 1
            if i >= n:
                break
            if tagged[i] == "}":
                i += 1
                break
            k = key()
            skip(': "')
            start = i
            while i < n and tagged[i] != '"':
                i += 2 if tagged[i] == "\\" else 1
            if i >= n:
                raise NoNormalization(f"unterminated value in tagged text {tagged!r}")
            fields.append((k, tagged[start:i]))
            i += 1


def reorder(tagged: str, orders: dict[str, tuple[str, ...]]) -> str:
    """Tagged tokens rewritten with their fields in `orders`' order where the token has one (and no
    `preserve_order: "true"`), else in their own order (a repeated field: its last value each time)."""
    out = []
    for name, fields in _tokens(tagged):
        values = dict(fields)
        keys = [k for k, _ in fields]
        if name in orders and values.get("preserve_order") != "true":
            keys = [k for k in orders[name] if k in values]
        out.append(name + " {" + "".join(f' {k}: "{values[k]}"' for k in keys) + " }")
    return " ".join(out)


@functools.cache
def _graph(path: str) -> kaldifst.StdVectorFst:
    return kaldifst.StdVectorFst.read(path)


def _has_path(text: str, path: str) -> bool:
    data = text.encode("utf-8")
    lines = [f"{i} {i + 1} {b}" for i, b in enumerate(data)] + [str(len(data))]
    lattice = kaldifst.compose(kaldifst.compile("\n".join(lines), acceptor=True), _graph(path))
    return kaldifst.shortest_path(lattice, 1).num_states > 0


@dataclass
class _Fst:
    path: str

    def __post_init__(self) -> None:
        self.run = kaldifst.TextNormalizer(self.path).normalize

    def __call__(self, text: str) -> str:
        out = self.run(text)
        if not out and text and not _has_path(text, self.path):  # kaldifst answers "" for no path as well
            raise NoNormalization(f"{Path(self.path).name} has no path for {text!r}")
        return out


class FstNormalizer:
    """tagger -> reorder -> verbaliser, with optional FSTs before and after (one text in, one out)."""

    def __init__(self, tagger: str, verbalizer: str, orders: dict[str, tuple[str, ...]], before: str | None = None, after: str | None = None) -> None:
        self.tagger, self.verbalizer, self.orders = _Fst(tagger), _Fst(verbalizer), orders
        self.before = _Fst(before) if before else None
        self.after = _Fst(after) if after else None

    def __call__(self, text: str) -> str:
        if not text:
            return ""
        if self.before is not None:
            text = self.before(text)
        tagged = self.tagger(text)
        if not tagged:
            return ""
        out = self.verbalizer(reorder(tagged, self.orders))
        return self.after(out) if self.after is not None and out else out


def _wetext_fst(name: str) -> str:
    spec = importlib.util.find_spec("wetext")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("IndexTTS's text normaliser needs wetext (pip install wetext)")
    return str(Path(spec.submodule_search_locations[0]) / "fsts" / name)


@functools.cache
def chinese_normalizer() -> FstNormalizer:
    """WeTextProcessing's Chinese normaliser with upstream's options (the module docstring)."""
    return FstNormalizer(
        _wetext_fst("zh/tn/tagger.fst"),
        _wetext_fst("zh/tn/verbalizer.fst"),
        _ZH_ORDERS,
        before=_wetext_fst("traditional_to_simple.fst"),
        after=_wetext_fst("full_to_half.fst"),
    )


@functools.cache
def english_normalizer() -> FstNormalizer:
    """WeTextProcessing's English normaliser (its compiled FSTs), or wetext's where it is missing."""
    spec = importlib.util.find_spec("tn")
    folder = Path(spec.submodule_search_locations[0]) if spec is not None and spec.submodule_search_locations else None
    if folder is not None and (folder / "en_tn_tagger.fst").is_file() and (folder / "en_tn_verbalizer.fst").is_file():
        return FstNormalizer(str(folder / "en_tn_tagger.fst"), str(folder / "en_tn_verbalizer.fst"), _EN_ORDERS)
    log.warning("WeTextProcessing is not installed: English text is normalised with wetext's FSTs, as upstream does off Linux")
    return FstNormalizer(_wetext_fst("en/tn/tagger.fst"), _wetext_fst("en/tn/verbalizer.fst"), _EN_ORDERS)
