"""Inputs of the `latent` golden (koe's side): the `sovits` golden's tiny SoVITS v2 file and seeded
HuBERT features, whose semantic codes upstream's `SynthesizerTrn.extract_latent` gives (the
prompt `TTS._set_prompt_semantic` hands the AR model).

- `s2G.pth`: `write_sovits(..., "tiny", seed=SEED)` (the `sovits` golden's file).
- `inputs.npz`: `features.<name>` (1, frames, 768) float32, as the HuBERT model's
  `last_hidden_state` comes (upstream passes its transpose, a (1, 768, frames) view): an odd
  count (the stride-2 projection drops the last frame), a long one, and features scaled so that
  nearby codebook rows compete.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.fixtures_sovits import random_sovits_state, write_sovits
from koe.runtime.weights import state_sha256

SEED = 11  # the sovits golden's file
FEATURES = {"odd": (101, 1.0), "long": (498, 1.0), "small": (64, 0.25)}  # frames, scale (small: a few rows compete near one the bias alone picks)


def inputs() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(SEED + 2)
    return {f"features.{name}": (torch.randn(1, frames, 768, generator=g) * scale).numpy() for name, (frames, scale) in FEATURES.items()}


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_sovits(folder / "s2G.pth", "tiny", seed=SEED)
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "state_sha256.txt").write_text(state_sha256(random_sovits_state("tiny", SEED)) + "\n")
