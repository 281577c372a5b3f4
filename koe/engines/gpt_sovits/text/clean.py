"""GPT-SoVITS's `clean_text(text, language, version)` (upstream's `text/cleaner.py`): one piece of
text in one language -> (phonemes, word2ph, norm_text), the phonemes in the version's table.

Each language has a front end, a module (or object) with
    normalize(text: str) -> str                                   (optional: else the text as it is)
    g2p(norm_text: str) -> tuple[list[str], list[int] | None]    (phonemes; for zh / yue, how many
                                                                  phonemes each character of
                                                                  norm_text gives, else None)
found by `front_end(language, version)` as `koe.engines.gpt_sovits.text.<LANGUAGES[version][language]>`
(v2: zh `chinese`, en `english`, ja `japanese`, ko `korean`, yue `cantonese`; v1: zh `chinese_v1`,
en, ja), or given in `front_ends`. A front end koe does not have yet raises `LanguageNotBuilt`.

What upstream does around them, kept:
- a language the version does not speak is read as English " " (so: a lone pause);
- Chinese text holding `￥` or `^` (each a pause the user asks for) is read with that mark as a
  comma, and its commas' phoneme `,` become `SP2` / `SP3` (every comma of the piece);
- English of fewer than 4 phonemes gets a leading `,`;
- zh / yue must give one word2ph count per character of norm_text, adding up to the phonemes;
- any phoneme outside the version's table becomes `UNK` (not on the ￥ / ^ path, which asserts).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

from koe.engines.gpt_sovits.text.symbols import phone_ids, symbols

__all__ = ["LANGUAGES", "Cleaned", "FrontEnd", "LanguageNotBuilt", "clean_text", "front_end"]

LANGUAGES = {
    "v1": {"zh": "chinese_v1", "ja": "japanese", "en": "english"},
    "v2": {"zh": "chinese", "ja": "japanese", "en": "english", "ko": "korean", "yue": "cantonese"},
}
"""The front-end module of each language a version speaks (v2's for every version after v1)."""
PAUSE_MARKS = (("￥", "zh", "SP2"), ("^", "zh", "SP3"))
"""Upstream's `special`: a character, the language it applies to, the pause phoneme it becomes."""


class FrontEnd(Protocol):
    def g2p(self, norm_text: str) -> tuple[list[str], list[int] | None]: ...


class LanguageNotBuilt(NotImplementedError):
    """A language GPT-SoVITS speaks whose front end koe does not have yet."""


@dataclass
class Cleaned:
    """One piece of text, cleaned: its phonemes (the version's symbols), word2ph (zh / yue: phonemes
    per character of norm_text, else None) and the normalised text."""

    phones: list[str]
    word2ph: list[int] | None
    norm_text: str

    def ids(self, version: str = "v2") -> list[int]:
        return phone_ids(self.phones, version)


def _table(version: str) -> dict[str, str]:
    return LANGUAGES["v1" if version == "v1" else "v2"]


def front_end(language: str, version: str = "v2"):
    """The front-end module of `language` for `version` (see the module's doc)."""
    name = _table(version)[language]
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__package__}.{name}":
            raise
        raise LanguageNotBuilt(f"GPT-SoVITS's {language!r} text front end ({version}) is not in koe yet") from None


def _normalize(module, text: str) -> str:
    return module.normalize(text) if hasattr(module, "normalize") else text


def clean_text(text: str, language: str, version: str = "v2", front_ends: dict[str, FrontEnd] | None = None) -> Cleaned:
    """Upstream's `clean_text`. `front_ends` overrides the modules by language (an English front end
    with another tagger, a test's stand-in)."""
    if language not in _table(version):
        language, text = "en", " "
    module = (front_ends or {}).get(language) or front_end(language, version)
    table = set(symbols(version))
    for mark, mark_language, pause in PAUSE_MARKS:
        if mark in text and language == mark_language:
            norm_text = _normalize(module, text.replace(mark, ","))
            phones, word2ph = module.g2p(norm_text)
            if any(p not in table for p in phones):
                raise ValueError(f"{language} front end gave phonemes outside {version}'s table: {[p for p in phones if p not in table]}")
            return Cleaned([pause if p == "," else p for p in phones], word2ph, norm_text)
    norm_text = _normalize(module, text)
    phones, word2ph = module.g2p(norm_text)
    if language in ("zh", "yue"):
        if len(phones) != sum(word2ph) or len(norm_text) != len(word2ph):
            raise ValueError(
                f"{language} front end's word2ph ({len(word2ph)} counts adding up to {sum(word2ph)}) does not fit {len(norm_text)} characters and {len(phones)} phonemes"
            )
    elif language == "en" and len(phones) < 4:
        phones = [",", *phones]
    if language not in ("zh", "yue"):
        word2ph = None
    return Cleaned(["UNK" if p not in table else p for p in phones], word2ph, norm_text)
