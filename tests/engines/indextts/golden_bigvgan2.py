"""Inputs of the `bigvgan2` golden (koe's side): tiny IndexTTS 2 vocoders (BigVGAN v2) with koe's seeded weights.

Each case is a released-style folder: `config.json` (the generator's keys and a few training keys,
which the loaders ignore), `bigvgan_generator.pt` (`{"generator": state}`) and a log-mel
`mel.npy` `(b, num_mels, T)` as the s2mel stage hands it over:
- `release`: the 22 kHz 80-band 256x release's structure (upsample rates 4, 4, 2, 2, 2, 2 with
  kernels 8, 8, 4, 4, 4, 4; AMP block 1 with kernels 3, 7, 11 and dilations 1, 3, 5; SnakeBeta in
  log scale; no tanh and no bias at the end), 128 channels in, weight-normed as released, one mel;
- `folded`: the same generator saved with its weight norm already folded (upstream's
  `from_pretrained` retries such a file after `remove_weight_norm()`), a batch of two;
- `defaults`: the `*_at_final` keys absent (tanh and a bias at the end, as upstream defaults them),
  Snake without log scale, two stages, a batch of two.
The anti-aliasing filters in the weights are the ones koe builds, and conv_post's gain is scaled
down so that the output does not saturate.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from koe_indextts.bigvgan2 import BigVGAN2, BigVGAN2Config
from koe_indextts.fixtures import state_sha256, vocoder_state
from koe_indextts.fixtures2 import VOCODER

RELEASE = {**VOCODER, "upsample_initial_channel": 128, "num_gpus": 0, "batch_size": 32, "segment_size": 65536}  # the tiny release's, wider
CONFIGS: dict[str, dict] = {
    "release": RELEASE,
    "folded": RELEASE,
    "defaults": {
        "resblock": "1",
        "upsample_rates": [4, 2],
        "upsample_kernel_sizes": [8, 4],
        "upsample_initial_channel": 16,
        "resblock_kernel_sizes": [3, 5],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 2, 4]],
        "activation": "snake",
        "snake_logscale": False,
        "num_mels": 20,
        "sampling_rate": 22050,
    },
}
# case -> (batch, mel frames)
SHAPES = {"release": (1, 12), "folded": (2, 7), "defaults": (2, 10)}
SEEDS = {"release": 91, "folded": 91, "defaults": 92}
POST_GAIN = {"release": 0.005, "folded": 0.005, "defaults": 0.1}  # the six-stage stack grows its input some 50-fold


def config(case: str) -> BigVGAN2Config:
    return BigVGAN2Config.from_dict(CONFIGS[case])


def case_state(case: str) -> dict[str, torch.Tensor]:
    """The case's `generator` state: random (koe's own filters, a smaller conv_post gain); `folded`
    holds the release case's weights with weight norm folded as `remove_weight_norm()` folds it."""
    module = BigVGAN2(config(case))
    state = vocoder_state(module, SEEDS[case], POST_GAIN[case])
    if case == "folded":
        module.load_state_dict(state, strict=True)
        state = {k: v.detach().clone() for k, v in module.fold_weight_norm().state_dict().items()}
    return state


def case_mel(case: str) -> torch.Tensor:
    """A log-mel `(b, num_mels, T)` float32 in the s2mel output's range."""
    batch, frames = SHAPES[case]
    g = torch.Generator().manual_seed(SEEDS[case] + 1000 + batch)
    return torch.randn(batch, CONFIGS[case]["num_mels"], frames, generator=g) * 2.0 - 5.0


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for case, data in CONFIGS.items():
        sub = folder / case
        sub.mkdir(exist_ok=True)
        state = case_state(case)
        torch.save({"generator": state}, sub / "bigvgan_generator.pt")
        (sub / "config.json").write_text(json.dumps(data, indent=4))
        np.save(sub / "mel.npy", case_mel(case).numpy())
        lines.append(f"{case} {state_sha256(state)}")
    (folder / "cases.json").write_text(json.dumps(list(CONFIGS)))
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")
