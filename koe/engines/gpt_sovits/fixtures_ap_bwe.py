"""A random-weight AP-BWE release folder (GPT-SoVITS v3's super-sampler, `ap_bwe.py`), as upstream's
`tools/AP_BWE_main/24kto48k/` holds it: `config.json` with AP-BWE's training entries (the release's
STFT and rates; `TINY`'s widths unless told) and `g_24kto48k.zip`, `torch.save({"generator": state})`.

Values are drawn in the state's name order from one seeded generator: weights ~ N(0, 1 / fan_in)
(the projections onto the spectrum scaled down, so the random model's magnitude follows its
input's), biases small but the magnitude projection's near 1 (about e times the input's magnitude,
which the random phases partly cancel: a loud input's output peaks over 1, as upstream's
postprocess then normalises), LayerNorm gains near 1, the ConvNeXt layer scales near 1 / layers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from koe.engines.gpt_sovits.ap_bwe import APBWE, CHECKPOINT, CONFIG, APBWEConfig
from koe.runtime.weights import build_on_meta

__all__ = ["TINY", "random_ap_bwe_state", "write_ap_bwe"]

TINY = APBWEConfig(channels=16, layers=2)
TRAINING = {  # the release's config.json entries the generator does not read
    "num_gpus": 0,
    "batch_size": 16,
    "learning_rate": 0.0002,
    "adam_b1": 0.8,
    "adam_b2": 0.99,
    "lr_decay": 0.999,
    "seed": 1234,
    "segment_size": 8000,
    "subsampling_rate": 2,
    "num_workers": 4,
    "dist_config": {"dist_backend": "nccl", "dist_url": "tcp://localhost:54321", "world_size": 1},
}
OUTPUT_SCALE = 0.1  # the spectrum projections' weights, so exp(magnitude) follows the input's
MAG_GAIN = 1.0  # the log-magnitude projection's bias


def _value(name: str, shape: tuple[int, ...], g: torch.Generator, layers: int) -> torch.Tensor:
    if name.endswith(".gamma"):
        return torch.full(shape, 1 / layers) * (1 + 0.1 * torch.randn(shape, generator=g))
    if "norm" in name and name.endswith(".weight"):
        return 1 + 0.1 * torch.randn(shape, generator=g)
    if name.endswith(".bias"):
        return (MAG_GAIN if name == "linear_post_mag.bias" else 0.0) + 0.02 * torch.randn(shape, generator=g)
    fan_in = math.prod(shape[1:]) if len(shape) > 1 else 1
    scale = OUTPUT_SCALE if name.startswith("linear_post_") else 1.0
    return torch.randn(shape, generator=g) * scale / math.sqrt(fan_in)


def random_ap_bwe_state(config: APBWEConfig = TINY, seed: int = 0) -> dict[str, torch.Tensor]:
    """The generator's state in the release's names, float32."""
    model = build_on_meta(lambda: APBWE(config))
    g = torch.Generator().manual_seed(seed)
    return {name: _value(name, tuple(t.shape), g, config.layers) for name, t in model.state_dict().items()}


def write_ap_bwe(folder: str | Path, config: APBWEConfig = TINY, seed: int = 0) -> Path:
    """A random AP-BWE release folder at `folder`; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG).write_text(json.dumps({**TRAINING, **config.to_json()}, indent=4), encoding="utf-8")
    torch.save({"generator": random_ap_bwe_state(config, seed)}, folder / CHECKPOINT)
    return folder
