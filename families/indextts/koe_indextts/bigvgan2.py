"""IndexTTS 2's vocoder: NVIDIA's BigVGAN v2 (`bigvgan_v2_22khz_80band_256x`), a log-mel `(B, 80, T)`
from the s2mel stage to a 22.05 kHz waveform `(B, 1, T * 256)`; no speaker conditioning.

    mel -> conv_pre (k7) -> per stage i: ups[i] (transposed conv) -> mean of the AMP blocks
        -> anti-aliased Snake(Beta) -> conv_post (k7, bias per `use_bias_at_final`)
        -> tanh (`use_tanh_at_final`) or clamp to [-1, 1]

The released model is a folder with `config.json` (the generator's keys are read, training keys
ignored) and `bigvgan_generator.pt` (`{"generator": state_dict}`, parameter names as here). Its
blocks are IndexTTS 1.5's (`koe_indextts.bigvgan`: weight-normed convs folded as upstream's
`remove_weight_norm()` folds them, anti-aliased Snake/SnakeBeta activations, AMP block 1), so CPU
float32 gives upstream's bits. A checkpoint whose weight norm is already folded (`*.weight` in
place of `*.weight_g` / `*.weight_v`) loads too, as upstream's `from_pretrained` retries it.
Only AMP block "1" is taken: upstream's block "2" returns nothing from its forward.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .bigvgan import AMPBlock1, AntiAliasActivation, WNConv1d, WNConvTranspose1d, _WeightNormed, to_pcm_scale

__all__ = ["BigVGAN2", "BigVGAN2Config", "load_bigvgan2", "to_pcm_scale"]

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "bigvgan_generator.pt"


@dataclass(frozen=True)
class BigVGAN2Config:
    """The generator's keys of BigVGAN v2's `config.json`; the two `*_at_final` flags default to
    true when absent, as upstream reads them."""

    num_mels: int
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    upsample_initial_channel: int
    resblock: str
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    activation: str
    snake_logscale: bool
    use_tanh_at_final: bool = True
    use_bias_at_final: bool = True
    sampling_rate: int = 22050

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in ("upsample_rates", "upsample_kernel_sizes", "resblock_kernel_sizes"):
            set_(self, name, tuple(int(v) for v in getattr(self, name)))
        set_(self, "resblock_dilation_sizes", tuple(tuple(int(d) for d in ds) for ds in self.resblock_dilation_sizes))
        set_(self, "resblock", str(self.resblock))
        for name in ("num_mels", "upsample_initial_channel", "sampling_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"bigvgan config: {name} must be a positive int, got {value!r}")
        for name in ("snake_logscale", "use_tanh_at_final", "use_bias_at_final"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"bigvgan config: {name} must be true or false, got {getattr(self, name)!r}")
        if self.resblock != "1":
            raise ValueError(f"bigvgan config: resblock {self.resblock!r} is not supported (IndexTTS 2's vocoder uses '1'; upstream's '2' returns nothing)")
        if self.activation not in ("snake", "snakebeta"):
            raise ValueError(f"bigvgan config: activation must be 'snake' or 'snakebeta', got {self.activation!r}")
        if not self.upsample_rates or len(self.upsample_rates) != len(self.upsample_kernel_sizes):
            raise ValueError("bigvgan config: upsample_rates and upsample_kernel_sizes need one entry per stage")
        if self.upsample_initial_channel % (2 ** len(self.upsample_rates)):
            raise ValueError("bigvgan config: upsample_initial_channel must halve at every stage")
        if not self.resblock_kernel_sizes or len(self.resblock_kernel_sizes) != len(self.resblock_dilation_sizes):
            raise ValueError("bigvgan config: resblock_kernel_sizes and resblock_dilation_sizes need one entry per block")
        if any(len(ds) != 3 for ds in self.resblock_dilation_sizes):
            raise ValueError("bigvgan config: resblock '1' takes three dilations per block")

    @property
    def hop_length(self) -> int:
        """Output samples per mel frame."""
        return math.prod(self.upsample_rates)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BigVGAN2Config:
        """From `config.json`'s mapping; unknown (training) keys are ignored, a missing one is an error."""
        if not isinstance(data, Mapping):
            raise ValueError(f"bigvgan config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        optional = {"use_tanh_at_final", "use_bias_at_final", "sampling_rate"}
        missing = sorted(name for name in known - optional if name not in data)
        if missing:
            raise ValueError(f"bigvgan config: missing {', '.join(missing)}")
        return cls(**{k: data[k] for k in known if k in data})

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> BigVGAN2Config:
        """From a `config.json` file, or the folder holding one."""
        path = Path(path)
        if path.is_dir():
            path = path / CONFIG_FILE
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


class BigVGAN2(nn.Module):
    """Log-mel `(B, num_mels, T)` -> waveform `(B, 1, T * hop_length)` in [-1, 1] (float32)."""

    def __init__(self, config: BigVGAN2Config) -> None:
        super().__init__()
        self.config = config
        c0, kind, logscale = config.upsample_initial_channel, config.activation, config.snake_logscale
        self.num_kernels = len(config.resblock_kernel_sizes)
        self.conv_pre = WNConv1d(config.num_mels, c0, 7, 1, 3)
        self.ups = nn.ModuleList(
            nn.ModuleList([WNConvTranspose1d(c0 // 2**i, c0 // 2 ** (i + 1), k, u, (k - u) // 2)])
            for i, (u, k) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes))
        )
        self.resblocks = nn.ModuleList(
            AMPBlock1(c0 // 2 ** (i + 1), k, d, kind, logscale)
            for i in range(len(self.ups))
            for k, d in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes)
        )
        channels = c0 // 2 ** len(self.ups)
        self.activation_post = AntiAliasActivation(channels, kind, logscale)
        self.conv_post = WNConv1d(channels, 1, 7, 1, 3)
        if not config.use_bias_at_final:
            self.conv_post.register_parameter("bias", None)

    def fold_weight_norm(self) -> BigVGAN2:
        """Fold every weight-normed conv into a plain weight (upstream's `remove_weight_norm()`)."""
        for module in self.modules():
            if isinstance(module, _WeightNormed):
                module.fold()
        return self

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """Upstream's call `bigvgan(mel.float())`: `(B, num_mels, T)` -> `(B, 1, T * hop_length)`."""
        if mel.dim() != 3 or mel.shape[1] != self.config.num_mels:
            raise ValueError(f"the vocoder takes a mel (batch, {self.config.num_mels}, frames), got shape {tuple(mel.shape)}")
        x = self.conv_pre(mel)
        for i, up in enumerate(self.ups):
            x = up[0](x)
            blocks = self.resblocks[i * self.num_kernels : (i + 1) * self.num_kernels]
            total = blocks[0](x)
            for block in blocks[1:]:
                total += block(x)
            x = total / self.num_kernels
        x = self.conv_post(self.activation_post(x))
        if self.config.use_tanh_at_final:
            return torch.tanh(x)
        return torch.clamp(x, min=-1.0, max=1.0)


def load_bigvgan2(source: str | os.PathLike | Mapping[str, torch.Tensor], config: BigVGAN2Config | None = None) -> BigVGAN2:
    """The vocoder, weight norm folded, in eval mode, loaded strictly (a missing or unexpected tensor
    is an error) from: the released folder (`config.json` + `bigvgan_generator.pt`; `config`
    overrides the file's), a weights file, or a state dict (`{"generator": state}` or the state; these
    two need `config`). The state may be weight-normed (as released) or already folded."""
    if isinstance(source, Mapping):
        state = source
    else:
        path = Path(source)
        if path.is_dir():
            config = config or BigVGAN2Config.from_file(path)
            path = path / WEIGHTS_FILE
        state = torch.load(path, map_location="cpu", weights_only=True)
    if config is None:
        raise ValueError("load_bigvgan2: a weights file or state dict needs its config")
    if "generator" in state and isinstance(state["generator"], Mapping):
        state = state["generator"]
    with torch.device("meta"):
        model = BigVGAN2(config)
    if "conv_pre.weight_g" not in state and "conv_pre.weight" in state:
        model.fold_weight_norm()  # a checkpoint saved after remove_weight_norm()
    model.load_state_dict(state, strict=True, assign=True)
    return model.fold_weight_norm().eval()
