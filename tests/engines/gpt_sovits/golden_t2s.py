"""Inputs of the `t2s` golden (koe's side): the AR text-to-semantic model decoded serially, as
`TTS.run(parallel_infer=False)` calls upstream's `infer_panel_naive_batched`.

- `s1.ckpt`: `write_gpt(folder / "s1.ckpt", "tiny", seed=SEED)` (float16 weights in the released
  layout, max_sec 1: upstream stops after 50 new tokens).
- `inputs.npz`: per text `phones.<text>` (T,) int64 ids and `bert.<text>` (1024, T) float32 (what
  `TTS.run` passes: the prompt transcript's phones and features followed by the text's), and
  `prompt` (P,) int64 reference semantic tokens.
- `cases.json`: per case its texts (the batch's rows), whether it has the prompt (None:
  `TTS.run` without a reference transcript), the sampling settings, the seed set right before the
  call, and `early_stop_num` (null: upstream's `50 * max_sec`).

Cases cover TTS.run's defaults, top-p with temperature, no repetition penalty, top_k 1, no
prompt, rows that stop at EOS, at the early stop (50 tokens, or 20) and at upstream's loop bound
(1,500 steps, no early stop), and a batch of rows decoded one after another on one seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.fixtures_t2s import gpt_config, random_gpt_state, write_gpt
from koe.runtime.weights import state_sha256

SEED = 11
TEXTS = {"short": 9, "mid": 22, "long": 37}  # phones (prompt transcript + text)
PROMPT_TOKENS = 15
DEFAULTS = {"top_k": 15, "top_p": 1.0, "temperature": 1.0, "repetition_penalty": 1.35}

CASES = {  # stops: per row, E at EOS, S at the early stop (what the seed gives on the tiny model)
    "defaults": {"texts": ["mid"], "prompt": True, "seed": 1, "stops": "E"},
    "top_p": {"texts": ["mid"], "prompt": True, "seed": 1, "top_k": 5, "top_p": 0.8, "temperature": 0.7, "stops": "E"},
    "no_penalty": {"texts": ["long"], "prompt": True, "seed": 2, "top_k": 30, "temperature": 1.2, "repetition_penalty": 1.0, "stops": "E"},
    "top_k_1": {"texts": ["short"], "prompt": True, "seed": 3, "top_k": 1, "stops": "S"},
    "no_prompt": {"texts": ["mid"], "prompt": False, "seed": 4, "stops": "-"},
    "early_stop": {"texts": ["long"], "prompt": True, "seed": 5, "top_k": 3, "temperature": 0.5, "stops": "S"},
    "early_stop_20": {"texts": ["short"], "prompt": True, "seed": 8, "early_stop_num": 20, "stops": "S"},
    "rows": {"texts": ["short", "long", "mid"], "prompt": True, "seed": 7, "top_k": 20, "top_p": 0.9, "stops": "EES"},
    "max_steps": {"texts": ["short"], "prompt": True, "seed": 9, "top_k": 1, "early_stop_num": -1, "stops": "S"},  # to step 1499
}


def case(name: str) -> dict:
    """A case with the defaults filled in."""
    return {**DEFAULTS, "early_stop_num": None, **CASES[name]}


def inputs() -> dict[str, np.ndarray]:
    """The arrays of `inputs.npz`, seeded."""
    config = gpt_config("tiny")
    g = torch.Generator().manual_seed(SEED + 1)
    out = {}
    for name, n in TEXTS.items():
        out[f"phones.{name}"] = torch.randint(0, config.phoneme_vocab_size, (n,), generator=g).numpy()
        out[f"bert.{name}"] = torch.randn(1024, n, generator=g).numpy()
    out["prompt"] = torch.randint(0, config.eos, (PROMPT_TOKENS,), generator=g).numpy()
    return out


def write_inputs(folder: Path, cases: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_gpt(folder / "s1.ckpt", "tiny", seed=SEED)
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "cases.json").write_text(json.dumps({name: case(name) for name in CASES} if cases is None else cases, indent=1))
    (folder / "state_sha256.txt").write_text(state_sha256(random_gpt_state("tiny", SEED)) + "\n")
