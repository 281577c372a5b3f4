"""Kaldi's log filterbanks of a 16 kHz clip, as `torchaudio.compliance.kaldi.fbank(audio,
num_mel_bins=..., dither=0, sample_frequency=16000)` computes them, with the same torch ops in the
same order, so the same float32 bits (koe does not depend on torchaudio). 3D-Speaker's speaker
models (CAM++: CosyVoice's speaker embedding, IndexTTS 2's style) read them less their mean over
frames (`mean_normalized_fbank`).

Kaldi's defaults at 16 kHz: 25 ms frames every 10 ms (400 and 160 samples), only the frames that fit
(snip edges); each frame's mean removed; pre-emphasis 0.97 (the first sample against itself); Povey's
window (a symmetric Hann to the power 0.85); zero padded to 512; the power spectrum; triangular bins
on Kaldi's mel scale `1127 ln(1 + f / 700)` from 20 Hz to Nyquist (built in float32 as torchaudio
builds them, the Nyquist bin weighted 0); `log(max(energy, float32 eps))`.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from koe.audio.errors import AudioError

__all__ = ["FRAME", "HOP", "SAMPLE_RATE", "kaldi_fbank", "mean_normalized_fbank"]

SAMPLE_RATE = 16000
FRAME = 400  # 25 ms
HOP = 160  # 10 ms
_FFT = 512  # the frame rounded up to a power of two
_PREEMPHASIS = 0.97
_LOW_HZ = 20.0


def _mel(freq: torch.Tensor) -> torch.Tensor:
    return 1127.0 * (1.0 + freq / 700.0).log()


@functools.lru_cache(maxsize=4)
def _mel_banks(num_bins: int) -> torch.Tensor:
    """`(num_bins, 257)` float32 triangles: the edges from Python floats, the rest in float32 tensors."""
    nyquist = 0.5 * SAMPLE_RATE
    low = 1127.0 * math.log(1.0 + _LOW_HZ / 700.0)
    high = 1127.0 * math.log(1.0 + nyquist / 700.0)
    step = (high - low) / (num_bins + 1)
    index = torch.arange(num_bins).unsqueeze(1)  # (bins, 1), int64
    left = low + index * step
    centre = low + (index + 1.0) * step
    right = low + (index + 2.0) * step
    bins = _mel((SAMPLE_RATE / _FFT) * torch.arange(_FFT / 2)).unsqueeze(0)  # (1, 256)
    rising = (bins - left) / (centre - left)
    falling = (right - bins) / (right - centre)
    banks = torch.maximum(torch.zeros(1), torch.minimum(rising, falling))
    return F.pad(banks, (0, 1))


@functools.lru_cache(maxsize=1)
def _povey() -> torch.Tensor:
    return torch.hann_window(FRAME, periodic=False).pow(0.85)


def kaldi_fbank(audio: torch.Tensor, num_mel_bins: int = 80) -> torch.Tensor:
    """Log filterbank energies of a 16 kHz clip (`(samples,)`, or `(channels, samples)` of which the
    first channel is read, as torchaudio reads it; float32): `(frames, num_mel_bins)` float32 with
    frames = 1 + (samples - 400) // 160. A clip under 400 samples is refused (`AudioError`, a
    `ValueError`): torchaudio returns no frames, which no speaker model can take."""
    wave = audio[0] if audio.dim() == 2 else audio
    if wave.dim() != 1:
        raise AudioError(f"a clip is (samples,) or (channels, samples), got shape {tuple(audio.shape)}")
    if wave.shape[0] < FRAME:
        raise AudioError(f"the clip is too short for filterbanks: {wave.shape[0]} samples at 16 kHz, at least {FRAME} (25 ms) needed")
    wave = wave.to(torch.float32)
    frames = 1 + (wave.shape[0] - FRAME) // HOP
    x = wave.as_strided((frames, FRAME), (HOP * wave.stride(0), wave.stride(0)))
    x = x - torch.mean(x, dim=1).unsqueeze(1)
    previous = F.pad(x.unsqueeze(0), (1, 0), mode="replicate").squeeze(0)  # (frames, 401)
    x = x - _PREEMPHASIS * previous[:, :-1]
    x = x * _povey().unsqueeze(0)
    x = F.pad(x.unsqueeze(0), (0, _FFT - FRAME), mode="constant", value=0).squeeze(0)  # (frames, 512)
    power = torch.fft.rfft(x).abs().pow(2.0)  # (frames, 257)
    energies = torch.mm(power, _mel_banks(num_mel_bins).T)
    return torch.max(energies, torch.tensor(torch.finfo(torch.float).eps)).log()


def mean_normalized_fbank(audio: torch.Tensor, num_mel_bins: int = 80) -> torch.Tensor:
    """A speaker model's input from a 16 kHz clip `(1, samples)`: `(1, frames, num_mel_bins)`, the
    filterbanks (`kaldi_fbank`) less their mean over frames, as CosyVoice and IndexTTS 2 feed CAM++."""
    feat = kaldi_fbank(audio, num_mel_bins)
    feat = feat - feat.mean(dim=0, keepdim=True)
    return feat.unsqueeze(0)
