"""GPT-SoVITS v2's English front end (upstream's `text/english.py`): normalised text -> ARPAbet
phonemes, as its `g2p` gives them to `clean_text`.

The text is split into tokens by NLTK's TweetTokenizer and tagged by NLTK's perceptron tagger
(`pos_tagger`), then each token is read by the first rule that applies:
1. no letter in it (punctuation): the token itself (`,` `.` `!` `?` `-` survive, `'` becomes `-`,
   anything else, such as "...", is dropped);
2. one letter: the dictionary's letter, except a capital `A` alone, read "EY1" (the article "a" is
   the dictionary's "AH0");
3. a homograph (g2p_en's table, upstream's "read" and "complex" added): the reading of its part of
   speech when the tag starts with the table's, or is a prefix of it ("VB" for "VBP"), else the other;
4. otherwise `read_word`: the merged dictionaries (not for single letters); for a capitalised word
   the name dictionary; a word of at most 3 characters spelled letter by letter ("a" as "EY1");
   a possessive `...'s` as its stem plus S / AH0 Z / Z by the stem's last sound; a compound that
   wordsegment splits, each part read again; else g2p_en's neural model.
Tokens are joined with " ", which `g2p` then drops with g2p_en's `<pad>`, `<s>`, `</s>` and bare
`UW` (not in the model's table); `<unk>` becomes `UNK`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from koe.engines.gpt_sovits.text import english_norm
from koe.engines.gpt_sovits.text.english_dict import cmu_dictionary, name_dictionary
from koe.engines.gpt_sovits.text.g2p_en_model import G2pEnModel, homographs
from koe.engines.gpt_sovits.text.pos_tagger import PerceptronTagger, find_tagger
from koe.engines.gpt_sovits.text.symbols import SYMBOLS_V2

__all__ = ["EnglishFrontEnd", "default", "g2p", "normalize"]

HOMOGRAPH_FIXES = {
    "read": (["R", "IY1", "D"], ["R", "EH1", "D"], "VBP"),
    "complex": (["K", "AH0", "M", "P", "L", "EH1", "K", "S"], ["K", "AA1", "M", "P", "L", "EH0", "K", "S"], "JJ"),
}
"""Upstream's corrections of g2p_en's homograph table: "read" present unless tagged past, "complex"
as the adjective (stress on the second syllable) unless tagged otherwise."""
VOICELESS = ("P", "T", "K", "F", "TH", "HH")
SIBILANTS = ("S", "Z", "SH", "ZH", "CH", "JH")
DROPPED = (" ", "<pad>", "UW", "</s>", "<s>")
_POSSESSIVE_RE = re.compile(r"^([a-z]+)('s)$")
_LETTER_RE = re.compile("[a-z]")
_KNOWN = frozenset(SYMBOLS_V2)


def normalize(text: str) -> str:
    """Upstream's English `text_normalize` (see `english_norm`)."""
    return english_norm.normalize(text)


class EnglishFrontEnd:
    """Upstream's `en_G2p` and `g2p`: `phones(norm_text)`, with its dictionaries, tagger, model and
    wordsegment's word statistics."""

    def __init__(self, tagger: PerceptronTagger, model: G2pEnModel | None = None) -> None:
        from nltk.tokenize.casual import TweetTokenizer

        self.tagger = tagger
        self.model = model or G2pEnModel.load()
        self.words = cmu_dictionary()
        self.names = name_dictionary()
        self.homographs = {**homographs(), **HOMOGRAPH_FIXES}
        self.tokenize = TweetTokenizer().tokenize

    @classmethod
    def load(cls, tagger_folder: Path | None = None) -> EnglishFrontEnd:
        """The front end with NLTK's English tagger from `tagger_folder` (or NLTK's data path: see
        `pos_tagger.find_tagger`), cached per tagger folder."""
        return _load(find_tagger(tagger_folder))

    def read_word(self, word: str) -> list[str]:
        """Upstream's `qryword`: one word (its case as written) that is no homograph."""
        lower = word.lower()
        if len(lower) > 1 and lower in self.words:
            return self.words[lower]
        if word.istitle() and lower in self.names:
            return self.names[lower]
        if len(lower) <= 3:
            out = []
            for c in lower:
                out += ["EY1"] if c == "a" else [c] if not c.isalpha() else self.words[c]
            return out
        if _POSSESSIVE_RE.match(lower):
            stem = self.read_word(lower[:-2])[:]
            if stem[-1] in VOICELESS:
                return stem + ["S"]
            if stem[-1] in SIBILANTS:
                return stem + ["AH0", "Z"]
            return stem + ["Z"]
        parts = _wordsegment().segment(lower)
        if len(parts) == 1:
            return self.model.predict(lower)
        return [p for part in parts for p in self.read_word(part)]

    def read_token(self, token: str, tag: str) -> list[str]:
        lower = token.lower()
        if _LETTER_RE.search(lower) is None:
            return [lower]
        if len(lower) == 1:
            return ["EY1"] if token == "A" else self.words[lower]
        if lower in self.homographs:
            first, other, wanted = self.homographs[lower]
            if tag.startswith(wanted) or (len(tag) < len(wanted) and tag == wanted[: len(tag)]):
                return first
            return other
        return self.read_word(token)

    def tokens_to_phones(self, text: str) -> list[str]:
        """Upstream's `en_G2p.__call__`: each token's phonemes, tokens separated by " "."""
        out: list[str] = []
        for token, tag in self.tagger.tag(self.tokenize(text)):
            out += self.read_token(token, tag)
            out.append(" ")
        return out[:-1]

    def normalize(self, text: str) -> str:
        return english_norm.normalize(text)

    def g2p(self, norm_text: str) -> tuple[list[str], None]:
        """The front-end interface of `clean` (English has no word2ph)."""
        return self.phones(norm_text), None

    def phones(self, norm_text: str) -> list[str]:
        """Upstream's English `g2p(norm_text)`: the phonemes the model reads (`'` as `-`; anything
        not in v2's table dropped)."""
        out = []
        for p in self.tokens_to_phones(norm_text):
            if p in DROPPED:
                continue
            p = "UNK" if p == "<unk>" else p
            if p in _KNOWN:
                out.append(p)
            elif p == "'":
                out.append("-")
        return out


@functools.cache
def _load(tagger_folder: Path) -> EnglishFrontEnd:
    return EnglishFrontEnd(PerceptronTagger.load(tagger_folder))


@functools.cache
def _wordsegment():
    """wordsegment with its unigram and bigram counts loaded (once: about a second)."""
    import wordsegment

    wordsegment.load()
    return wordsegment


def default() -> EnglishFrontEnd:
    """The front end with the tagger NLTK's data path has (see `EnglishFrontEnd.load`)."""
    return EnglishFrontEnd.load()


def g2p(norm_text: str) -> tuple[list[str], None]:
    """The language front-end interface of `clean` (phonemes, and no word-to-phoneme counts: English
    has no BERT features in v2), with the default front end."""
    return default().phones(norm_text), None
