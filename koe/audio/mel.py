"""Mel filterbanks and log-mel spectrograms: Slaney (Qwen3-TTS's speaker encoder), HTK (F5-TTS / Vocos).

`mel_filterbank` gives the same float32 bits as `librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax)`
with its defaults (Slaney mel scale, `norm="slaney"`, `dtype=float32`). The float path matters:
the triangles are computed in float64 and stored into a float32 matrix, then the Slaney
normalisation multiplies that float32 matrix by a float64 vector and rounds back to float32.

`mel_spectrogram` mirrors upstream's op order: reflect pad by `(n_fft - hop) // 2`, `torch.stft`
(center=False, periodic Hann window), magnitude `sqrt(re² + im² + 1e-9)`, mel matmul, then
`log(clamp(x, min=1e-5))`.

`htk_mel_filterbank` gives the same float32 bits as `torchaudio.functional.melscale_fbanks(n_freqs,
f_min, f_max, n_mels, sample_rate, norm=None, mel_scale="htk")`: unlike librosa's, torchaudio's
filterbank is computed in float32 torch ops (only the two edge mels are Python floats), so it is
rebuilt here with the same torch ops in the same order. `vocos_log_mel` is the mel F5-TTS conditions
on and Vocos vocodes: `torchaudio.transforms.MelSpectrogram(24000, n_fft=1024, hop_length=256,
n_mels=100, power=1, center=True, norm=None)` (periodic Hann window, reflect padding by n_fft // 2,
magnitude `|stft|`), then `log(clamp(x, min=floor))`; F5-TTS's `get_vocos_mel_spectrogram` uses
floor 1e-5, Vocos's own feature extractor (`safe_log`) 1e-7.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

__all__ = [
    "hz_to_mel_slaney",
    "mel_to_hz_slaney",
    "mel_filterbank",
    "mel_spectrogram",
    "hz_to_mel_htk",
    "htk_mel_filterbank",
    "vocos_log_mel",
]

# Slaney's auditory-toolbox scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above.
_F_SP = 200.0 / 3
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = np.log(6.4) / 27.0


def hz_to_mel_slaney(hz: np.ndarray | float) -> np.ndarray:
    """Frequencies in Hz to Slaney mels (float64)."""
    hz = np.asarray(hz, dtype=np.float64)
    mel = hz / _F_SP
    log_region = hz >= _MIN_LOG_HZ
    return np.where(log_region, _MIN_LOG_MEL + np.log(np.where(log_region, hz, _MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOGSTEP, mel)


def mel_to_hz_slaney(mel: np.ndarray | float) -> np.ndarray:
    """Slaney mels to frequencies in Hz (float64)."""
    mel = np.asarray(mel, dtype=np.float64)
    hz = _F_SP * mel
    log_region = mel >= _MIN_LOG_MEL
    return np.where(log_region, _MIN_LOG_HZ * np.exp(_LOGSTEP * (mel - _MIN_LOG_MEL)), hz)


@functools.lru_cache(maxsize=16)
def _mel_filterbank_cached(sr: float, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    n_bins = 1 + n_fft // 2
    bin_hz = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)  # (n_bins,) centre of each FFT bin
    edges_mel = np.linspace(hz_to_mel_slaney(fmin), hz_to_mel_slaney(fmax), n_mels + 2)
    edges_hz = mel_to_hz_slaney(edges_mel)  # (n_mels + 2,) left edge, centre, right edge per band
    widths = np.diff(edges_hz)  # (n_mels + 1,)
    dist = edges_hz[:, None] - bin_hz[None, :]  # (n_mels + 2, n_bins)

    weights = np.zeros((n_mels, n_bins), dtype=np.float32)
    for m in range(n_mels):
        rising = -dist[m] / widths[m]
        falling = dist[m + 2] / widths[m + 1]
        weights[m] = np.maximum(0, np.minimum(rising, falling))  # float64 -> float32 on store

    area_norm = 2.0 / (edges_hz[2 : n_mels + 2] - edges_hz[:n_mels])  # (n_mels,) float64
    weights *= area_norm[:, None]  # float32 * float64 computed in float64, rounded to float32
    weights.setflags(write=False)
    return weights


def mel_filterbank(sr: float, n_fft: int, n_mels: int = 128, fmin: float = 0.0, fmax: float | None = None) -> np.ndarray:
    """Slaney-normalised mel filterbank, float32 `(n_mels, 1 + n_fft // 2)`; equal to librosa's bits."""
    if fmax is None:
        fmax = float(sr) / 2
    if n_fft <= 0 or n_mels <= 0 or sr <= 0 or not (0 <= fmin < fmax):
        raise ValueError(f"bad mel filterbank parameters sr={sr} n_fft={n_fft} n_mels={n_mels} fmin={fmin} fmax={fmax}")
    return _mel_filterbank_cached(float(sr), int(n_fft), int(n_mels), float(fmin), float(fmax)).copy()


