"""Which language a text is in, as the sentence splitter needs it (an ISO 639-1 code).

A request names its language the way its model does ("english", "german", "auto") or as a code
("en", "de-AT"). `language_code` turns either into a code; "auto" (or nothing) is guessed from the
text: its script first (hangul -> ko, kana -> ja, han -> zh, cyrillic -> ru), then, for Latin
script, the most frequent function words of en, de, fr, es, it, pt (English when none stand out).
The guess only picks the splitter's abbreviation tables, so a wrong guess costs little.
"""

from __future__ import annotations

import re
from collections import Counter

NAMES = {
    "english": "en",
    "german": "de",
    "french": "fr",
    "spanish": "es",
    "italian": "it",
    "portuguese": "pt",
    "russian": "ru",
    "chinese": "zh",
    "japanese": "ja",
    "korean": "ko",
}
CODES = frozenset(NAMES.values())

# Frequent short words that tell the Latin-script languages apart (shared ones count for each).
FUNCTION_WORDS = {
    "en": "the and of to is that it was for with are this you not have".split(),
    "de": "der die das und ist nicht ein eine ich sie mit auf den dem zu es sich auch".split(),
    "fr": "le la les et est des une un que pas du dans pour au il elle sont avec".split(),
    "es": "el los las y es que del una por para con se no está son muy".split(),
    "it": "il gli che di è della non per una sono con del ma anche lo".split(),
    "pt": "o os as e que do da não uma para com em é dos das muito".split(),
}
_SAMPLE = 4000  # characters looked at: enough to tell, bounded cost on long texts
_WORDS = re.compile(r"[^\W\d_]+", re.UNICODE)


def language_code(language: str | None, text: str = "") -> str:
    """The ISO 639-1 code for `language` ("english", "en", "pt-BR", ...); None, "" or "auto":
    guessed from `text`. A name koe does not know is guessed too; an unknown code is kept."""
    return resolve_language(language, text)[0]


def resolve_language(language: str | None, text: str = "") -> tuple[str, bool]:
    """(`language_code`, whether it was guessed from the text)."""
    name = (language or "").strip().lower().replace("_", "-")
    if name in CODES:
        return name, False
    if name in NAMES:
        return NAMES[name], False
    base = name.split("-")[0]
    if base in CODES or (len(base) == 2 and base.isalpha()):
        return base, False
    return guess_language(text), True


def guess_language(text: str) -> str:
    """The language of `text` from its script, then from its function words (see the module doc)."""
    sample = text[:_SAMPLE]
    scripts = Counter(_script(ch) for ch in sample)
    if scripts["kana"]:
        return "ja"
    latin = scripts["latin"]
    if scripts["hangul"] and scripts["hangul"] >= scripts["han"]:
        return "ko"
    if scripts["han"] and scripts["han"] * 3 >= latin:
        return "zh"
    if scripts["cyrillic"] > latin:
        return "ru"
    words = Counter(w.lower() for w in _WORDS.findall(sample))
    scores = {code: sum(words[w] for w in vocab) for code, vocab in FUNCTION_WORDS.items()}
    best = max(scores, key=lambda code: scores[code])
    return best if scores[best] > 0 else "en"


def _script(ch: str) -> str:
    o = ord(ch)
    if 0x3040 <= o <= 0x30FF or 0x31F0 <= o <= 0x31FF:
        return "kana"
    if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return "hangul"
    if 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF:
        return "han"
    if 0x0400 <= o <= 0x04FF:
        return "cyrillic"
    if ch.isalpha() and o < 0x0250:
        return "latin"
    return "other"
