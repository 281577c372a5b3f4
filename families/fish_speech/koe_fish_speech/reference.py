"""A reference clip -> the codes upstream Fish Speech S2 makes of it (its voice prompt).

Upstream's CLI (`encode_audio` in models/text2semantic/inference.py) reads the file with
`torchaudio.load` (the soundfile backend: float32, channels first), averages the channels
(`wav.mean(dim=0)`), brings it to 44.1 kHz with `torchaudio.functional.resample` at its defaults
(a kernel built in the waveform's dtype), casts it to the codec's dtype and encodes it, keeping
`ceil(samples / 2048)` frames. The server's engine (inference_engine/reference_loader.py) reads and
averages the same way but resamples with `torchaudio.transforms.Resample` (a kernel built in float64),
which rounds differently: `resampler="transform"` gives its codes (its codec runs in float32).

koe reads files with its own reader (libsndfile's float32 samples, the ones torchaudio's soundfile
backend returns: equal for 16-bit WAV, tested against the golden) and resamples with
`koe.audio.sinc_resample`, the same arithmetic as both torchaudio paths.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
import torch

from koe.audio.decode import decode, int_pcm_to_float
from koe.audio.io import encoded_audio
from koe.audio.sinc_resample import resample_sinc

from .codec import FishCodec
from .codec_config import SAMPLE_RATE

__all__ = ["MAX_CHANNELS", "read_reference", "reference_codes", "reference_waveform"]

MAX_CHANNELS = 16


def read_reference(source: str | os.PathLike | bytes) -> tuple[torch.Tensor, int]:
    """A clip file (or its bytes) as float32 `(channels, samples)` and its rate, as `torchaudio.load`
    gives it (koe's reader, channels kept)."""
    frames, rate = decode(encoded_audio(source))
    frames = frames[:, None] if frames.ndim == 1 else frames
    return torch.from_numpy(np.ascontiguousarray(frames.T)), rate


def reference_waveform(samples: np.ndarray | torch.Tensor, sample_rate: int, resampler: Literal["functional", "transform"] = "functional") -> torch.Tensor:
    """Samples `(n,)` or channels first `(channels, n)` (integer PCM is scaled to [-1, 1)) -> float32
    mono `(n',)` at 44.1 kHz: the channels' mean, then upstream's resampling (see the module docstring)."""
    if resampler not in ("functional", "transform"):
        raise ValueError(f"resampler must be 'functional' (upstream's CLI) or 'transform' (its server), not {resampler!r}")
    if isinstance(samples, np.ndarray):
        samples = torch.from_numpy(int_pcm_to_float(samples) if np.issubdtype(samples.dtype, np.integer) else samples)
    if not samples.is_floating_point():
        raise TypeError(f"reference samples must be numbers of a float or integer type, got {samples.dtype}")
    wav = samples.to(torch.float32)
    wav = wav[None] if wav.ndim == 1 else wav
    if wav.ndim != 2 or wav.shape[0] > MAX_CHANNELS:
        raise ValueError(f"reference samples must be (n,) or (channels, n) with at most {MAX_CHANNELS} channels, got {tuple(samples.shape)}")
    if wav.shape[1] == 0:
        raise ValueError("the reference clip has no samples")
    if wav.shape[0] > 1:
        wav = wav.mean(dim=0, keepdim=True)
    kernel_dtype = wav.dtype if resampler == "functional" else None
    return resample_sinc(wav, int(sample_rate), SAMPLE_RATE, kernel_dtype=kernel_dtype)[0]


def reference_codes(
    codec: FishCodec,
    source: str | os.PathLike | bytes | np.ndarray | torch.Tensor,
    sample_rate: int | None = None,
    resampler: Literal["functional", "transform"] = "functional",
) -> torch.Tensor:
    """Codes `(10, frames)` int64 of a clip (a file, its bytes, or samples with `sample_rate`), as
    upstream's `encode_audio` makes them (`resampler="transform"`: its server's engine)."""
    if isinstance(source, (np.ndarray, torch.Tensor)):
        if sample_rate is None:
            raise ValueError("reference samples need their sample_rate")
        samples, rate = source, sample_rate
    else:
        if sample_rate is not None:
            raise ValueError("a file carries its own rate: sample_rate is for samples only")
        samples, rate = read_reference(source)
    return codec.encode(reference_waveform(samples, rate, resampler))
