"""Upstream's v4 vocoder, `module/models.py`'s `Generator` built as `TTS.init_vocoder("v4")` builds
it (gin_channels=0, is_bias=True, `remove_weight_norm()` before a strict `load_state_dict`, eval
mode), at the sizes of koe's `vocoder.json` in a golden's folder, from its `vocoder.pth`."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from module.models import Generator


def v4_vocoder(folder: Path) -> torch.nn.Module:
    c = json.loads((folder / "vocoder.json").read_text())
    vocoder = Generator(
        initial_channel=c["num_mels"],
        resblock=c["resblock"],
        resblock_kernel_sizes=c["resblock_kernel_sizes"],
        resblock_dilation_sizes=c["resblock_dilation_sizes"],
        upsample_rates=c["upsample_rates"],
        upsample_initial_channel=c["upsample_initial_channel"],
        upsample_kernel_sizes=c["upsample_kernel_sizes"],
        gin_channels=0,
        is_bias=True,
    )
    vocoder.remove_weight_norm()
    vocoder.load_state_dict(torch.load(folder / "vocoder.pth", map_location="cpu", weights_only=False))
    return vocoder.eval()
