"""IndexTTS 2.5's text front end: a request's text and language -> the token ids of each segment the
GPT speaks, as upstream's `IndexTTS2.infer_generator` (`infer_v2_5.py`) makes them.

In upstream's order, `lang` compared in lower case:

1. Punctuation is mapped to the few marks the vocabulary knows (the normaliser's map of `text.py`:
   `，` -> `,`, `。` -> `.`, brackets and quotes -> `'`, a newline -> a blank...), in every language.
2. With `normalize` (upstream's `text_normalization`, on by default): `zh`, `zhen` and `en` go
   through the 1.5/2 normaliser (`text.TextNormalizer`, with the model's `glossary.yaml`); `es`
   would go through NeMo's text normaliser, which upstream does not install: its default install
   logs a warning and keeps the text, and so does koe (numbers stay digits); `ja` passes through
   (NeMo has no Japanese grammar); any other language is left as it is.
3. `ja`, `zh`, `zhen`, `en` are lower-cased, `es` upper-cased.
4. Pronunciation annotations `<word|reading>`: a reading in kana alone (`<上手|じょうず>`) becomes
   ` reading ` (blanks around it); any other reading is upper-cased and wrapped in a special token,
   `<|SPECIAL_TOKEN_2|>` where the word holds a Chinese character (`<行|XING2>`), else
   `<|SPECIAL_TOKEN_1|>` (`<minute|M IH1 . N AH0 T>`).
5. `ja`: each blank-free run is cut into words by MeCab (fugashi with its default dictionary,
   unidic-lite) and the words are joined by blanks. Upstream's G2P replaces no word by its kana at
   the ratio it uses (0), but still draws one `random.random()` from Python's global generator for
   each run that holds a word with a kanji (U+4E00-U+9FFF): koe makes the same draws, so the
   generator's state afterwards is upstream's.
6. Every `<|...|>` is upper-cased (`<|happy|>` -> `<|HAPPY|>`; `<|en|>` becomes `<|EN|>`, which
   is not a special token).
7. Cutting (`split`): the budget is min(`max_text_tokens_per_segment`, the GPT's text positions -
   2) less the ids of the `<|lang|> ` prefix, at least 1. A text within it is one segment; else it
   is cut into pieces, a `<|SPECIAL_TOKEN_n|>...<|SPECIAL_TOKEN_n|>` pair never cut, the rest after
   each mark of `，。！？、；：,.!?;:` and newline, a piece over the budget character by character;
   then pieces are joined while the tokenizer's count of the joined text stays within the budget.
8. A segment's ids: `encode("<|lang|> " + segment)` and the id 1 (`TextTokenizer25.segment_ids`).

Bad input. `strict` (the default; the drop-in passes False to be upstream) refuses what upstream
speaks anyway: a language code its tokenizer does not know (upstream reads it as `common` and
spells `<|xx|> ` out as text), an annotation not closed or with no reading (upstream reads
`<行|XING2` as characters), a reading not in kana in Japanese (upstream's word cutting breaks its
`<|SPECIAL_TOKEN_n|>` markers apart), and a text left with no letter or digit (upstream speaks the
prefix alone). Without fugashi or its dictionary, Japanese fails with a message naming the packages.
"""

from __future__ import annotations

import logging
import os
import random
import re
from collections.abc import Callable
from pathlib import Path

from koe_indextts.text import _EN_MARK, _EN_MARKS, TextNormalizer, read_glossary
from koe_indextts.text25 import LANGUAGES, TextTokenizer25
from koe_indextts.text_tokenizer import TextError

__all__ = [
    "MAX_TEXT_TOKENS_PER_SEGMENT",
    "FrontEnd25",
    "JapaneseUnavailable",
    "JapaneseWords",
    "UnknownLanguage",
    "annotate",
    "check_language",
    "split_by_tokens",
]

log = logging.getLogger(__name__)

MAX_TEXT_TOKENS_PER_SEGMENT = 120  # upstream's default
NORMALISED = ("zh", "zhen", "en")  # by the 1.5/2 normaliser
LOWER_CASED = ("ja", "zh", "zhen", "en")
UPPER_CASED = ("es",)
KNOWN = frozenset(LANGUAGES) | {"zhen"}  # the tokenizer's codes and 2.5's mixed Chinese-English

