"""Inputs of the `cfm` golden (koe's side): a small DiT in upstream's classes' sizes (upstream's
`DiT` takes them; only `SynthesizerTrnV3` fixes them at the released 1024 x 22) and sampling cases
as `TTS.using_vocoder_synthesis` and its batched form call `CFM.inference`.

- `cfm.pt`: `random_cfm_state(CONFIG, SEED)` (float32, `estimator.*`), `dit.json`: CONFIG.
- `inputs.npz`: `mu.<name>` (B, T, text_dim) features (upstream's layout after its transpose),
  `prompt.<name>` (B, mel, P) reference mels (normalised range).
- `cases.json`: per case the inputs, `n_timesteps`, `temperature`, `cfg_rate` and the seed set
  right before the call (upstream's one `randn` draws from the global generator).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.dit import DiTConfig
from koe.engines.gpt_sovits.fixtures_v3 import random_cfm_state
from koe.runtime.weights import state_sha256

SEED = 31
CONFIG = DiTConfig(dim=64, depth=2, heads=4, dim_head=16, ff_mult=2, mel_dim=20, text_dim=32, conv_layers=2)
INPUTS = {"one": (1, 40, 12), "batch": (3, 50, 10), "short": (1, 9, 4)}  # batch, frames, prompt frames
CASES = {
    "one": {"inputs": "one", "n_timesteps": 4, "temperature": 1.0, "cfg_rate": 0.0, "seed": 1},
    "batch": {"inputs": "batch", "n_timesteps": 2, "temperature": 1.0, "cfg_rate": 0.0, "seed": 2},
    "one_step": {"inputs": "short", "n_timesteps": 1, "temperature": 1.0, "cfg_rate": 0.0, "seed": 3},
    "steps_7": {"inputs": "one", "n_timesteps": 7, "temperature": 0.8, "cfg_rate": 0.0, "seed": 4},
    "guided": {"inputs": "one", "n_timesteps": 3, "temperature": 1.0, "cfg_rate": 0.7, "seed": 5},
}


def inputs() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(SEED + 1)
    out: dict[str, np.ndarray] = {}
    for name, (b, t, p) in INPUTS.items():
        out[f"mu.{name}"] = torch.randn(b, t, CONFIG.text_dim, generator=g).numpy()
        out[f"prompt.{name}"] = (torch.rand(b, CONFIG.mel_dim, p, generator=g) * 2 - 1).numpy()
    return out


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    state = random_cfm_state(CONFIG, SEED)
    torch.save(state, folder / "cfm.pt")
    (folder / "dit.json").write_text(json.dumps(dataclasses.asdict(CONFIG)))
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "cases.json").write_text(json.dumps(CASES, indent=1))
    (folder / "state_sha256.txt").write_text(state_sha256(state) + "\n")
