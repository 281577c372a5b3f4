"""The sentence splitter over a multilingual corpus (tests/data/sentences.json), the language's
way from a request to the splitter, the guess for "auto", and the splitter's speed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from koe.engines import pipeline
from koe.engines.base import SynthesisRequest
from koe.engines.pipeline import Piece, PipelineDefaults
from koe.text.language import guess_language, language_code
from koe.text.segment import segment_text, split_sentences

CORPUS = json.loads((Path(__file__).parent / "data" / "sentences.json").read_text(encoding="utf-8"))["cases"]
NAMES = {
    "en": "english",
    "de": "german",
    "fr": "french",
    "es": "spanish",
    "it": "italian",
    "pt": "portuguese",
    "ru": "russian",
    "zh": "chinese",
    "ja": "japanese",
    "ko": "korean",
}


def test_the_corpus_covers_every_supported_language():
    assert {c["language"] for c in CORPUS} == set(NAMES)
    assert len({c["id"] for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[c["id"] for c in CORPUS])
def test_corpus_case(case):
    assert split_sentences(case["text"], case["language"]) == case["sentences"]


@pytest.mark.parametrize("case", CORPUS, ids=[c["id"] for c in CORPUS])
def test_corpus_case_by_model_language_name_and_auto(case):
    """Models name languages ("german"); "auto" guesses the language from the text."""
    assert split_sentences(case["text"], NAMES[case["language"]]) == case["sentences"]
    assert split_sentences(case["text"], "auto") == case["sentences"]


def test_the_issue_example():
    assert split_sentences("Das ist z.B. Nr. 5. Es kostet ca. 3 Euro.", "german") == ["Das ist z.B. Nr. 5.", "Es kostet ca. 3 Euro."]


def test_the_same_stop_is_read_by_the_language():
    """A German ordinal ("am 3. Mai") is a number ending a sentence in English."""
    text = "Wir kommen am 3. Mai wieder."
    assert split_sentences(text, "de") == [text]
    assert split_sentences(text, "en") == ["Wir kommen am 3.", "Mai wieder."]


@pytest.mark.parametrize(
    "language, code",
    [("english", "en"), ("German", "de"), ("pt-BR", "pt"), ("zh_CN", "zh"), ("ko", "ko"), ("nl", "nl")],
)
def test_language_names_and_codes(language, code):
    assert language_code(language, "") == code


@pytest.mark.parametrize(
    "text, code",
    [
        ("The cat sat on the mat and it was happy.", "en"),
        ("Der Hund ist nicht in dem Haus und die Katze auch nicht.", "de"),
        ("Le chat est dans la maison et il dort pour la nuit.", "fr"),
        ("El perro está en la casa y no quiere salir con los niños.", "es"),
        ("Il gatto è nella casa e non vuole uscire con gli amici.", "it"),
        ("O gato não está em casa e a menina é muito feliz.", "pt"),
        ("Кошка сидит дома.", "ru"),
        ("今天天气很好。", "zh"),
        ("今日は晴れです。", "ja"),
        ("오늘 날씨가 좋네요.", "ko"),
        ("12345 !!!", "en"),
    ],
)
def test_auto_guesses_from_script_and_words(text, code):
    assert guess_language(text) == code
    assert language_code("auto", text) == code
    assert language_code(None, text) == code


class _Echo:
    """A segment speaker that says each segment as one sample per character (the pipeline is under test)."""

    sample_rate = 1000
    pipeline_defaults = PipelineDefaults(max_segment_chars=30, pause_s=0.0)

    def check_request(self, request):
        return None

    def speak_segment(self, segment, checked):
        yield Piece(np.zeros(len(segment.text), np.float32), len(segment.text), last=True)

    def result_metadata(self):
        return {}


def _spoken_segments(text: str, language: str | None) -> list[str]:
    chunks = list(pipeline.run(_Echo(), SynthesisRequest(text=text, language=language)))
    return [s["text"] for s in chunks[-1].metadata["segments"]]


def test_the_pipeline_passes_the_request_language_to_the_splitter():
    """A sentence over the limit is cut at spaces; read as English, it is cut at "3." instead."""
    text = "Der Markt ist offen am 3. Mai bis zum Abend. Dann essen wir."
    assert _spoken_segments(text, "german") == ["Der Markt ist offen am 3. Mai", "bis zum Abend. Dann essen wir."]
    assert _spoken_segments(text, "english") == ["Der Markt ist offen am 3.", "Mai bis zum Abend.", "Dann essen wir."]
    assert _spoken_segments(text, "auto") == _spoken_segments(text, None) == _spoken_segments(text, "german")


def test_segment_text_takes_the_language():
    text = "Das ist z.B. Nr. 5. Es kostet ca. 3 Euro."
    assert segment_text(text, 24, "german") == ["Das ist z.B. Nr. 5.", "Es kostet ca. 3 Euro."]


def test_thousands_of_characters_split_in_milliseconds():
    text = " ".join(c["text"] for c in CORPUS)
    text = (text + " ") * (20_000 // len(text) + 1)
    split_sentences(text[:2000], "auto")  # the library's first call
    started = time.perf_counter()
    sentences = split_sentences(text, "auto")
    elapsed = time.perf_counter() - started
    assert len(sentences) > 400
    assert elapsed < 0.5, f"{len(text)} characters took {elapsed * 1000:.0f} ms"
