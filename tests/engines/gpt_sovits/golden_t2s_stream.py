"""Inputs of the `t2s_stream` golden (koe's side): the AR model's streamed decoding, as
`TTS.run(streaming_mode=True, parallel_infer=False)` calls upstream's `infer_panel_naive` with
`streaming_mode=True`: the serial loop's tokens in chunks.

The same files as the `t2s` golden (golden_t2s.py) with this topic's `cases.json`: per case one
text, the sampling settings and seed, `chunk_length`, and either fixed-length chunks
(`mute_token` null: `fixed_length_chunk=True`) or cuts at mute-like tokens: the similarity of every
codebook entry to `mute_token`'s, as `TTS.init_t2s_weights` computes it for token 486 (the tiny
codebook has 64 entries, so another entry stands in), with `split_threshold` (TTS.run passes 0.0).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpt_sovits_golden_t2s_inputs", Path(__file__).with_name("golden_t2s.py"))
T2S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T2S)

SEED = T2S.SEED
STREAM = {"chunk_length": 16, "mute_token": None, "split_threshold": 0.0}

CASES = {
    "fixed_16": {"texts": ["mid"], "prompt": True, "seed": 1},
    "fixed_8_early_stop": {"texts": ["long"], "prompt": True, "seed": 5, "top_k": 3, "temperature": 0.5, "chunk_length": 8},
    "mute_cuts": {"texts": ["long"], "prompt": True, "seed": 5, "top_k": 3, "temperature": 0.5, "chunk_length": 8, "mute_token": 33},
    "mute_cuts_0.3": {"texts": ["mid"], "prompt": True, "seed": 3, "top_k": 20, "chunk_length": 6, "mute_token": 20, "split_threshold": 0.3},
    "mute_no_prompt": {"texts": ["mid"], "prompt": False, "seed": 4, "chunk_length": 8, "mute_token": 33},
    "final_empty": {"texts": ["mid"], "prompt": True, "seed": 1, "chunk_length": 4},
}


def case(name: str) -> dict:
    """A case with the defaults filled in."""
    return {**T2S.DEFAULTS, "early_stop_num": None, **STREAM, **CASES[name]}


def write_inputs(folder: Path) -> None:
    T2S.write_inputs(folder, {name: case(name) for name in CASES})
