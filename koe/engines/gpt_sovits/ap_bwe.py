"""AP-BWE (Lu et al., `yxlu-0102/AP-BWE`, MIT): the speech bandwidth extension GPT-SoVITS v3's
`super_sampling` runs (upstream's `tools/audio_sr.py` over its vendored `tools/AP_BWE_main`): a
24 kHz waveform -> 48 kHz.

The release is a folder, upstream's `tools/AP_BWE_main/24kto48k/` (downloaded by hand; upstream's
readme there links it): `config.json` (AP-BWE's training config; koe reads its `ConvNeXt_channels`,
`ConvNeXt_layers`, `n_fft`, `hop_size`, `win_size`, `hr_sampling_rate`) and `g_24kto48k.zip` (a
torch checkpoint, `{"generator": state}`, read with weights_only).

`super_sample`, as upstream's `AP_BWE.__call__`: the waveform resampled to the high rate
(`torchaudio.functional.resample`'s windowed sinc, `koe.audio.sinc_resample`), its STFT (a Hann
window of `win_size`, centred, reflect padding) as log magnitude (log(|X| + 1e-4)) and phase; the
generator (`forward`): each spectrum through a 1-D conv (kernel 7) and a LayerNorm to
`ConvNeXt_channels`, then per layer the two streams exchanged (magnitude += phase, then phase +=
magnitude) and each through its ConvNeXt block (`koe.nn.conv.ConvNeXtBlock`, 3x wide, layer scale
1 / layers); a last LayerNorm each; the magnitude is the input's plus a linear projection, the
phase the angle (atan2) of two projections; back through the inverse STFT.

`postprocess` is what `TTS.audio_postprocess(super_sampling=True)` does to the float audio it has
joined: `super_sample`, then a peak over 1 divided away (numpy, in place, as upstream's), before its
int16 step (`synthesis.to_int16`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from koe.audio.sinc_resample import resample_sinc
from koe.nn.conv import ConvNeXtBlock
from koe.runtime.weights import build_on_meta, check_state_fits, generator_state

__all__ = ["APBWE", "CHECKPOINT", "CONFIG", "APBWEConfig", "load_ap_bwe", "postprocess"]

CHECKPOINT = "g_24kto48k.zip"
CONFIG = "config.json"
KERNEL = 7  # the input convs' width
EPS = 1e-6  # every LayerNorm's
LOG_FLOOR = 1e-4  # added to |X| before the log


@dataclass(frozen=True)
class APBWEConfig:
    """The entries of AP-BWE's `config.json` the generator needs (defaults: the 24k -> 48k release's)."""

    channels: int = 512
    layers: int = 8
    n_fft: int = 1024
    hop_size: int = 80
    win_size: int = 320
    hr_sampling_rate: int = 48000
    lr_sampling_rate: int = 24000

    def __post_init__(self) -> None:
        if min(self.channels, self.layers, self.hop_size, self.win_size) < 1 or self.win_size > self.n_fft:
            raise ValueError(f"not an AP-BWE config koe can build: {self}")

    @property
    def bins(self) -> int:
        return self.n_fft // 2 + 1

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> APBWEConfig:
        try:
            return cls(
                channels=int(data["ConvNeXt_channels"]),
                layers=int(data["ConvNeXt_layers"]),
                n_fft=int(data["n_fft"]),
                hop_size=int(data["hop_size"]),
                win_size=int(data["win_size"]),
                hr_sampling_rate=int(data["hr_sampling_rate"]),
                lr_sampling_rate=int(data.get("lr_sampling_rate", 24000)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not an AP-BWE config koe can build: {e}") from e

    def to_json(self) -> dict[str, Any]:
        """These entries under the release's names."""
        return {
            "ConvNeXt_channels": self.channels,
            "ConvNeXt_layers": self.layers,
            "n_fft": self.n_fft,
            "hop_size": self.hop_size,
            "win_size": self.win_size,
            "hr_sampling_rate": self.hr_sampling_rate,
            "lr_sampling_rate": self.lr_sampling_rate,
        }


