"""The language front-end goldens (`japanese`, `korean`, `cantonese`, `chinese_v1`): their inputs
(`write_corpus`, which the golden_<topic>.py modules load by path) and checks: each sentence's
normalised text, phonemes and word2ph from the module, and clean_text's result (or its error),
equal to upstream's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from koe.engines.gpt_sovits.text import clean


def write_corpus(folder: Path, corpus: list[str], dictionary: Path | None = None) -> None:
    """`corpus.json`, and `state_sha256.txt` with its hash (`corpus`) and the dictionary file's (`dictionary`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.json").write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    lines = [f"corpus {hashlib.sha256((folder / 'corpus.json').read_bytes()).hexdigest()}"]
    if dictionary is not None:
        lines.append(f"dictionary {hashlib.sha256(dictionary.read_bytes()).hexdigest()}")
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")


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
