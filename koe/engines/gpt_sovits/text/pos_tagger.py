"""The part-of-speech tagger GPT-SoVITS's English front end asks (through NLTK's `pos_tag`) which of
a homograph's two readings to use: NLTK's averaged perceptron tagger for English
(`averaged_perceptron_tagger_eng`, three JSON files: the feature weights, a tag dictionary of
frequent unambiguous words, the tag set).

koe tags with its own code, not NLTK's class, so that the tagger's files can be read from any
folder (NLTK only reads data under its data roots) and without importing NLTK's tagging stack; the
computation is NLTK's: each word the tag dictionary has gets that tag, any other is scored over its
features (the word's suffix and first letter, the two tags before it, the normalised words around
it: lower case, `!HYPHEN`, `!YEAR` for four digits, `!DIGITS`) as a sum of weights in NLTK's order,
the best tag winning (a tie to the alphabetically last).

The data is on NLTK's download server only (not on PyPI): `python -m nltk.downloader
averaged_perceptron_tagger_eng` puts it where `find_tagger` looks (NLTK's data path, NLTK_DATA).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

__all__ = ["PerceptronTagger", "TaggerNotFound", "find_tagger", "TAGGER", "tagger_files"]

TAGGER = "averaged_perceptron_tagger_eng"
START = ("-START-", "-START2-")
END = ("-END-", "-END2-")


class TaggerNotFound(FileNotFoundError):
    """No NLTK English tagger data where koe looked."""


def tagger_files(folder: Path) -> tuple[Path, Path, Path]:
    """The weights, tag dictionary and tag set files of a tagger folder."""
    return tuple(Path(folder) / f"{TAGGER}.{part}.json" for part in ("weights", "tagdict", "classes"))


def _nltk_roots() -> list[Path]:
    """NLTK's data roots, in its order: NLTK_DATA's entries, then its usual places."""
    roots = [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    try:
        import nltk.data  # its data path, when NLTK is installed

        roots += [Path(p) for p in nltk.data.path if isinstance(p, str)]
    except ImportError:
        roots += [Path.home() / "nltk_data", Path("/usr/share/nltk_data"), Path("/usr/local/share/nltk_data")]
    return roots


def find_tagger(folder: Path | None = None) -> Path:
    """The folder holding the tagger's three JSON files: `folder` itself (or its
    `taggers/averaged_perceptron_tagger_eng`), else the first NLTK data root that has them."""
    candidates = []
    if folder is not None:
        candidates += [Path(folder), Path(folder) / "taggers" / TAGGER]
    candidates += [root / "taggers" / TAGGER for root in _nltk_roots()]
    for c in candidates:
        if all(f.is_file() for f in tagger_files(c)):
            return c
    raise TaggerNotFound(
        f"NLTK's English part-of-speech tagger ({TAGGER}) was not found: GPT-SoVITS reads English homographs by it. "
        f"Install it with `python -m nltk.downloader {TAGGER}` (or set NLTK_DATA to a folder holding taggers/{TAGGER}/)."
        f" Looked in: {', '.join(str(c) for c in candidates)}"
    )


class PerceptronTagger:
    """NLTK's averaged perceptron tagger (inference only), `tag(tokens) -> [(token, tag)]`."""

    def __init__(self, weights: dict[str, dict[str, float]], tagdict: dict[str, str], classes: list[str]) -> None:
        self.weights, self.tagdict, self.classes = weights, tagdict, set(classes)

    @classmethod
    @functools.cache
    def load(cls, folder: Path) -> PerceptronTagger:
        """The tagger in `folder` (as `find_tagger` gives), read once per process."""
        weights, tagdict, classes = (json.loads(f.read_text(encoding="utf-8")) for f in tagger_files(folder))
        return cls(weights, tagdict, classes)

    @staticmethod
    def normalize(word: str) -> str:
        if "-" in word and word[0] != "-":
            return "!HYPHEN"
        if word.isdigit() and len(word) == 4:
            return "!YEAR"
        if word and word[0].isdigit():
            return "!DIGITS"
        return word.lower()

    @staticmethod
    def features(i: int, word: str, context: list[str], prev: str, prev2: str) -> dict[str, int]:
        """The features of the i-th word, in NLTK's order (the scores sum in it)."""
        i += len(START)
        names = (
            "bias",
            f"i suffix {word[-3:]}",
            f"i pref1 {word[0] if word else ''}",
            f"i-1 tag {prev}",
            f"i-2 tag {prev2}",
            f"i tag+i-2 tag {prev} {prev2}",
            f"i word {context[i]}",
            f"i-1 tag+i word {prev} {context[i]}",
            f"i-1 word {context[i - 1]}",
            f"i-1 suffix {context[i - 1][-3:]}",
            f"i-2 word {context[i - 2]}",
            f"i+1 word {context[i + 1]}",
            f"i+1 suffix {context[i + 1][-3:]}",
            f"i+2 word {context[i + 2]}",
        )
        out: dict[str, int] = {}
        for name in names:
            out[name] = out.get(name, 0) + 1
        return out

    def predict(self, features: dict[str, int]) -> str:
        scores: dict[str, float] = {}
        for name, value in features.items():
            if name not in self.weights or value == 0:
                continue
            for label, weight in self.weights[name].items():
                scores[label] = scores.get(label, 0.0) + value * weight
        return max(self.classes, key=lambda label: (scores.get(label, 0.0), label))

    def tag(self, tokens: list[str]) -> list[tuple[str, str]]:
        prev, prev2 = START
        context = [*START, *(self.normalize(w) for w in tokens), *END]
        out = []
        for i, word in enumerate(tokens):
            tag = self.tagdict.get(word) or self.predict(self.features(i, word, context, prev, prev2))
            out.append((word, tag))
            prev2, prev = prev, tag
        return out