def mel_spectrogram(
    y: torch.Tensor,
    n_fft: int = 1024,
    num_mels: int = 128,
    sampling_rate: int = 24000,
    hop_size: int = 256,
    win_size: int = 1024,
    fmin: float = 0.0,
    fmax: float | None = 12000,
    center: bool = False,
) -> torch.Tensor:
    """Log-mel spectrogram of `y` `(batch, samples)` -> `(batch, num_mels, frames)`, float32.

    Defaults are the speaker encoder's (24 kHz, 1024-point FFT, hop 256, 128 mels up to 12 kHz).
    `frames = (samples + 2 * ((n_fft - hop) // 2) - n_fft) // hop + 1`.
    """
    if y.dim() != 2:
        raise ValueError(f"mel_spectrogram expects (batch, samples), got shape {tuple(y.shape)}")
    basis = torch.from_numpy(mel_filterbank(sampling_rate, n_fft, num_mels, fmin, fmax)).float().to(y.device)
    window = torch.hann_window(win_size).to(y.device)

    pad = (n_fft - hop_size) // 2
    # reflect padding works on (batch, channels, time): (B, T) -> (B, 1, T) -> (B, 1, T + 2 pad) -> (B, T + 2 pad)
    y = torch.nn.functional.pad(y.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)

    spec = _stft(y, n_fft, hop_size, window, center)  # (B, n_fft // 2 + 1, frames) complex
    magnitude = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)  # (B, bins, frames)

    mel = torch.matmul(basis, magnitude)  # (mels, bins) @ (B, bins, frames) -> (B, mels, frames)
    return torch.log(torch.clamp(mel, min=1e-5))


def _stft(y: torch.Tensor, n_fft: int, hop: int, window: torch.Tensor, center: bool) -> torch.Tensor:
    """The one-sided complex STFT both spectrograms take (reflect padding when centred)."""
    return torch.stft(
        y,
        n_fft,
        hop_length=hop,
        win_length=window.shape[0],
        window=window,
        center=center,
        pad_mode="reflect",
        normalized=False,
        onesided=True,
        return_complex=True,
    )


# ---------------------------------------------------------------------------------------------
# HTK scale, no normalisation (torchaudio's MelSpectrogram defaults): F5-TTS and Vocos


def hz_to_mel_htk(hz: float) -> float:
    """Frequency in Hz to HTK mels, `2595 log10(1 + hz / 700)`, as a Python float (double)."""
    return 2595.0 * math.log10(1.0 + (hz / 700.0))


@functools.lru_cache(maxsize=16)
def _htk_mel_filterbank_cached(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int) -> torch.Tensor:
    bin_hz = torch.linspace(0, sample_rate // 2, n_freqs)  # (n_freqs,) float32 centre of each FFT bin
    edges_mel = torch.linspace(hz_to_mel_htk(f_min), hz_to_mel_htk(f_max), n_mels + 2)  # float32
    edges_hz = 700.0 * (10.0 ** (edges_mel / 2595.0) - 1.0)  # (n_mels + 2,) float32: left, centre, right
    widths = edges_hz[1:] - edges_hz[:-1]  # (n_mels + 1,)
    dist = edges_hz.unsqueeze(0) - bin_hz.unsqueeze(1)  # (n_freqs, n_mels + 2)
    rising = (-1.0 * dist[:, :-2]) / widths[:-1]  # (n_freqs, n_mels)
    falling = dist[:, 2:] / widths[1:]  # (n_freqs, n_mels)
    fb = torch.max(torch.zeros(1), torch.min(rising, falling))
    fb.requires_grad_(False)
    return fb


def htk_mel_filterbank(n_freqs: int, n_mels: int, sample_rate: int, f_min: float = 0.0, f_max: float | None = None) -> torch.Tensor:
    """HTK-scale triangular filterbank without normalisation, float32 `(n_freqs, n_mels)`.

    Equal to `torchaudio.functional.melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate,
    norm=None, mel_scale="htk")`; note the orientation (frequencies first), as torchaudio returns it.
    `f_max` defaults to `sample_rate // 2` (what `MelSpectrogram` passes).
    """
    if f_max is None:
        f_max = float(sample_rate // 2)
    if n_freqs <= 0 or n_mels <= 0 or sample_rate <= 0 or not (0 <= f_min <= f_max):
        raise ValueError(f"bad mel filterbank parameters n_freqs={n_freqs} n_mels={n_mels} sample_rate={sample_rate} f_min={f_min} f_max={f_max}")
    return _htk_mel_filterbank_cached(int(n_freqs), float(f_min), float(f_max), int(n_mels), int(sample_rate)).clone()


def vocos_log_mel(
    waveform: torch.Tensor,
    sample_rate: int = 24000,
    n_fft: int = 1024,
    hop_length: int = 256,
    win_length: int = 1024,
    n_mels: int = 100,
    floor: float = 1e-5,
) -> torch.Tensor:
    """Log-mel of `waveform` `(batch, samples)` (or `(batch, 1, samples)`) -> `(batch, n_mels, frames)`.

    `frames = samples // hop_length + 1` (centred frames, reflect padding, so `samples` must exceed
    `n_fft // 2`). With the default `floor=1e-5` this is F5-TTS's `get_vocos_mel_spectrogram`; pass
    `floor=1e-7` for Vocos's `MelSpectrogramFeatures` (padding="center").
    """
    if waveform.dim() == 3 and waveform.shape[1] == 1:
        waveform = waveform.squeeze(1)
    if waveform.dim() != 2:
        raise ValueError(f"vocos_log_mel expects (batch, samples), got shape {tuple(waveform.shape)}")
    fb = htk_mel_filterbank(n_fft // 2 + 1, n_mels, sample_rate).to(device=waveform.device)
    window = torch.hann_window(win_length).to(device=waveform.device)  # periodic, float32
    spec = _stft(waveform, n_fft, hop_length, window, center=True)  # (batch, n_fft // 2 + 1, frames) complex
    magnitude = spec.abs()  # power=1
    # (batch, frames, freqs) @ (freqs, mels) -> (batch, frames, mels) -> (batch, mels, frames)
    mel = torch.matmul(magnitude.transpose(-1, -2), fb).transpose(-1, -2)
    return mel.clamp(min=floor).log()
