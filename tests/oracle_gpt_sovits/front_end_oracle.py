"""Upstream's side of the language front-end goldens (`japanese`, `korean`, `cantonese`, `chinese_v1`):
a corpus of sentences through one of upstream's `text/<module>.py` (text_normalize when it has one,
then g2p) and through `text.cleaner.clean_text` for the language and version, in the oracle venv.

`record(folder, out, module, language, version)` writes `cases` (JSON: per sentence its text, norm,
phones, word2ph (None where the module gives none), and clean_text's phones / word2ph / norm_text, or
the error either raised) and `<name>.state_sha256` for each `name HASH` line of the inputs'
`state_sha256.txt`, hashed again here from the files it names (`corpus.json`, a dictionary).
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import numpy as np


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(folder: Path, out: Path, module: str, language: str, version: str, hashed: dict[str, Path]) -> None:
    from text import cleaner

    front_end = importlib.import_module(f"text.{module}")
    cases = []
    for text in json.loads((folder / "corpus.json").read_text(encoding="utf-8")):
        case = {"text": text}
        try:
            norm = front_end.text_normalize(text) if hasattr(front_end, "text_normalize") else text
            result = front_end.g2p(norm)
            phones, word2ph = result if isinstance(result, tuple) else (result, None)
            case.update(norm=norm, phones=list(phones), word2ph=None if word2ph is None else list(word2ph))
        except Exception as e:  # noqa: BLE001 - upstream's failure is recorded, and koe's must match it
            case["error"] = f"{type(e).__name__}: {e}"
        try:
            phones, word2ph, norm_text = cleaner.clean_text(text, language, version)
            case["clean"] = {"phones": list(phones), "word2ph": None if word2ph is None else list(word2ph), "norm_text": norm_text}
        except Exception as e:  # noqa: BLE001
            case["clean"] = {"error": f"{type(e).__name__}: {e}"}
        cases.append(case)
    arrays = {"cases": np.array(json.dumps(cases, ensure_ascii=False))}
    for name, path in {"corpus": folder / "corpus.json", **hashed}.items():
        arrays[f"{name}.state_sha256"] = np.array(sha256(path))
    np.savez_compressed(out, **arrays)
    failed = sum("error" in c for c in cases)
    print(f"{module}: {len(cases)} sentences, {failed} failed in g2p, {sum(len(c.get('phones', [])) for c in cases)} phonemes")