_ANNOTATION = re.compile(r"<([^|>\n]+)\|([^>\n]+)>")  # <word|reading>
_OPENED = re.compile(r"<(?!\|)[^<>|\n]*\|")  # "<word|" (a `<|marker|>` aside)
_MARKER = re.compile(r"<\|([^|]+)\|>")  # <|anything|>
_PAIR = re.compile(r"<\|SPECIAL_TOKEN_\d+\|>.*?<\|SPECIAL_TOKEN_\d+\|>")  # never cut
_HANZI = re.compile(r"[\u4e00-\u9fff]")
_KANA = re.compile(r"[\u3040-\u309f]+|[\u30a0-\u30ff]+")  # all hiragana or all katakana
_BLANKS = re.compile(r"( +)")
_MARKS = "，。！？、；：,.!?;:\n"
_PART = re.compile(rf"[^{re.escape(_MARKS)}]*[{re.escape(_MARKS)}]|[^{re.escape(_MARKS)}]+")  # up to and with a mark
_INSTALL_JA = "pip install fugashi unidic-lite"


class UnknownLanguage(TextError):
    """A language code IndexTTS 2.5's tokenizer does not know."""


class JapaneseUnavailable(RuntimeError):
    """Japanese text without fugashi or a MeCab dictionary for it."""


def check_language(lang: str) -> str:
    """`lang` in lower case, or UnknownLanguage naming the codes 2.5 is made for."""
    code = lang.lower()
    if code not in KNOWN:
        raise UnknownLanguage(
            f"IndexTTS 2.5 does not know the language {lang!r}: it speaks zh, en, ja, es and ar (zhen for Chinese mixed "
            f"with English); its tokenizer also has {', '.join(c for c in LANGUAGES if c not in ('zh', 'en', 'ja', 'es', 'ar'))}"
        )
    return code


def annotate(text: str) -> str:
    """Pronunciation annotations `<word|reading>` as the GPT reads them (step 4 of the module docstring)."""

    def reading(m: re.Match) -> str:
        word, said = m.group(1), m.group(2).upper()
        if _KANA.fullmatch(said):
            return f" {said} "
        mark = "<|SPECIAL_TOKEN_2|>" if _HANZI.search(word) else "<|SPECIAL_TOKEN_1|>"
        return f"{mark}{said}{mark}"

    return _ANNOTATION.sub(reading, text)


def unclosed_annotation(text: str) -> str | None:
    """The first `<word|` that starts no complete `<word|reading>`, or None."""
    rest = _MARKER.sub(lambda m: " " * len(m.group()), _ANNOTATION.sub(lambda m: " " * len(m.group()), text))
    m = _OPENED.search(rest)
    return None if m is None else text[m.start() : m.start() + 40]


class JapaneseWords:
    """Japanese text cut into MeCab's words, joined by blanks, with upstream's draws (step 5).

    The tagger is fugashi's default (`fugashi.Tagger()`: the `unidic` package's dictionary where it is
    installed, else `unidic-lite`'s, as upstream's), made on first use; `tagger` replaces it (a
    callable giving words with a `.surface`)."""

    def __init__(self, tagger: Callable | None = None) -> None:
        self._tagger = tagger

    @property
    def tagger(self) -> Callable:
        if self._tagger is None:
            try:
                import fugashi

                self._tagger = fugashi.Tagger()
            except (ImportError, RuntimeError) as e:  # no fugashi, or no dictionary for it
                raise JapaneseUnavailable(f"Japanese text needs MeCab's words from fugashi and its dictionary: {_INSTALL_JA} ({e})") from e
        return self._tagger

    def _run(self, text: str) -> str:
        words = [w.surface for w in self.tagger(text)]
        if any(_HANZI.search(w) for w in words):
            random.random()  # upstream's G2P draws once per run with a kanji word, and replaces none at ratio 0
        return " ".join(words)

    def __call__(self, text: str) -> str:
        return "".join(self._run(part) if part.strip() else part for part in _BLANKS.split(text))


