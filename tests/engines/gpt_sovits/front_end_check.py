"""The language front-end goldens' checks (`japanese`, `korean`, `cantonese`, `chinese_v1`): each
sentence's normalised text, phonemes and word2ph from the module, and clean_text's result (or its
error), equal to upstream's."""

from __future__ import annotations

import json

from koe.engines.gpt_sovits.text import clean


def cases(golden) -> list[dict]:
    loaded = json.loads(str(golden["cases"]))
    assert loaded, "the golden holds no sentence"
    return loaded


def check_module(module, cases: list[dict]) -> None:
    for case in cases:
        assert "error" not in case, f"upstream failed on {case['text']!r}: {case['error']}"
        norm = module.normalize(case["text"]) if hasattr(module, "normalize") else case["text"]
        assert norm == case["norm"], case["text"]
        assert module.g2p(norm) == (case["phones"], case["word2ph"]), case["text"]


def check_clean_text(language: str, version: str, cases: list[dict]) -> None:
    for case in cases:
        try:
            cleaned = clean.clean_text(case["text"], language, version)
            got = {"phones": cleaned.phones, "word2ph": cleaned.word2ph, "norm_text": cleaned.norm_text}
        except Exception as e:  # noqa: BLE001 - upstream's failure, if any, is recorded the same way
            got = {"error": f"{type(e).__name__}: {e}"}
        assert got == case["clean"], case["text"]
