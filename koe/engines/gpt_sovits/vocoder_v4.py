"""GPT-SoVITS v4's vocoder (`gsv-v4-pretrained/vocoder.pth`): upstream's HiFi-GAN `Generator` of
`module/models.py`, built by `TTS.init_vocoder("v4")` as a mel (B, 100, frames) -> 48 kHz waveform
(B, 1, frames * 480) model: no reference conditioning (`gin_channels=0`), conv_post with a bias
(`is_bias=True`), upsampling (10, 6, 2, 2, 2) with kernels (20, 12, 4, 4, 4) from 512 channels,
ResBlock1 with kernels (3, 7, 11) and dilations (1, 3, 5).

The same generator as SoVITS v1/v2's `dec` (sovits_generator's `HifiGan`, without `cond`); upstream
removes the weight norm before loading, so `vocoder.pth` is a plain state dict of folded weights
(`conv_pre`, `ups.i`, `resblocks.k.convs{1,2}.j`, `conv_post`), loaded strictly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from koe.engines.gpt_sovits.sovits_generator import HifiGan
from koe.runtime.weights import WeightsError, check_state_fits

__all__ = ["VocoderConfig", "VocoderV4", "load_vocoder_v4"]


@dataclass(frozen=True)
class VocoderConfig:
    """The generator's sizes (defaults: v4's, as upstream's `init_vocoder` hard-codes them)."""

    num_mels: int = 100
    upsample_rates: tuple[int, ...] = (10, 6, 2, 2, 2)
    upsample_kernel_sizes: tuple[int, ...] = (20, 12, 4, 4, 4)
    upsample_initial_channel: int = 512
    resblock: str = "1"
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    sampling_rate: int = 48000

    def __post_init__(self) -> None:
        if self.resblock not in ("1", "2"):
            raise ValueError(f"resblock must be '1' or '2', not {self.resblock!r}")
        if len(self.upsample_rates) != len(self.upsample_kernel_sizes) or len(self.resblock_kernel_sizes) != len(self.resblock_dilation_sizes):
            raise ValueError("the vocoder's upsample rates/kernels or resblock kernels/dilations differ in length")


class VocoderV4(HifiGan):
    """mel (B, num_mels, T) -> waveform (B, 1, T * prod(upsample_rates)) in [-1, 1]."""

    def __init__(self, config: VocoderConfig | None = None) -> None:
        c = config or VocoderConfig()
        super().__init__(
            c.num_mels,
            c.resblock,
            c.resblock_kernel_sizes,
            c.resblock_dilation_sizes,
            c.upsample_rates,
            c.upsample_initial_channel,
            c.upsample_kernel_sizes,
            post_bias=True,
        )
        self.config = c

    @property
    def sample_rate(self) -> int:
        return self.config.sampling_rate


def load_vocoder_v4(path: str | Path, config: VocoderConfig | None = None) -> VocoderV4:
    """`vocoder.pth` (a plain state dict, read with weights_only) -> the vocoder in float32, eval mode.
    Strict: a missing, unexpected or misshapen tensor is a `WeightsError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no v4 vocoder at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch's unpickler and zip reader raise several kinds
        raise WeightsError(f"{path}: not a readable vocoder checkpoint ({e})") from e
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{path}: not a vocoder state dict (expected a mapping of tensors)")
    model = VocoderV4(config)
    check_state_fits(state, model, f"{path}: does not match v4's vocoder")
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    return model.eval()