def split_by_tokens(text: str, budget: int, count: Callable[[str], int]) -> list[str]:
    """`text` cut into segments of at most `budget` tokens by `count` (step 7 of the module docstring)."""
    if count(text) <= budget:
        return [text]
    pieces: list[str] = []

    def cut(run: str) -> None:  # after each mark, a part over the budget character by character
        for part in _PART.findall(run):
            if count(part) <= budget:
                pieces.append(part)
                continue
            current = ""
            for ch in part:
                if current and count(current + ch) > budget:
                    pieces.append(current)
                    current = ch
                else:
                    current += ch
            if current:
                pieces.append(current)

    start = 0
    for m in _PAIR.finditer(text):
        cut(text[start : m.start()])
        pieces.append(m.group())
        start = m.end()
    cut(text[start:])
    segments: list[str] = []
    current = ""
    for piece in pieces:
        if current and count(current + piece) > budget:
            segments.append(current)
            current = piece
        else:
            current += piece
    if current:
        segments.append(current)
    return segments or [text]


class FrontEnd25:
    """2.5's front end over a tokenizer, the 1.5/2 normaliser and Japanese words; `text_positions` is
    the GPT's (its `max_text_tokens` + 2)."""

    def __init__(
        self, tokenizer: TextTokenizer25, text_positions: int, normalizer: TextNormalizer | None = None, japanese: JapaneseWords | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.text_positions = text_positions
        self.normalizer = normalizer if normalizer is not None else TextNormalizer({})
        self.japanese = japanese if japanese is not None else JapaneseWords()
        self._warned_es = False

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, text_positions: int) -> FrontEnd25:
        """A release folder's vocabulary and `glossary.yaml` (none: an empty glossary, as upstream)."""
        folder = Path(folder)
        return cls(TextTokenizer25.from_folder(folder), text_positions, TextNormalizer(read_glossary(folder / "glossary.yaml")))

    def prepare(self, text: str, lang: str, normalize: bool = True, strict: bool = True) -> str:
        """The text upstream cuts into segments (steps 1-6)."""
        code = check_language(lang) if strict else lang.lower()
        text = _EN_MARK.sub(lambda m: _EN_MARKS[m.group()], text)
        if strict and (opened := unclosed_annotation(text)) is not None:
            raise TextError(f"a pronunciation annotation is not closed or has no reading at {opened!r}: write <word|reading>")
        if strict and code == "ja" and (bad := [m.group() for m in _ANNOTATION.finditer(text) if not _KANA.fullmatch(m.group(2))]):
            raise TextError(f"Japanese readings are written in kana (<上手|じょうず>): {bad[0]!r} would be cut apart with its markers into MeCab's words")
        if normalize:
            if code in NORMALISED:
                text = self.normalizer.normalize(text)
            elif code == "es" and text and not self._warned_es:
                self._warned_es = True
                log.warning(
                    "Spanish text is not normalised (numbers, dates and symbols are read as written), as in upstream's default install, which lacks NeMo's text processing"
                )
        if code in LOWER_CASED:
            text = text.lower()
        elif code in UPPER_CASED:
            text = text.upper()
        text = annotate(text)
        if code == "ja":
            text = self.japanese(text)
        text = _MARKER.sub(lambda m: f"<|{m.group(1).upper()}|>", text)
        if strict and not any(ch.isalnum() for ch in _MARKER.sub("", text)):
            raise TextError(f"nothing to speak in {text!r}: no letter or digit is left once normalised")
        return text

    def budget(self, lang: str, max_text_tokens_per_segment: int = MAX_TEXT_TOKENS_PER_SEGMENT) -> int:
        """A segment's most text tokens, the `<|lang|> ` prefix aside."""
        prefix = len(self.tokenizer.encode(f"<|{lang.lower()}|> "))
        return max(1, min(max_text_tokens_per_segment, self.text_positions - 2) - prefix)

    def split(self, text: str, lang: str, max_text_tokens_per_segment: int = MAX_TEXT_TOKENS_PER_SEGMENT) -> list[str]:
        """A prepared text's segments (step 7)."""
        return split_by_tokens(text, self.budget(lang, max_text_tokens_per_segment), lambda s: len(self.tokenizer.encode(s)))

    def segments(
        self, text: str, lang: str, max_text_tokens_per_segment: int = MAX_TEXT_TOKENS_PER_SEGMENT, normalize: bool = True, strict: bool = True
    ) -> list[list[int]]:
        """Each segment's ids as upstream feeds them to the GPT (its language id: `text25.language_id`)."""
        prepared = self.prepare(text, lang, normalize, strict)
        return [self.tokenizer.segment_ids(s, lang) for s in self.split(prepared, lang, max_text_tokens_per_segment)]
