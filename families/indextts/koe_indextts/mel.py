"""IndexTTS 1.5's reference features: a voice clip as the 100-band log-mel its GPT and vocoder take.

Upstream reads the clip with `torchaudio.load` (float32 `(channels, frames)`), averages the
channels (`torch.mean(dim=0, keepdim=True)`), brings it to 24 kHz with
`torchaudio.transforms.Resample(sr, 24000)`, keeps the first 50 s, and takes a log-mel at its
feature extractor's defaults: torchaudio's `MelSpectrogram(24000, n_fft=1024, hop_length=256,
n_mels=100, power=1, center=True)` then `log(clip(x, min=1e-7))`.

koe does the same ops without torchaudio, bit for bit on the same torch build:
- decoding is koe's (`koe.audio.decode`): libsndfile's float32 samples, what torchaudio's
  soundfile backend reads (and what FFmpeg gives for PCM and float WAV); koe refuses what
  upstream would choke on (an empty, truncated or non-finite clip) and clips over 600 s;
- the resampler is `koe.audio.sinc_resample.resample_sinc` (the transform's kernel and conv);
- the mel is `koe.audio.mel.vocos_log_mel` with the 1e-7 floor (the same STFT, filterbank and
  matmul as torchaudio's transform).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from koe.audio.decode import MAX_CLIP_SECONDS, check_channels, check_sample_rate, decode
from koe.audio.errors import AudioError
from koe.audio.io import encoded_audio
from koe.audio.mel import vocos_log_mel
from koe.audio.sinc_resample import resample_sinc

__all__ = [
    "FLOOR",
    "HOP_LENGTH",
    "MAX_REFERENCE_SECONDS",
    "N_FFT",
    "N_MELS",
    "SAMPLE_RATE",
    "decode_reference",
    "log_mel",
    "reference_audio",
    "reference_mel",
]

SAMPLE_RATE = 24_000  # the rate every feature of IndexTTS 1.5 is taken at
N_FFT = 1024
HOP_LENGTH = 256
N_MELS = 100
FLOOR = 1e-7  # log floor of the feature extractor
MAX_REFERENCE_SECONDS = 50  # upstream keeps the first 50 s of the resampled clip

AudioInput = str | os.PathLike | bytes | bytearray | memoryview | tuple


def decode_reference(source: str | os.PathLike | bytes | bytearray | memoryview, *, max_seconds: float = MAX_CLIP_SECONDS) -> tuple[torch.Tensor, int]:
    """A clip file (path or bytes) as `torchaudio.load` gives it: float32 `(channels, frames)` and its rate.

    `AudioError` for a missing, unreadable, truncated or empty file; `AudioTooLong` past `max_seconds`.
    """
    frames, rate = decode(encoded_audio(source), max_seconds=max_seconds)  # (n,) or (n, channels) float32
    if frames.ndim == 1:
        frames = frames[:, None]
    return torch.from_numpy(np.ascontiguousarray(frames)).t(), int(rate)  # (channels, n): a transposed view, as torchaudio returns


def _array_clip(samples: np.ndarray, sample_rate) -> tuple[torch.Tensor, int]:
    """A float `(n,)` or `(n, channels)` array as the decoded `(channels, n)` view."""
    samples = np.asarray(samples)
    if not np.issubdtype(samples.dtype, np.floating):
        raise AudioError(f"a waveform array must be float32 or float64 in [-1, 1], got {samples.dtype}")
    if samples.ndim == 1:
        samples = samples[:, None]
    if samples.ndim != 2 or samples.shape[1] < 1:
        raise AudioError(f"waveform must be (n,) or (n, channels), got shape {samples.shape}")
    check_channels(samples.shape[1])
    try:
        rate = int(sample_rate)
    except (TypeError, ValueError) as exc:
        raise AudioError(f"invalid sample rate: {sample_rate!r}") from exc
    return torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32)).t(), check_sample_rate(rate)


def reference_audio(waveform: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """A decoded clip `(channels, frames)` as upstream conditions on it: float32 `(1, n)` mono at
    24 kHz, at most `MAX_REFERENCE_SECONDS` long."""
    if waveform.dim() != 2 or waveform.shape[1] == 0:
        raise AudioError(f"a clip must be (channels, frames) with samples, got shape {tuple(waveform.shape)}")
    if not torch.isfinite(waveform).all():
        raise AudioError("audio contains NaN or infinite samples")
    audio = torch.mean(waveform, dim=0, keepdim=True)  # (1, frames)
    audio = resample_sinc(audio, sample_rate, SAMPLE_RATE)
    return audio[:, : int(MAX_REFERENCE_SECONDS * SAMPLE_RATE)]


def log_mel(audio: torch.Tensor) -> torch.Tensor:
    """Log-mel of 24 kHz audio `(B, n)` -> `(B, 100, n // 256 + 1)` (upstream's `MelSpectrogramFeatures()`)."""
    if audio.shape[-1] <= N_FFT // 2:
        raise AudioError(f"the clip is too short: {audio.shape[-1]} samples at 24 kHz, more than {N_FFT // 2} are needed")
    return vocos_log_mel(audio, SAMPLE_RATE, N_FFT, HOP_LENGTH, N_FFT, N_MELS, floor=FLOOR)


def reference_mel(source: AudioInput, *, max_seconds: float = MAX_CLIP_SECONDS) -> torch.Tensor:
    """The reference log-mel `(1, 100, frames)` of a clip: a file path, its bytes, or a
    `(samples, sample_rate)` tuple of a float `(n,)` / `(n, channels)` array."""
    if isinstance(source, tuple):
        if len(source) != 2:
            raise AudioError("a tuple audio source must be (samples, sample_rate)")
        waveform, rate = _array_clip(*source)
    else:
        waveform, rate = decode_reference(source, max_seconds=max_seconds)
    return log_mel(reference_audio(waveform, rate))
