"""The splitter's own knowledge of full stops that do not end a sentence, per language.

Only what the sentence splitter must know before it asks the library (see `koe.text.segment`):
a stop followed by a lowercase word never ends a sentence, so these tables list only what is
followed by a capital or a number. Words are lowercase, without their final stop ("z.b" for z.B.).

- `NON_TERMINAL`: titles and references that lead into a name or a number (Dr. Smith, Nr. 5,
  p. 45, ул. Ленина): never a sentence end.
- `TERMINAL`: abbreviations that often close a list and so a sentence (etc., usw., ecc., т.д.):
  a sentence end when a capital follows ("..., Birnen usw. Der Markt ...").
- German ordinals ("am 3. Mai", "der 2. Weltkrieg", "im 19. Jahrhundert"): a number of up to
  three digits and a stop, before a month or after a word that leads into an ordinal.
"""

from __future__ import annotations

from koe.text.language import FUNCTION_WORDS


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Latin-script words in any language's text (English titles turn up in CJK texts too).
_COMMON = "mr mrs ms dr prof e.g i.e cf vs"
NON_TERMINAL = {
    "en": _words(
        _COMMON + " sr jr st fig figs no nos vol pp p ch chap sec approx dept est inc ltd co corp mt ft tel eq jan feb mar apr jun jul aug sep sept oct nov dec"
    ),
    "de": _words(_COMMON + " z.b d.h u.a u.ä o.ä z.t bzw ca vgl nr s hr fr frl dipl ing abb bd kap abs art tel jh jhd evtl ggf inkl zzgl st str"),
    "fr": _words(_COMMON + " m mm mgr pr p pp chap n no art vol fig tél av bd st ste ex"),
    "es": _words(_COMMON + " sr sra srta sres dra d dña ud uds vd vds lic ing núm pág págs cap art tel avda av p ej aprox"),
    "it": _words(_COMMON + " sig sigg dott prof avv ing arch on geom rag pag pagg cap art n nr tel fig es vol"),
    "pt": _words(_COMMON + " sr sra srs dra exa exmo exma prof eng av r n pág cap art tel p ex"),
    "ru": _words(_COMMON + " ул г гг д пр пер просп им см ср стр с рис гл ст тел т.е т.к т.н проф акад"),
}
TERMINAL = {
    "en": _words("etc"),
    "de": _words("usw etc usf u.s.w"),
    "fr": _words("etc"),
    "es": _words("etc"),
    "it": _words("ecc etc"),
    "pt": _words("etc"),
    "ru": _words("т.д т.п др"),
}
for _code in ("zh", "ja", "ko"):  # Latin words in CJK text: the English ones
    NON_TERMINAL[_code], TERMINAL[_code] = NON_TERMINAL["en"], TERMINAL["en"]
_COMMON_WORDS = frozenset(w for words in FUNCTION_WORDS.values() for w in words)
_ANY_NON_TERMINAL = frozenset().union(*NON_TERMINAL.values()) - _COMMON_WORDS
_ANY_TERMINAL = frozenset().union(*TERMINAL.values()) - _COMMON_WORDS

GERMAN_MONTHS = _words(
    "januar jänner februar märz april mai juni juli august september oktober november dezember jan feb mär apr jun jul aug sep sept okt nov dez"
)
GERMAN_ORDINAL_LEADS = _words(
    "am im vom zum beim ab bis seit zur der die das den dem des jeden jede jedes jeder"
    " ihr ihre ihrem ihren sein seine seinem seinen mein meine unser unsere dieser diese dieses"
)


def non_terminal(code: str, *, guessed: bool = False) -> frozenset[str]:
    """Abbreviations that never end a sentence in language `code`. For a guessed language (or one
    without a table) every table's words count too, except those that are common words somewhere
    ("no", "es"): a short text's guess may be wrong."""
    own = NON_TERMINAL.get(code, frozenset())
    return own | _ANY_NON_TERMINAL if guessed or code not in NON_TERMINAL else own


def terminal(code: str, *, guessed: bool = False) -> frozenset[str]:
    """Abbreviations that end a sentence before a capital in language `code` (`guessed` as above)."""
    own = TERMINAL.get(code, frozenset())
    return own | (_ANY_TERMINAL - non_terminal(code, guessed=True)) if guessed or code not in TERMINAL else own


def is_german_ordinal(number: str, previous_word: str, next_word: str) -> bool:
    """Is "`previous_word` `number`. `next_word`" a German ordinal ("am 3. Mai") rather than a sentence end?"""
    return 1 <= len(number) <= 3 and (next_word.lower().rstrip(".") in GERMAN_MONTHS or previous_word.lower() in GERMAN_ORDINAL_LEADS)
