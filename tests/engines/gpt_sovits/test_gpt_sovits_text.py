"""GPT-SoVITS's `clean_text` dispatch around its language front ends (upstream's `text/cleaner.py`):
the rules that hold for any front end, with stand-in front ends (the English and Chinese ones have
their own golden tests), and the pieces of the tables and fixtures that need no golden."""

from __future__ import annotations

import json

import pytest

from koe.engines.gpt_sovits.fixtures_text import tagger_sha256, tagger_state, write_tagger
from koe.engines.gpt_sovits.text.clean import LANGUAGES, LanguageNotBuilt, clean_text, front_end
from koe.engines.gpt_sovits.text.pos_tagger import PerceptronTagger, TaggerNotFound, find_tagger, tagger_files
from koe.engines.gpt_sovits.text.symbols import SYMBOLS_V1, SYMBOLS_V2, phone_ids


class Chinese:
    """A stand-in zh front end: each character one phoneme (commas ",", "！" itself: no v2 phoneme)."""

    def __init__(self, word2ph=None):
        self.calls = []
        self.word2ph = word2ph

    def normalize(self, text):
        return text.replace("!", "！")

    def g2p(self, norm_text):
        self.calls.append(norm_text)
        phones = ["," if c in ",，" else c if c == "！" else "a1" for c in norm_text]
        return phones, self.word2ph if self.word2ph is not None else [1] * len(norm_text)


class English:
    def normalize(self, text):
        return text.lower()

    def g2p(self, norm_text):
        return {" ": [], "hi": ["HH", "AY1"], "hello there": ["HH", "AH0", "L", "OW1", "DH", "EH1", "R"], "odd": ["AA1", "XX", "D"]}[norm_text], None


def test_tables_and_ids():
    assert SYMBOLS_V1[:2] == ("!", ",") and SYMBOLS_V2[:322] == SYMBOLS_V1 and SYMBOLS_V2[322:324] == ("[", "]")
    assert phone_ids(["_", "UNK", "SP2"], "v1") == [SYMBOLS_V1.index("_"), SYMBOLS_V1.index("UNK"), SYMBOLS_V1.index("SP2")]
    assert phone_ids(["Yz"], "v3") == [len(SYMBOLS_V2) - 1]  # every version after v1 reads v2's table
    with pytest.raises(KeyError):
        phone_ids(["Yz"], "v1")


def test_short_english_gets_a_leading_pause_and_unknown_phones_become_unk():
    fronts = {"en": English()}
    assert clean_text("Hi", "en", front_ends=fronts).phones == [",", "HH", "AY1"]
    long = clean_text("Hello there", "en", front_ends=fronts)
    assert long.phones[0] == "HH" and long.word2ph is None and long.norm_text == "hello there"
    assert clean_text("Odd", "en", front_ends=fronts).phones == [",", "AA1", "UNK", "D"]


def test_a_language_the_version_does_not_speak_is_a_pause():
    for text, language, version in (("안녕", "ko", "v1"), ("Bonjour", "fr", "v2"), ("Hola", "es", "v4")):
        cleaned = clean_text(text, language, version, {"en": English()})
        assert (cleaned.phones, cleaned.norm_text) == ([","], " ")  # English " ": nothing, then the short-text pause


def test_pause_marks_in_chinese():
    zh = Chinese()
    cleaned = clean_text("你好￥世界,再见", "zh", front_ends={"zh": zh})
    assert zh.calls == ["你好,世界,再见"]
    assert cleaned.phones == ["a1", "a1", "SP2", "a1", "a1", "SP2", "a1", "a1"]  # every comma, not only the mark's
    assert clean_text("你^好", "zh", front_ends={"zh": Chinese()}).phones == ["a1", "SP3", "a1"]
    cleaned = clean_text("你好!", "zh", front_ends={"zh": Chinese()})
    assert cleaned.norm_text == "你好！" and cleaned.word2ph == [1, 1, 1] and cleaned.phones == ["a1", "a1", "UNK"]


def test_word2ph_must_fit():
    with pytest.raises(ValueError, match="word2ph"):
        clean_text("你好", "zh", front_ends={"zh": Chinese(word2ph=[2, 1])})


def test_every_front_end_is_built(monkeypatch):
    assert LANGUAGES["v2"]["zh"] == "chinese" and LANGUAGES["v1"]["zh"] == "chinese_v1"
    for version, languages in LANGUAGES.items():
        for language, name in languages.items():
            assert front_end(language, version).__name__.endswith(f".{name}")
    assert front_end("en", "v4").__name__.endswith(".english")
    monkeypatch.setitem(LANGUAGES["v2"], "xx", "no_such_front_end")
    with pytest.raises(LanguageNotBuilt, match="xx"):
        front_end("xx", "v2")


def test_tagger_fixture_and_lookup(tmp_path, monkeypatch):
    folder = write_tagger(tmp_path / "data", seed=3)
    again = write_tagger(tmp_path / "again", seed=3)
    assert tagger_sha256(folder) == tagger_sha256(again) != tagger_sha256(write_tagger(tmp_path / "other", seed=4))
    assert [json.loads(p.read_text()) for p in tagger_files(folder)] == json.loads(json.dumps(tagger_state(3)))
    assert find_tagger(tmp_path / "data") == folder and find_tagger(folder) == folder
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "data"))
    assert find_tagger() == folder
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setattr("nltk.data.path", [str(tmp_path / "nowhere")])
    with pytest.raises(TaggerNotFound, match="nltk.downloader averaged_perceptron_tagger_eng"):
        find_tagger()
    tagger = PerceptronTagger.load(folder)
    tags = dict(tagger.tag(["I", "read", "the", "book", "to", "record", "it", "yesterday"]))
    assert tags["I"] == "PRP" and tags["read"] == "VBP" and tags["record"] == "VB"
