"""A stand-in for NLTK's English part-of-speech tagger, which GPT-SoVITS's English front end needs and
which only NLTK's download server has: a small averaged perceptron in NLTK's own file layout
(`taggers/averaged_perceptron_tagger_eng/averaged_perceptron_tagger_eng.{weights,tagdict,classes}.json`),
so NLTK (upstream's side, through NLTK_DATA) and koe read the same files.

Its weights are hand-made rules (suffixes, the tag before, capitals, a few words' contexts) that give
a plausible Penn tag to most words, including both readings of homographs ("I read" VBP, "read
yesterday" VBD, "to record" VB, "the record" NN), plus seeded noise on word features so that scores
rarely tie. Deterministic from the seed; the files' bytes are stable (keys in a fixed order).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from koe.engines.gpt_sovits.text.pos_tagger import TAGGER, tagger_files

__all__ = ["TAGS", "tagger_sha256", "tagger_state", "write_tagger"]

TAGS = ("CC", "CD", "DT", "IN", "JJ", "MD", "NN", "NNP", "NNS", "POS", "PRP", "RB", "TO", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", ",", ".", ":")
TAGDICT = {
    **dict.fromkeys(["the", "a", "an", "this", "that", "these", "every"], "DT"),
    **dict.fromkeys(["I", "you", "we", "they", "he", "she", "it", "He", "She", "We", "They", "You", "It"], "PRP"),
    **dict.fromkeys(["and", "or", "but"], "CC"),
    **dict.fromkeys(["in", "of", "on", "at", "for", "with", "from", "by", "about"], "IN"),
    **dict.fromkeys(["will", "can", "would", "should", "must"], "MD"),
    "to": "TO",
    "is": "VBZ",
    "was": "VBD",
    "are": "VBP",
    "'s": "POS",
    ",": ",",
    ".": ".",
    "?": ".",
    "!": ".",
    "-": ":",
}
RULES = {
    "bias": {"NN": 1.0, "JJ": 0.3, "VB": 0.2},
    "i suffix ing": {"VBG": 3.0},
    "i suffix ted": {"VBD": 2.0},
    "i suffix sed": {"VBD": 2.0},
    "i suffix red": {"VBD": 2.0},
    "i suffix ded": {"VBD": 2.0},
    "i suffix ely": {"RB": 2.5},
    "i suffix lly": {"RB": 2.5},
    "i suffix ous": {"JJ": 2.0},
    "i suffix ful": {"JJ": 2.0},
    "i suffix nts": {"NNS": 1.5, "VBZ": 1.0},
    "i suffix rds": {"NNS": 1.5, "VBZ": 1.2},
    "i suffix ses": {"NNS": 1.2},
    "i-1 tag TO": {"VB": 4.0},
    "i-1 tag MD": {"VB": 4.0},
    "i-1 tag PRP": {"VBP": 3.0, "VBD": 1.0},
    "i-1 tag DT": {"NN": 1.5, "JJ": 1.0},
    "i-1 tag JJ": {"NN": 1.5},
    "i-1 tag VBZ": {"JJ": 1.5, "VBN": 1.0},
    "i-1 tag VBD": {"VBN": 1.5, "JJ": 0.5},
    "i-1 tag -START-": {"NNP": 0.2},
    "i+1 word yesterday": {"VBD": 5.0},
    "i+1 word the": {"VB": 1.0, "VBP": 0.5},
    "i-1 word has": {"VBN": 3.0},
    "i-1 word have": {"VBN": 3.0},
    **{f"i pref1 {c}": {"NNP": 1.5} for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
}
NOISY_WORDS = (
    "read record present object project refuse content permit produce live lead close use house desert "
    "minute wind tear bow row wound conduct contract subject estimate separate perfect"
).split()


def tagger_state(seed: int = 0) -> tuple[dict, dict, list]:
    """The tagger's weights, tag dictionary and tag list (NLTK's three JSON documents)."""
    g = random.Random(seed)
    weights = {name: dict(scores) for name, scores in RULES.items()}
    for word in NOISY_WORDS:
        weights[f"i word {word}"] = {tag: round(g.gauss(0.0, 0.4), 4) for tag in ("NN", "VB", "VBP", "JJ", "VBD")}
    return weights, dict(TAGDICT), list(TAGS)


def write_tagger(folder: Path, seed: int = 0) -> Path:
    """Writes the tagger under `folder/taggers/averaged_perceptron_tagger_eng/` (an NLTK data root
    at `folder`); returns that tagger folder."""
    where = Path(folder) / "taggers" / TAGGER
    where.mkdir(parents=True, exist_ok=True)
    for path, document in zip(tagger_files(where), tagger_state(seed), strict=True):
        path.write_text(json.dumps(document), encoding="utf-8")
    return where


def tagger_sha256(tagger_folder: Path) -> str:
    """One hash of the tagger's three files' bytes, in order."""
    h = hashlib.sha256()
    for path in tagger_files(tagger_folder):
        h.update(path.read_bytes())
    return h.hexdigest()
