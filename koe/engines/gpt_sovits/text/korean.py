"""GPT-SoVITS v2's Korean front end (upstream `GPT_SoVITS/text/korean.py`, `g2p`): text to the v2
table's Korean letters (compatibility jamo, one symbol per letter), through g2pk2's pronunciation rules.

Upstream's steps, kept:

1. Latin letters spelled out in Hangul, letter by letter (`a` -> 에이, `w` -> 더블유; case folded as
   Python's `re.IGNORECASE` folds them).
2. g2pk2's `G2p` (pronunciation as spoken): its idioms table, English words to Hangul, mecab-ko's
   part-of-speech tags (python-mecab-ko with the mecab-ko-dic its wheel ships), Sino-Korean / native
   numerals read out, the special and regular rules (batchim, linking), syllables composed again.
3. Syllables split into compatibility jamo (`jamo`), and each compound vowel into two letters
   (ㅘ -> ㅗㅏ, ㅑ -> ㅣㅏ, ...).
4. g2pk2's ㄹ-linking error mended (`ㅇㅡㄹ ㄹ` / `ㄹㅡㄹ ㄹ` -> `... ㄴ`), a final letter given a `.`.
5. Each character a phoneme: the full-width marks folded as the other languages fold them, a space
   `空`, anything else the v2 table lacks `停` (a pause).

g2pk2 is used through its rule modules, not its package: `import g2pk2` downloads NLTK's CMUdict when
it is missing, and `G2p()` cannot start without it. g2pk2 reads that dictionary only for Latin words,
which step 1 has already spelled out (only a run of apostrophes could still reach it, looked up as a
word), so koe runs G2p's steps with an empty English dictionary and nothing is downloaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from functools import cache
from pathlib import Path

from koe.engines.gpt_sovits.text.symbols import SYMBOLS_V2

__all__ = ["fix_g2pk2_error", "g2p", "g2pk2", "latin_to_hangul", "split_jamo"]

_LETTERS = {
    "a": "에이", "b": "비", "c": "시", "d": "디", "e": "이", "f": "에프", "g": "지", "h": "에이치", "i": "아이",
    "j": "제이", "k": "케이", "l": "엘", "m": "엠", "n": "엔", "o": "오", "p": "피", "q": "큐", "r": "아르",
    "s": "에스", "t": "티", "u": "유", "v": "브이", "w": "더블유", "x": "엑스", "y": "와이", "z": "제트",
}  # fmt: skip
_LATIN = [(re.compile(letter, re.IGNORECASE), hangul) for letter, hangul in _LETTERS.items()]
_COMPOUND_VOWELS = {
    "ㅘ": "ㅗㅏ", "ㅙ": "ㅗㅐ", "ㅚ": "ㅗㅣ", "ㅝ": "ㅜㅓ", "ㅞ": "ㅜㅔ", "ㅟ": "ㅜㅣ", "ㅢ": "ㅡㅣ",
    "ㅑ": "ㅣㅏ", "ㅒ": "ㅣㅐ", "ㅕ": "ㅣㅓ", "ㅖ": "ㅣㅔ", "ㅛ": "ㅣㅗ", "ㅠ": "ㅣㅜ",
}  # fmt: skip
_MARKS = {"：": ",", "；": ",", "，": ",", "。": ".", "！": "!", "？": "?", "\n": ".", "·": ",", "、": ",", "...": "…", " ": "空"}
_SPECIAL_RULES = (
    "jyeo",
    "ye",
    "consonant_ui",
    "josa_ui",
    "vowel_ui",
    "jamo",
    "rieulgiyeok",
    "rieulbieub",
    "verb_nieun",
    "balb",
    "palatalize",
    "modifying_rieul",
)


@cache
def _g2pk2_modules() -> dict[str, types.ModuleType]:
    # g2pk2's rule modules, imported under a bare package so its __init__ (NLTK's download) never runs
    spec = importlib.util.find_spec("g2pk2")
    if spec is None:
        raise ModuleNotFoundError("GPT-SoVITS's Korean front end needs g2pk2", name="g2pk2")
    loaded = "g2pk2" in sys.modules
    if not loaded:
        bare = types.ModuleType("g2pk2")
        bare.__path__ = list(spec.submodule_search_locations)
        bare.__spec__ = importlib.util.spec_from_loader("g2pk2", loader=None, is_package=True)
        sys.modules["g2pk2"] = bare
    try:
        return {name: importlib.import_module(f"g2pk2.{name}") for name in ("english", "numerals", "regular", "special", "utils")}
    finally:
        if not loaded:
            del sys.modules["g2pk2"]  # a later `import g2pk2` runs the real package


@cache
def _mecab():
    import mecab

    return mecab.MeCab()


@cache
def _idioms() -> list[tuple[str, str]]:
    path = Path(_g2pk2_modules()["utils"].__file__).with_name("idioms.txt")
    rules = []
    for line in path.read_text(encoding="utf8").splitlines():
        line = line.split("#")[0].strip()
        if "===" in line:
            before, after = line.split("===")
            rules.append((before, after))
    return rules


@cache
def _table():
    return _g2pk2_modules()["utils"].parse_table()


def g2pk2(text: str) -> str:
    """g2pk2's `G2p()(text)` (defaults: prescriptive, syllables composed) with an empty CMUdict."""
    from jamo import h2j

    m = _g2pk2_modules()
    for before, after in _idioms():
        text = re.sub(before, after, text)
    text = m["english"].convert_eng(text, {})
    text = m["utils"].annotate(text, _mecab())
    text = m["numerals"].convert_num(text)
    letters = h2j(text)
    for name in _SPECIAL_RULES:
        letters = getattr(m["special"], name)(letters, False, False)
    letters = re.sub("/[PJEB]", "", letters)
    for before, after, _ in _table():
        letters = re.sub(before, after, letters)
    for link in (m["regular"].link1, m["regular"].link2, m["regular"].link3, m["regular"].link4):
        letters = link(letters, False, False)
    return m["utils"].compose(letters)


def latin_to_hangul(text: str) -> str:
    for pattern, hangul in _LATIN:
        text = pattern.sub(hangul, text)
    return text


def split_jamo(text: str) -> str:
    """Syllables to compatibility jamo, compound vowels to two letters (upstream's `divide_hangul`)."""
    from jamo import h2j, j2hcj

    return "".join(_COMPOUND_VOWELS.get(c, c) for c in j2hcj(h2j(text)))


def fix_g2pk2_error(text: str) -> str:
    """`ㅇㅡㄹ ㄹ` / `ㄹㅡㄹ ㄹ` -> `... ㄴ` (upstream's mend of g2pk2's linking), scanning left to right."""
    mended, i = "", 0
    while i < len(text) - 4:
        if text[i : i + 3] in ("ㅇㅡㄹ", "ㄹㅡㄹ") and text[i + 3] == " " and text[i + 4] == "ㄹ":
            mended += text[i : i + 3] + " ㄴ"
            i += 5
        else:
            mended += text[i]
            i += 1
    return mended + text[i:]


def _phoneme(char: str, table: frozenset[str]) -> str:
    char = _MARKS.get(char, char)
    return char if char in table else "停"


def g2p(norm_text: str) -> tuple[list[str], None]:
    """Korean text to v2 phonemes, one per letter (upstream's `g2p`; Korean has no `text_normalize`)."""
    text = fix_g2pk2_error(split_jamo(g2pk2(latin_to_hangul(norm_text))))
    text = re.sub(r"([\u3131-\u3163])$", r"\1.", text)
    table = frozenset(SYMBOLS_V2)
    return [_phoneme(c, table) for c in text], None
