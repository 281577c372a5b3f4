"""Inputs of the `t2s_batch` golden (koe's side): the AR text-to-semantic model's batched decoding,
as `TTS.run(parallel_infer=True)` (its default) calls upstream's `infer_panel_batch_infer`.

The same files as the `t2s` golden (golden_t2s.py: `s1.ckpt`, `inputs.npz`, `state_sha256.txt`)
with this topic's `cases.json`: batches of rows of different lengths (left-padded to the longest),
one row alone (`TTS.run`'s default batch_size 1), rows of one length, rows that stop at EOS at
different steps, at the early stop and at the loop bound (1,500 steps), and no prompt (upstream's fallback to serial decoding).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpt_sovits_golden_t2s_inputs", Path(__file__).with_name("golden_t2s.py"))
T2S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T2S)

SEED = T2S.SEED

CASES = {  # stops: per row, E at EOS, S at the early stop (what the seed gives on the tiny model)
    "defaults": {"texts": ["short", "long", "mid"], "prompt": True, "seed": 0, "stops": "EES"},
    "one_row": {"texts": ["mid"], "prompt": True, "seed": 1, "stops": "E"},
    "top_p": {"texts": ["mid", "long"], "prompt": True, "seed": 2, "top_k": 5, "top_p": 0.8, "temperature": 0.7, "stops": "SE"},
    "no_penalty": {"texts": ["long", "short"], "prompt": True, "seed": 3, "top_k": 30, "temperature": 1.2, "repetition_penalty": 1.0, "stops": "ES"},
    "same_lengths": {"texts": ["mid", "mid"], "prompt": True, "seed": 4, "top_k": 20, "stops": "ES"},
    "early_stop": {"texts": ["long", "mid"], "prompt": True, "seed": 5, "top_k": 3, "temperature": 0.5, "stops": "ES"},
    "early_stop_20": {"texts": ["short", "mid", "long"], "prompt": True, "seed": 6, "early_stop_num": 20, "stops": "ESS"},
    "no_prompt": {"texts": ["mid", "short"], "prompt": False, "seed": 7, "stops": "--"},
    "max_steps": {"texts": ["short", "mid"], "prompt": True, "seed": 8, "top_k": 1, "early_stop_num": -1, "stops": "SS"},  # to step 1499
}


def case(name: str) -> dict:
    """A case with the defaults filled in."""
    return {**T2S.DEFAULTS, "early_stop_num": None, **CASES[name]}


def write_inputs(folder: Path) -> None:
    T2S.write_inputs(folder, {name: case(name) for name in CASES})
