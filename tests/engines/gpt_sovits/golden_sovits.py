"""Inputs of the `sovits` golden (koe's side): a tiny SoVITS v2 file in the released format
(`fixtures_sovits.write_sovits`, v2 header) and decode cases as `TTS.run` makes them.

- `s2G.pth`: `write_sovits(..., "tiny", seed=SEED)`.
- `inputs.npz`: reference spectrograms `spec.<name>` (1, 1025, frames) float32 (seeded magnitudes:
  the other helper's `reference` module makes real ones; SoVITS only reads them), `codes.<name>`
  (1, 1, T) int64 semantic codes, `phones.<name>` (1, N) int64 phoneme ids of v2's 732 symbols.
- `cases.json`: per case the codes, phones, references (a list: `TTS.run` always passes one),
  `speed`, `noise_scale` and the seed set right before the call.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.fixtures_sovits import random_sovits_state, write_sovits
from koe.runtime.weights import state_sha256

SEED = 11
SPECS = {"a": 96, "b": 61}  # frames
CODES = {"short": 12, "mid": 31, "long": 150}
PHONES = {"short": 9, "mid": 24, "long": 83}
CASES = {
    "short": {"codes": "short", "phones": "short", "refs": ["a"], "speed": 1.0, "noise_scale": 0.5, "seed": 1},
    "long": {"codes": "long", "phones": "long", "refs": ["a"], "speed": 1.0, "noise_scale": 0.5, "seed": 2},
    "fast": {"codes": "mid", "phones": "mid", "refs": ["a"], "speed": 1.3, "noise_scale": 0.5, "seed": 3},
    "slow": {"codes": "mid", "phones": "mid", "refs": ["b"], "speed": 0.75, "noise_scale": 0.5, "seed": 4},
    "two_refs": {"codes": "mid", "phones": "mid", "refs": ["a", "b"], "speed": 1.0, "noise_scale": 0.5, "seed": 5},
    "noise": {"codes": "short", "phones": "mid", "refs": ["b", "a"], "speed": 1.1, "noise_scale": 0.9, "seed": 6},
    "quiet": {"codes": "short", "phones": "short", "refs": ["a"], "speed": 1.0, "noise_scale": 0.0, "seed": 7},
}
FULL = ("short", "quiet")  # cases whose whole waveform is kept; the others: hash, shape, head and tail


def inputs() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(SEED + 1)
    out: dict[str, np.ndarray] = {}
    for name, frames in SPECS.items():
        out[f"spec.{name}"] = (torch.randn(1, 1025, frames, generator=g).abs() * torch.linspace(2.0, 0.05, 1025).view(1, -1, 1)).numpy()
    for name, n in CODES.items():
        out[f"codes.{name}"] = torch.randint(0, 1024, (1, 1, n), generator=g).numpy()
    for name, n in PHONES.items():
        out[f"phones.{name}"] = torch.randint(0, 732, (1, n), generator=g).numpy()
    return out


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_sovits(folder / "s2G.pth", "tiny", seed=SEED)
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "cases.json").write_text(json.dumps({"cases": CASES, "full": FULL}, indent=1))
    (folder / "state_sha256.txt").write_text(state_sha256(random_sovits_state("tiny", SEED)) + "\n")
