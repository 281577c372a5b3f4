"""Inputs of the `english` golden (koe's side): GPT-SoVITS v2's English front end on a corpus of
tricky English (numbers, currencies, times, units, fractions, ordinals, arithmetic, acronyms and
CamelCase, accents, contractions, possessives, names, homographs, made-up words, punctuation runs,
CJK punctuation, very short and empty texts).

- `nltk_data/`: an NLTK data root holding the stand-in English tagger (`fixtures_text.write_tagger`,
  seed `SEED`): NLTK's real one is a download koe's tests cannot make;
- `corpus.json`: `sentences` (through `clean_text(text, "en", version)` for v2 and v1),
  `words` (through the word reader, `qryword`: dictionaries, names, spelling, possessives,
  compounds, the model), `oov` (straight to g2p_en's model), `tagged` (sentences whose
  tokens and tags are compared) and `fuzz` (300 seeded random strings of the normaliser's and the
  reader's trigger pieces, through `text_normalize` and `g2p`);
- `state_sha256.txt`: the tagger's hash (`tagger`) and the hash of the dictionaries koe ships
  (`dictionaries`: their decompressed bytes; upstream's side records the hash of its own files).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from importlib import resources
from pathlib import Path

from koe.engines.gpt_sovits.fixtures_text import tagger_sha256, write_tagger

SEED = 11
DICTIONARIES = ("cmudict.rep.gz", "cmudict-fast.rep.gz", "engdict-hot.rep")

SENTENCES = [
    "Hello world.",
    "Hi",
    "OK",
    "A",
    "a",
    "x",
    "Ok.",
    "-",
    "...",
    "?",
    "123",
    "",
    " ",
    "I read the book yesterday, and I read books every day.",
    "Read it, read it again; I have read it.",
    "They refuse to collect the refuse.",
    "Please record the record, then present the present.",
    "This is a complex problem, and the complex is big.",
    "The wind is strong; wind the clock. Live live.",
    "e.g. I used openai's AI tool to draw a picture.",
    "In this; paper, we propose 1 DSPGAN, a GAN-based universal vocoder.",
    "It costs $3.50, or £2.05, or 7$, or 10£.",
    "$0.5 and £.75 and $1,234,567.89 and $1.2.3",
    "We meet at 13:30, 9:05, 12:00 and 0:15.",
    "1. First item 2. Second item",
    "Run 5km in 20min at 12km/h, then 1L of water, 1.5L, 2ft, 1h, 3s, 1tbsp and 2tsp.",
    "It is -5°C outside, or 23°F, and -3 more.",
    "3/4 of 1/2 is 3/8; 5/1 and 2/2 and 1/3.",
    "The 1st, 2nd, 3rd, 4th and 21st places.",
    "In 1999, 2000, 2005, 2010, 1200, 1066, 3000, 1000 and 999.",
    "3.14159 is pi, and 0.5 is half, 1. 5 too.",
    "100% sure, 50 % maybe.",
    "1 + 2 = 3, 6 × 7 = 42, 8 ÷ 2 = 4, 10 - 3 = 7.",
    "x + y = z, and a - b, x² + y² = r².",
    "The well - known fact.",
    "Café naïve résumé, déjà vu, Zürich.",
    "NASA, FBI, USA and the UK.",
    "iPhone, macOS, JavaScript, YouTube, ChatGPT, JSON, conda.",
    "Don't, won't, can't, I'm, you're, we've, they'd, it's, y'all.",
    "John's, James's, Bach's, Mike's, Liz's, the dog's, Cliff's.",
    "Zyxqblorft and flibbertigibbet are unbelievablyish words.",
    "supercalifragilisticexpialidocious",
    "antidisestablishmentarianism, hyperparameter, microservices, sunflowerseeds.",
    "Wait... what?! Really?? No!!!",
    "Hello, , world -- again --- and ' quotes ' here.",
    '"Quoted," she said. “Curly” ‘quotes’ here.',
    "Hello。World！Ok？",
    "Mixed；Chinese：marks，here。",
    "The AE, AI, AR, iOS, HUD and OS abbreviations.",
    "Mr. Smith and Dr. Who met St. John at 5 p.m., i.e. late.",
    "Alice, Bob, Charlie, Aaditya, Priyanka and Xiaoming.",
    "email me at foo@bar.com or visit https://example.com/path?q=1",
    "#hashtag @handle :) :-( <3",
    "Tab\tseparated\nnew line text.",
    "ALL CAPS SENTENCE HERE.",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "The year 2024 and 2025, the number 1,000,000 and 12,345.",
    "Phone 555-1234 and 1-800-555-0199.",
    "I'd like 2 apples, 3 oranges and 10 bananas.",
    "It was (5$ each).",
    "Numbers: 0, 7, 13, 99, 101, 1001, 10000, 123456789.",
]
WORDS = [
    "hello",
    "Aaditya",
    "aaditya",
    "Priyanka",
    "xyz",
    "a's",
    "ab",
    "abc",
    "ae",
    "hud",
    "cat's",
    "church's",
    "bob's",
    "sunflowerseed",
    "keyboardwarrior",
    "zyxqblorft",
    "o'clock",
    "well-known",
]
OOV = [
    "zyxqblorft",
    "flibbertigibbet",
    "koe",
    "sovits",
    "activationist",
    "qwerty",
    "brexit",
    "xylophonic",
    "a'b",
    "zzz",
    "ab-cd",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
]
TAGGED = [
    "I read the book yesterday, and I read books every day.",
    "They refuse to collect the refuse.",
    "Running quickly, the famous Alice has learned 4 things in 2024.",
    "well-known self-made 1999 3.5 -dash",
]

# Random strings of the normaliser's and the reader's trigger pieces (digits, units, currencies,
# arithmetic signs, CJK punctuation, abbreviations, homographs, names, possessives, compounds).
_PIECES = [*"0123456789" * 3, *" " * 6, *".,:;/-+=×÷$£%°'\"’!?…。！？；：，()", "°C", "°F", "km/h", "km", "min", "st", "nd", "th", "L", "s", "h"]
_PIECES += ["ft", "tbsp", "e.g.", "i.e.", "1. ", "\n", "é", "²", "the", "cat", "Read", "read", "OpenAI", "NASA", "a", "A", "I", "x", "John's", "well"]
_PIECES += ["known", "zyx", "sunflowerseed", "Aaditya", "conda", "record", "Present"]


def fuzz(n: int = 300, seed: int = SEED) -> list[str]:
    g = random.Random(seed)
    return ["".join(g.choice(_PIECES) for _ in range(g.randint(1, 14))) for _ in range(n)]


FUZZ = fuzz()


def dictionaries_sha256() -> str:
    """One hash of the English dictionaries koe ships, decompressed, in `DICTIONARIES`' order."""
    h = hashlib.sha256()
    data = resources.files("koe.engines.gpt_sovits.text").joinpath("data")
    for name in DICTIONARIES:
        raw = data.joinpath(name).read_bytes()
        h.update(gzip.decompress(raw) if name.endswith(".gz") else raw)
    return h.hexdigest()


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tagger = write_tagger(folder / "nltk_data", SEED)
    corpus = {"sentences": SENTENCES, "words": WORDS, "oov": OOV, "tagged": TAGGED, "fuzz": FUZZ, "dictionaries": list(DICTIONARIES)}
    (folder / "corpus.json").write_text(json.dumps(corpus, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "state_sha256.txt").write_text(f"tagger {tagger_sha256(tagger)}\ndictionaries {dictionaries_sha256()}\n")
