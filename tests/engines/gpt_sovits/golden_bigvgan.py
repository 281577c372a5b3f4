"""Inputs of the `bigvgan` golden (koe's side): small BigVGAN release folders (`config.json`,
`bigvgan_generator.pt` with weight-normed convs, as NVIDIA's release stores them) and mels.

- `release/`: the 24 kHz 100-band release's choices (AMPBlock1, SnakeBeta on log scale, no tanh
  but a clamp at the end, no bias in conv_post) at small widths, two upsampling stages.
- `variant/`: the other branches (AMPBlock2, Snake on a linear scale, tanh, a conv_post bias).
- `inputs.npz`: `mel.<name>` (1, mels, frames) float32 in the log-mel range the CFM's
  de-normalised output has.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.bigvgan import BigVGANConfig
from koe.engines.gpt_sovits.fixtures_v3 import random_bigvgan_state, write_bigvgan
from koe.runtime.weights import state_sha256

SEED = 41
SMALL = {"num_mels": 20, "upsample_rates": (4, 2), "upsample_kernel_sizes": (8, 4), "upsample_initial_channel": 32}
CONFIGS = {
    "release": BigVGANConfig(**SMALL, resblock_kernel_sizes=(3, 7), resblock_dilation_sizes=((1, 3, 5), (1, 3, 5))),
    "variant": BigVGANConfig(
        **SMALL,
        resblock="2",
        resblock_kernel_sizes=(3, 5),
        resblock_dilation_sizes=((1, 3), (1, 2)),
        activation="snake",
        snake_logscale=False,
        use_tanh_at_final=True,
        use_bias_at_final=True,
    ),
}
MELS = {"short": 7, "long": 61}


def inputs() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(SEED + 1)
    return {f"mel.{name}": (torch.randn(1, 20, frames, generator=g) * 2 - 5).numpy() for name, frames in MELS.items()}


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (name, config) in enumerate(CONFIGS.items()):
        write_bigvgan(folder / name, config, SEED + 10 * i)
        lines.append(f"{name} {state_sha256(random_bigvgan_state(config, SEED + 10 * i))}")
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")
