"""IndexTTS's text normaliser (releases 1.5 and 2): what upstream does around the Chinese and
English normalisers before its tokenizer sees the text (`TextNormalizer.normalize`).

In upstream's order:

1. Pronunciation annotations `<text|reading>` (`<行|XING2>`) are swapped for letter-only
   placeholders and put back, untouched, at the very end.
2. Chinese or English: text with a CJK ideograph (U+4E00-U+9FFF), with no ASCII letter, that is one
   e-mail address, or holding tone-numbered pinyin (`xuan4`, `jve2`; `beta1` is not pinyin) goes the
   Chinese way; the rest the English way.
3. Both ways: "what's", "it's", "there's"... become "what is"...; the glossary (release 2 turns it
   on: readings from the model's `glossary.yaml`, per language) replaces its terms; hyphens inside
   technical terms (`GPT-5-nano`, `F5-TTS`) are protected from the normaliser (else "负五").
4. Chinese: (right-stripped) pinyin with tones and names joined by `·`/`-`/`—` (`克里斯托弗·诺兰`)
   are also protected; the Chinese normaliser runs (a failure gives ""); names, pinyin (upper-cased,
   with `ü`/`u` after j/q/x written `v`), hyphens come back; punctuation is mapped to the few marks
   the tokenizer knows (`，` -> `,`, `。` -> `.`, brackets and quotes -> `'`, `$` -> `.`...).
   English: the English normaliser (a failure gives the text as it was), hyphens back, the same
   punctuation map without `$`.

Where upstream's result depends on Python's string hashing (it numbers the protected pinyin and names
in a set's order; only when one protected piece holds another, "ao3" beside "hao3"), koe numbers them
in a fixed order: longest first, then by first appearance. The normalisers are in `text_fst`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["PINYIN", "TextNormalizer", "read_glossary", "spell_pinyin", "uses_chinese"]

log = logging.getLogger(__name__)

Glossary = Mapping[str, "str | Mapping[str, str]"]

_PUNCTUATION = (  # a mark -> what the tokenizer gets; earlier entries win where two start at one place
    ("：", ","), ("；", ","), (";", ","), ("，", ","), ("。", "."), ("！", "!"), ("？", "?"), ("\n", " "),
    ("·", "-"), ("、", ","), ("...", "…"), (",,,", "…"), ("，，，", "…"), ("……", "…"),
    ("“", "'"), ("”", "'"), ('"', "'"), ("‘", "'"), ("’", "'"), ("（", "'"), ("）", "'"), ("(", "'"), (")", "'"),
    ("《", "'"), ("》", "'"), ("【", "'"), ("】", "'"), ("[", "'"), ("]", "'"), ("—", "-"), ("～", "-"), ("~", "-"),
    ("「", "'"), ("」", "'"), (":", ","),
)  # fmt: skip
_EN_MARKS = dict(_PUNCTUATION)
_ZH_MARKS = {"$": ".", **_EN_MARKS}
_EN_MARK = re.compile("|".join(re.escape(m) for m in _EN_MARKS))
_ZH_MARK = re.compile("|".join(re.escape(m) for m in _ZH_MARKS))

_HANZI = re.compile(r"[\u4e00-\u9fff]")
_LETTER = re.compile(r"[a-zA-Z]")
_EMAIL = re.compile(r"^[a-zA-Z0-9]+@[a-zA-Z0-9]+\.[a-zA-Z]+$")
_INITIAL = r"[bpmfdtnlgkhjqxzcsryw]|[zcs]h"
_FINAL = r"[aeiouüv]|[ae]i|u[aio]|ao|ou|i[aue]|[uüv]e|[uvü]ang?|uai|[aeiuv]n|[aeio]ng|ia[no]|i[ao]ng"
PINYIN = re.compile(rf"(?<![a-z])((?:{_INITIAL})?(?:{_FINAL})|ng|er)([1-5])", re.IGNORECASE)  # a syllable and its tone
_JQX_U = re.compile(r"([jqx])[uü](n|e|an)*(\d)", re.IGNORECASE)
_NAME = re.compile(r"[\u4e00-\u9fff]+(?:[-·—][\u4e00-\u9fff]+){1,2}")
_TECH_TERM = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+")
_IS = re.compile(r"(what|where|who|which|how|t?here|it|s?he|that|this)'s", re.IGNORECASE)
_ANNOTATION = re.compile(r"<([^|>\n]+)\|([^>\n]+)>")
_HYPHEN_MARK = "<H>"
_HYPHEN_BACK = re.compile(r"\s*<H>\s*")


def uses_chinese(text: str) -> bool:
    """Whether upstream sends `text` (annotations already swapped out) the Chinese way."""
    if _HANZI.search(text) or not _LETTER.search(text) or _EMAIL.match(text):
        return True
    return PINYIN.search(text) is not None


def _letters(n: int) -> str:
    """0 -> "a", 25 -> "z", 26 -> "aa"... (bijective base 26)."""
    s = ""
    while True:
        s = chr(ord("a") + n % 26) + s
        n = n // 26 - 1
        if n < 0:
            return s


def _distinct(found: list[str]) -> list[str]:
    """Each piece once, longest first, then by first appearance (see the module docstring)."""
    first = {p: i for i, p in reversed(list(enumerate(found)))}
    return sorted(first, key=lambda p: (-len(p), first[p]))


def _swap_out(text: str, pieces: list[str], mark: Callable[[int], str]) -> str:
    for i, piece in enumerate(pieces):
        text = text.replace(piece, mark(i))
    return text


def _swap_in(text: str, pieces: list[str], mark: Callable[[int], str], spell: Callable[[str], str] = str) -> str:
    for i, piece in enumerate(pieces):
        text = text.replace(mark(i), spell(piece))
    return text


def _pinyin_mark(i: int) -> str:
    return f"<pinyin_{chr(ord('a') + i)}>"


def _name_mark(i: int) -> str:
    return f"<n_{chr(ord('a') + i)}>"


def spell_pinyin(syllable: str) -> str:
    """How protected pinyin comes back: j/q/x + u/ü finals written with v, then upper case (others as typed)."""
    if syllable[0] not in "jqxJQX":
        return syllable
    return _JQX_U.sub(r"\g<1>v\g<2>\g<3>", syllable).upper()


def read_glossary(path: str | Path) -> dict:
    """A `glossary.yaml` (term: reading, or term: {en: ..., zh: ...}); {} where the file is missing or empty."""
    path = Path(path)
    if not path.is_file():
        return {}
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return dict(data) if isinstance(data, dict) and data else {}


class TextNormalizer:
    """Upstream's normaliser. `glossary` None is release 1.5's (off); release 2 passes its model's
    glossary ({} where it has none: the same text). `zh`/`en` default to the WeTextProcessing
    normalisers upstream runs on Linux (`text_fst`), loaded on first use."""

    def __init__(self, glossary: Glossary | None = None, zh: Callable[[str], str] | None = None, en: Callable[[str], str] | None = None) -> None:
        self.glossary = glossary
        self._zh, self._en = zh, en
        self._terms = [(re.compile(re.escape(t), re.IGNORECASE), t) for t in sorted(glossary or {}, key=len, reverse=True)]

    @property
    def zh(self) -> Callable[[str], str]:
        if self._zh is None:
            from koe_indextts.text_fst import chinese_normalizer

            self._zh = chinese_normalizer()
        return self._zh

    @property
    def en(self) -> Callable[[str], str]:
        if self._en is None:
            from koe_indextts.text_fst import english_normalizer

            self._en = english_normalizer()
        return self._en

    def load(self) -> None:
        """Loads both normalisers now (else on the first text that needs each)."""
        _ = self.zh, self.en

    def _apply_glossary(self, text: str, lang: str) -> str:
        for pattern, term in self._terms:
            reading = self.glossary[term]
            if isinstance(reading, Mapping):
                reading = reading.get(lang, term)
            text = pattern.sub(reading, text)  # a reading is a replacement template, as upstream passes it
        return text

    def normalize(self, text: str) -> str:
        annotations: list[str] = []

        def hide(m: re.Match) -> str:
            annotations.append(m.group(0))
            return f"PRONPLACEHOLDER{_letters(len(annotations) - 1)}PRONPLACEHOLDER"

        text = _ANNOTATION.sub(hide, text)
        out = self._chinese(text) if uses_chinese(text) else self._english(text)
        for i, annotation in enumerate(annotations):
            out = out.replace(f"PRONPLACEHOLDER{_letters(i)}PRONPLACEHOLDER", annotation)
        return out

    def _chinese(self, text: str) -> str:
        text = _IS.sub(r"\1 is", text)
        if self.glossary is not None:
            text = self._apply_glossary(text, "zh")
        text = text.rstrip()
        terms = _distinct(_TECH_TERM.findall(text))
        for term in terms:
            text = text.replace(term, term.replace("-", _HYPHEN_MARK))
        pinyin = _distinct(["".join(p) for p in PINYIN.findall(text)])
        text = _swap_out(text, pinyin, _pinyin_mark)
        names = _distinct(_NAME.findall(text))
        text = _swap_out(text, names, _name_mark)
        try:
            out = self.zh(text)
        except Exception as e:  # upstream speaks nothing where its Chinese normaliser fails
            log.warning("the Chinese normaliser failed on %r (%s): nothing is spoken for it", text, e)
            out = ""
        out = _swap_in(out, names, _name_mark)
        out = _swap_in(out, pinyin, _pinyin_mark, spell_pinyin)
        if terms:
            out = _HYPHEN_BACK.sub("-", out)
        return _ZH_MARK.sub(lambda m: _ZH_MARKS[m.group()], out)

    def _english(self, text: str) -> str:
        try:  # on failure upstream keeps the text as far as it got (contractions and glossary applied)
            text = _IS.sub(r"\1 is", text)
            if self.glossary is not None:
                text = self._apply_glossary(text, "en")
            terms = _distinct(_TECH_TERM.findall(text))
            protected = text
            for term in terms:
                protected = protected.replace(term, term.replace("-", _HYPHEN_MARK))
            out = self.en(protected)
            if terms:
                out = _HYPHEN_BACK.sub("-", out)
        except Exception as e:
            log.warning("the English normaliser failed on %r (%s): the text is kept as it is", text, e)
            out = text
        return _EN_MARK.sub(lambda m: _EN_MARKS[m.group()], out)
