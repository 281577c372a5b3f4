"""Inputs of the `bigvgan` golden (koe's side): tiny IndexTTS vocoders with koe's seeded weights.

Two cases, each a `config.yaml` with a `bigvgan:` section, a `bigvgan_generator.pth`
(`{"generator": state}`, weight-normed as released), a GPT latent `(b, T, gpt_dim)` and a
reference mel `(b, num_mels, T_ref)` (as upstream's `cond_mel`, before its transpose):
- `release`: 1.5's structure (resblock "1" with kernels 3, 7, 11, SnakeBeta in log scale, the
  speaker embedding added after conv_pre and after every upsampling), small channels, 100 mels;
- `variant`: the other branches (resblock "2", Snake without log scale, the latent upsampled x4
  first, the speaker embedding only after conv_pre), 80 mels, a batch of two.
The speaker encoder keeps upstream's fixed ECAPA widths (512 ... 1536): about 5.5 M of the weights.
The anti-aliasing filters in the weights are the ones koe builds (upstream uses the loaded ones;
the oracle records the ones it builds itself), and conv_post's gain is scaled down so that the
output's tanh does not saturate.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import yaml
from koe_indextts.bigvgan import BigVGAN, BigVGANConfig
from koe_indextts.fixtures import state_sha256_1d, vocoder_state

SECTIONS: dict[str, dict] = {
    "release": {
        "resblock": "1",
        "upsample_rates": [4, 4],
        "upsample_kernel_sizes": [8, 8],
        "upsample_initial_channel": 32,
        "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "feat_upsample": False,
        "speaker_embedding_dim": 16,
        "cond_d_vector_in_each_upsampling_layer": True,
        "gpt_dim": 24,
        "activation": "snakebeta",
        "snake_logscale": True,
        "num_mels": 100,
        "sampling_rate": 24000,
        "segment_size": 16384,  # a training key: the loaders ignore it
    },
    "variant": {
        "resblock": "2",
        "upsample_rates": [2, 2],
        "upsample_kernel_sizes": [4, 4],
        "upsample_initial_channel": 16,
        "resblock_kernel_sizes": [3, 5],
        "resblock_dilation_sizes": [[1, 3], [2, 4]],
        "feat_upsample": True,
        "speaker_embedding_dim": 8,
        "cond_d_vector_in_each_upsampling_layer": False,
        "gpt_dim": 12,
        "activation": "snake",
        "snake_logscale": False,
        "num_mels": 80,
        "sampling_rate": 24000,
    },
}
# case -> (batch, latent frames, reference mel frames)
SHAPES = {"release": (1, 8, 40), "variant": (2, 6, 30)}
SEEDS = {"release": 71, "variant": 72}
POST_GAIN = 0.1


def config(case: str) -> BigVGANConfig:
    return BigVGANConfig.from_dict(SECTIONS[case])


def case_state(case: str) -> dict[str, torch.Tensor]:
    """The case's `generator` state: random, but koe's own filters and a smaller conv_post gain."""
    return vocoder_state(BigVGAN(config(case)), SEEDS[case], POST_GAIN)


def case_inputs(case: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(latent (b, T, gpt_dim), reference log-mel (b, num_mels, T_ref)), float32."""
    batch, frames, ref_frames = SHAPES[case]
    g = torch.Generator().manual_seed(SEEDS[case] + 1000)
    section = SECTIONS[case]
    latent = torch.randn(batch, frames, section["gpt_dim"], generator=g)
    mel = torch.randn(batch, section["num_mels"], ref_frames, generator=g) * 2.0 - 4.0
    return latent, mel


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for case, section in SECTIONS.items():
        sub = folder / case
        sub.mkdir(exist_ok=True)
        state = case_state(case)
        torch.save({"generator": state}, sub / "bigvgan_generator.pth")
        (sub / "config.yaml").write_text(yaml.safe_dump({"bigvgan": section}, sort_keys=False))
        latent, mel = case_inputs(case)
        np.save(sub / "latent.npy", latent.numpy())
        np.save(sub / "cond_mel.npy", mel.numpy())
        lines.append(f"{case} {state_sha256_1d(state)}")
    (folder / "cases.json").write_text(json.dumps(list(SECTIONS)))
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")
