"""Inputs of the `infer_stream` golden (koe's side): upstream's `TTS.run(streaming_mode=True)` on the
`infer` golden's tiny v2 folder (golden_infer.py's `write_inputs`: the same model, clips and weight
hashes, so a test module holding that folder already reuses it), with this topic's cases in
`cases.json`: the mute-token cuts at upstream's defaults over two fragments; fixed-length chunks of
4 tokens with a wider overlap (later chunks under 10 tokens widen it) whose tokens end with a chunk,
so the last chunk is empty (the held-back tail); short mute cuts (their repeated tokens) with one
token of overlap; and the options streaming_mode overrides (return_fragment,
parallel_infer, split_bucket) reference-free at another speed with no fragment interval.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpt_sovits_golden_infer_inputs", Path(__file__).with_name("golden_infer.py"))
INFER = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(INFER)

HELLO = "Hello there. How are you today?"
CASES = {
    "mute_cuts": {"text": HELLO, "text_lang": "en", "seed": 31, "text_split_method": "cut5"},
    "fixed": {"text": "Hello there, how are you?", "text_lang": "en", "seed": 47, "fixed_length_chunk": True, "min_chunk_length": 4, "overlap_length": 3},
    "short_cuts": {"text": "Hello there, how are you?", "text_lang": "en", "seed": 38, "min_chunk_length": 4, "overlap_length": 1},
    "overridden": {
        "text": "How are you today? Fine.",
        "text_lang": "en",
        "seed": 34,
        "prompt_text": "",
        "speed_factor": 1.3,
        "fragment_interval": 0.0,
        "return_fragment": True,
        "parallel_infer": True,
        "split_bucket": True,
        "text_split_method": "cut5",
    },
}


def case(name: str) -> dict:
    """A case as `TTS.run` gets it: streaming_mode on, the `infer` golden's transcript unless it says otherwise."""
    return {**INFER.DEFAULTS, "streaming_mode": True, **CASES[name]}


def state() -> dict:
    return INFER.state()


def write_inputs(folder: Path) -> None:
    INFER.write_inputs(folder)
    cases = {name: case(name) for name in CASES}
    (folder / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1), encoding="utf-8")
