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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .bigvgan import AMPBlock1, Generator, check_stages, config_from_mapping, generator_state, load_generator, normalise_config, to_pcm_scale

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
        normalise_config(self, ("num_mels", "upsample_initial_channel", "sampling_rate"), ("snake_logscale", "use_tanh_at_final", "use_bias_at_final"))
        if self.resblock != "1":
            raise ValueError(f"bigvgan config: resblock {self.resblock!r} is not supported (IndexTTS 2's vocoder uses '1'; upstream's '2' returns nothing)")
        check_stages(self)
        if any(len(ds) != 3 for ds in self.resblock_dilation_sizes):
            raise ValueError("bigvgan config: resblock '1' takes three dilations per block")

    @property
    def hop_length(self) -> int:
        """Output samples per mel frame."""
        return math.prod(self.upsample_rates)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BigVGAN2Config:
        """From `config.json`'s mapping; unknown (training) keys are ignored, a missing one is an error."""
        return config_from_mapping(cls, data)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> BigVGAN2Config:
        """From a `config.json` file, or the folder holding one."""
        path = Path(path)
        if path.is_dir():
            path = path / CONFIG_FILE
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


class BigVGAN2(Generator):
    """Log-mel `(B, num_mels, T)` -> waveform `(B, 1, T * hop_length)` in [-1, 1] (float32)."""

    def __init__(self, config: BigVGAN2Config) -> None:
        super().__init__()
        self.config = config
        self._build_trunk(config, config.num_mels, AMPBlock1)
        if not config.use_bias_at_final:
            self.conv_post.register_parameter("bias", None)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """Upstream's call `bigvgan(mel.float())`: `(B, num_mels, T)` -> `(B, 1, T * hop_length)`."""
        if mel.dim() != 3 or mel.shape[1] != self.config.num_mels:
            raise ValueError(f"the vocoder takes a mel (batch, {self.config.num_mels}, frames), got shape {tuple(mel.shape)}")
        x = self.conv_pre(mel)
        for i, up in enumerate(self.ups):
            x = self.amp_blocks(i, up[0](x))
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
    state = generator_state(state)
    with torch.device("meta"):
        model = BigVGAN2(config)
    if "conv_pre.weight_g" not in state and "conv_pre.weight" in state:
        model.fold_weight_norm()  # a checkpoint saved after remove_weight_norm()
    return load_generator(model, state)
