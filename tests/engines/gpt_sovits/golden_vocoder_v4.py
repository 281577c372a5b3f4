"""Inputs of the `vocoder_v4` golden (koe's side): v4's vocoder (upstream's HiFi-GAN `Generator`
without reference conditioning, conv_post with a bias) at small widths, as `vocoder.pth` is
stored (a plain state dict of folded weights), and mels.

- `vocoder.pth`: `write_vocoder_v4(..., CONFIG, SEED)`; `vocoder.json`: CONFIG (v4's odd
  upsampling kernels (20, 12, ...) kept, 64 channels).
- `inputs.npz`: `mel.<name>` (1, mels, frames) float32 in the log-mel range.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.fixtures_v3 import random_vocoder_state, write_vocoder_v4
from koe.engines.gpt_sovits.vocoder_v4 import VocoderConfig
from koe.runtime.weights import state_sha256

SEED = 51
CONFIG = VocoderConfig(
    num_mels=20,
    upsample_rates=(10, 6, 2),
    upsample_kernel_sizes=(20, 12, 4),
    upsample_initial_channel=64,
    resblock_kernel_sizes=(3, 7),
    resblock_dilation_sizes=((1, 3, 5), (1, 3, 5)),
)
MELS = {"short": 5, "long": 37}


def inputs() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(SEED + 1)
    return {f"mel.{name}": (torch.randn(1, CONFIG.num_mels, frames, generator=g) * 2 - 5).numpy() for name, frames in MELS.items()}


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_vocoder_v4(folder / "vocoder.pth", CONFIG, SEED)
    (folder / "vocoder.json").write_text(json.dumps(dataclasses.asdict(CONFIG)))
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "state_sha256.txt").write_text(state_sha256(random_vocoder_state(CONFIG, SEED)) + "\n")