class APBWE(nn.Module):
    """AP-BWE's generator under the release's names (upstream's `APNet_BWE_Model` at inference)."""

    def __init__(self, config: APBWEConfig) -> None:
        super().__init__()
        self.config = c = config
        self.conv_pre_mag = nn.Conv1d(c.bins, c.channels, KERNEL, padding=KERNEL // 2)
        self.norm_pre_mag = nn.LayerNorm(c.channels, eps=EPS)
        self.conv_pre_pha = nn.Conv1d(c.bins, c.channels, KERNEL, padding=KERNEL // 2)
        self.norm_pre_pha = nn.LayerNorm(c.channels, eps=EPS)
        blocks = lambda: nn.ModuleList(ConvNeXtBlock(c.channels, 3 * c.channels, causal=False, layer_scale=1 / c.layers) for _ in range(c.layers))  # noqa: E731
        self.convnext_mag, self.convnext_pha = blocks(), blocks()
        self.norm_post_mag = nn.LayerNorm(c.channels, eps=EPS)
        self.norm_post_pha = nn.LayerNorm(c.channels, eps=EPS)
        self.linear_post_mag = nn.Linear(c.channels, c.bins)
        self.linear_post_pha_r = nn.Linear(c.channels, c.bins)
        self.linear_post_pha_i = nn.Linear(c.channels, c.bins)

    def forward(self, mag: torch.Tensor, pha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The narrow band's log magnitude and phase (B, bins, frames) -> the wide band's."""
        x_mag = self.norm_pre_mag(self.conv_pre_mag(mag).transpose(1, 2)).transpose(1, 2)
        x_pha = self.norm_pre_pha(self.conv_pre_pha(pha).transpose(1, 2)).transpose(1, 2)
        for block_mag, block_pha in zip(self.convnext_mag, self.convnext_pha, strict=True):
            x_mag = x_mag + x_pha
            x_pha = x_pha + x_mag
            x_mag, x_pha = block_mag(x_mag), block_pha(x_pha)
        x_mag = self.norm_post_mag(x_mag.transpose(1, 2))
        mag_wb = mag + self.linear_post_mag(x_mag).transpose(1, 2)
        x_pha = self.norm_post_pha(x_pha.transpose(1, 2))
        pha_wb = torch.atan2(self.linear_post_pha_i(x_pha), self.linear_post_pha_r(x_pha)).transpose(1, 2)
        return mag_wb, pha_wb

    @torch.no_grad()
    def super_sample(self, audio: torch.Tensor, rate: int) -> tuple[torch.Tensor, int]:
        """A waveform (..., samples) at `rate` -> (the wide-band waveform at `hr_sampling_rate`, that
        rate), as upstream's `AP_BWE.__call__` (see the module's doc; it squeezes the result)."""
        c = self.config
        audio = resample_sinc(audio, rate, c.hr_sampling_rate, kernel_dtype=audio.dtype)
        window = torch.hann_window(c.win_size, device=audio.device)
        spec = torch.stft(
            audio, c.n_fft, hop_length=c.hop_size, win_length=c.win_size, window=window, center=True, pad_mode="reflect", normalized=False, return_complex=True
        )
        mag, pha = self(torch.log(torch.abs(spec) + LOG_FLOOR), torch.angle(spec))
        amp = torch.exp(mag)
        wide = torch.complex(amp * torch.cos(pha), amp * torch.sin(pha))
        return torch.istft(wide, c.n_fft, hop_length=c.hop_size, win_length=c.win_size, window=window, center=True), c.hr_sampling_rate


def load_ap_bwe(folder: str | Path) -> APBWE:
    """An AP-BWE release folder (`config.json`, `g_24kto48k.zip`) -> the generator in float32, eval
    mode. The checkpoint is read with weights_only; its `generator` state loads strictly."""
    folder = Path(folder)
    for name in (CONFIG, CHECKPOINT):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"no AP-BWE {name} in {folder}")
    try:
        config = APBWEConfig.from_json(json.loads((folder / CONFIG).read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
        raise ValueError(f"{folder / CONFIG}: not JSON ({e})") from e
    state = generator_state(folder / CHECKPOINT, "AP-BWE")
    model = build_on_meta(lambda: APBWE(config))
    check_state_fits(state, model, f"{folder / CHECKPOINT}: does not match its {CONFIG}")
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


def postprocess(model: APBWE, audio: np.ndarray, rate: int) -> tuple[np.ndarray, int]:
    """`audio_postprocess`'s super-sampling: float32 samples (samples,) at `rate` -> (float32 samples at
    the model's high rate, normalised if they peak over 1; that rate)."""
    wide, wide_rate = model.super_sample(torch.from_numpy(np.ascontiguousarray(audio)).unsqueeze(0), rate)
    out = wide.squeeze().numpy()
    peak = np.abs(out).max()
    if peak > 1:
        out /= peak
    return out, wide_rate
