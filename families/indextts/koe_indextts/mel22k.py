"""IndexTTS 2's reference mel: the 22.05 kHz, 80-band log-mel its flow-matching decoder (s2mel)
takes as the prompt and BigVGAN v2 vocodes.

Upstream builds it from `config.yaml`'s `s2mel.preprocess_params` and calls its s2mel audio
module's `mel_spectrogram(..., center=False)` on the 22.05 kHz clip `(1, samples)`: reflect
padding by `(n_fft - hop) // 2` on each side, a one-sided STFT with a periodic Hann window,
magnitude `sqrt(re² + im² + 1e-9)`, librosa's Slaney filterbank (float32) matmul, then
`log(clamp(x, min=1e-5))`. That is `koe.audio.mel.mel_spectrogram` op for op, so this module only
reads the parameters as upstream reads them, including one quirk: `fmax` is `None` (half the rate)
when the key is absent or the string `"None"`, and 8000 Hz for any other value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from koe.audio.mel import mel_spectrogram

__all__ = ["MelConfig", "mel22k"]


@dataclass(frozen=True)
class MelConfig:
    """`s2mel.preprocess_params` as upstream's `mel_fn` uses it."""

    sampling_rate: int = 22050
    n_fft: int = 1024
    win_length: int = 1024
    hop_length: int = 256
    n_mels: int = 80
    fmin: float = 0
    fmax: float | None = None

    def __post_init__(self) -> None:
        for name in ("sampling_rate", "n_fft", "win_length", "hop_length", "n_mels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"s2mel preprocess_params: {name} must be a positive int, got {value!r}")
        if self.win_length > self.n_fft or self.hop_length > self.n_fft:
            raise ValueError("s2mel preprocess_params: win_length and hop_length must not exceed n_fft")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MelConfig:
        """From the yaml's `s2mel.preprocess_params` (`sr` and `spect_params`)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("spect_params"), Mapping) or "sr" not in data:
            raise ValueError("s2mel preprocess_params needs `sr` and a `spect_params` mapping")
        spect = data["spect_params"]
        missing = [k for k in ("n_fft", "win_length", "hop_length", "n_mels") if k not in spect]
        if missing:
            raise ValueError(f"s2mel preprocess_params.spect_params: missing {', '.join(missing)}")
        return cls(
            sampling_rate=data["sr"],
            n_fft=spect["n_fft"],
            win_length=spect["win_length"],
            hop_length=spect["hop_length"],
            n_mels=spect["n_mels"],
            fmin=spect.get("fmin", 0),
            fmax=None if spect.get("fmax", "None") == "None" else 8000,  # upstream's reading, kept
        )

    def frames(self, samples: int) -> int:
        """Mel frames of a clip of `samples` samples."""
        return (samples + 2 * ((self.n_fft - self.hop_length) // 2) - self.n_fft) // self.hop_length + 1


def mel22k(audio: torch.Tensor, config: MelConfig | None = None) -> torch.Tensor:
    """Log-mel `(B, n_mels, frames)` of `audio` `(B, samples)` float32 at `config.sampling_rate`.

    A clip too short for the reflect padding (`samples <= (n_fft - hop) // 2`) or for one frame is
    refused with a `ValueError` (upstream fails inside `F.pad` / `torch.stft`).
    """
    config = config or MelConfig()
    if audio.dim() != 2:
        raise ValueError(f"mel22k expects (batch, samples), got shape {tuple(audio.shape)}")
    pad = (config.n_fft - config.hop_length) // 2
    if audio.shape[-1] <= pad or config.frames(audio.shape[-1]) < 1:
        raise ValueError(
            f"a clip of {audio.shape[-1]} samples is too short for the {config.n_fft}-point mel (needs more than {max(pad, config.n_fft - 2 * pad - 1)})"
        )
    return mel_spectrogram(
        audio.float(),
        n_fft=config.n_fft,
        num_mels=config.n_mels,
        sampling_rate=config.sampling_rate,
        hop_size=config.hop_length,
        win_size=config.win_length,
        fmin=config.fmin,
        fmax=config.fmax,
        center=False,
    )
