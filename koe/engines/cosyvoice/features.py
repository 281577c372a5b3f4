"""The features CosyVoice's two ONNX parts read, computed as upstream computes them (CPU, float32).

A prompt clip reaches both parts at 16 kHz, as upstream's `load_wav(wav, 16000)` makes it: the mean
of its channels, resampled with `torchaudio.transforms.Resample` at its defaults when the rate
differs (koe: `koe.audio.sinc_resample.resample_sinc`, bit for bit); rates under 16 kHz are refused,
as upstream asserts (`clip_16k`).

* The speaker embedding (CAM++) reads Kaldi filterbanks, `torchaudio.compliance.kaldi.fbank(speech,
  num_mel_bins=80, dither=0, sample_frequency=16000)` then the mean over frames subtracted
  (`speaker_fbank`). Kaldi's defaults: 25 ms frames every 10 ms (400 and 160 samples) with only the
  frames that fit (snip edges), each frame's mean removed, pre-emphasis 0.97 (the first sample
  against itself), Povey's window (a symmetric Hann to the power 0.85), zero padded to 512, the
  power spectrum, 80 triangular bins on Kaldi's mel scale `1127 ln(1 + f/700)` from 20 Hz to
  Nyquist (computed in float32 as torchaudio computes them, the 257th FFT bin weighted 0), then
  `log(max(energy, float32 eps))`. The same torch ops in the same order, so the same bits.
* The speech tokenizer reads Whisper's log-mel (`whisper.log_mel_spectrogram(speech, n_mels=128)`,
  `tokenizer_log_mel`): a 400-point STFT every 160 samples (centred, reflect padded, periodic Hann
  window), the power of all frames but the last, librosa's Slaney mel filterbank (128 bins; koe's
  `mel_filterbank` gives the same float32 bits as Whisper's stored matrix), `log10(max(x, 1e-10))`,
  floored at the clip's maximum − 8, then `(x + 4) / 4`. Upstream refuses clips over 30 s
  (`MAX_TOKENIZER_SECONDS`); koe does too, with an error naming the length.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from koe.audio.mel import mel_filterbank
from koe.audio.sinc_resample import resample_sinc

__all__ = [
    "MAX_TOKENIZER_SECONDS",
    "SAMPLE_RATE",
    "ClipError",
    "clip_16k",
    "clip_at",
    "kaldi_fbank",
    "speaker_fbank",
    "tokenizer_log_mel",
]

SAMPLE_RATE = 16000  # both ONNX parts read 16 kHz
MAX_TOKENIZER_SECONDS = 30  # upstream asserts `len / 16000 <= 30` before tokenizing
FRAME = 400  # 25 ms at 16 kHz: Kaldi's frame; also Whisper's n_fft
HOP = 160  # 10 ms at 16 kHz: both hops
_FBANK_FFT = 512  # Kaldi rounds the frame up to a power of two
_PREEMPHASIS = 0.97
_LOW_HZ = 20.0


class ClipError(ValueError):
    """A prompt clip the speaker embedding or the speech tokenizer cannot take (too short, too long,
    a rate under 16 kHz)."""


def clip_16k(samples: torch.Tensor | np.ndarray, sample_rate: int) -> torch.Tensor:
    """A clip as upstream's `load_wav(clip, 16000)` returns it: `(1, samples)` float32 at 16 kHz (`clip_at`)."""
    return clip_at(samples, sample_rate, SAMPLE_RATE)


def clip_at(samples: torch.Tensor | np.ndarray, sample_rate: int, rate: int) -> torch.Tensor:
    """A clip as upstream's `load_wav(clip, rate)` returns it: `(1, samples)` float32 at `rate`.

    `samples` is `(frames,)` mono or `(frames, channels)` as soundfile reads it (or `(channels,
    frames)` as a torch tensor with fewer channels than frames); channels are averaged first, then
    the clip is resampled (`torchaudio`'s sinc resampling at its defaults, bit for bit) when its
    rate is not `rate`. A clip under 16 kHz that needs resampling is refused, as upstream refuses it."""
    x = torch.as_tensor(samples)
    if not x.is_floating_point():
        raise ClipError(f"a clip must hold float samples, got {x.dtype}")
    x = x.to(torch.float32)
    if x.dim() == 1:
        x = x.unsqueeze(0)
    elif x.dim() == 2:
        if x.shape[0] > x.shape[1]:  # (frames, channels) -> (channels, frames)
            x = x.t()
    else:
        raise ClipError(f"a clip is (frames,) or (frames, channels), got shape {tuple(x.shape)}")
    x = x.mean(dim=0, keepdim=True)  # (1, frames)
    if sample_rate != rate:
        if sample_rate < SAMPLE_RATE:
            raise ClipError(f"the clip's sample rate is {sample_rate} Hz; CosyVoice needs at least {SAMPLE_RATE} Hz")
        x = resample_sinc(x, sample_rate, rate)
    return x


# -- Kaldi filterbanks (the speaker embedding's input) ------------------------------------------------


def _kaldi_mel(freq: torch.Tensor) -> torch.Tensor:
    return 1127.0 * (1.0 + freq / 700.0).log()


@functools.lru_cache(maxsize=4)
def _kaldi_mel_banks(num_bins: int, sample_rate: float) -> torch.Tensor:
    """`(num_bins, 257)` triangular filters on Kaldi's mel scale, in float32 as torchaudio builds them
    (the edges from Python floats, the rest in float32 tensors), the Nyquist column zero."""
    nyquist = 0.5 * sample_rate
    mel_low = 1127.0 * math.log(1.0 + _LOW_HZ / 700.0)
    mel_high = 1127.0 * math.log(1.0 + nyquist / 700.0)
    delta = (mel_high - mel_low) / (num_bins + 1)
    index = torch.arange(num_bins).unsqueeze(1)  # (bins, 1) int64
    left = mel_low + index * delta  # float32
    centre = mel_low + (index + 1.0) * delta
    right = mel_low + (index + 2.0) * delta
    fft_mel = _kaldi_mel((sample_rate / _FBANK_FFT) * torch.arange(_FBANK_FFT / 2)).unsqueeze(0)  # (1, 256)
    rising = (fft_mel - left) / (centre - left)
    falling = (right - fft_mel) / (right - centre)
    banks = torch.maximum(torch.zeros(1), torch.minimum(rising, falling))  # (bins, 256)
    return torch.nn.functional.pad(banks, (0, 1))  # (bins, 257): the Nyquist bin weighs nothing


@functools.lru_cache(maxsize=1)
def _povey_window() -> torch.Tensor:
    return torch.hann_window(FRAME, periodic=False).pow(0.85)


def kaldi_fbank(speech: torch.Tensor, num_mel_bins: int = 80) -> torch.Tensor:
    """`torchaudio.compliance.kaldi.fbank(speech, num_mel_bins=..., dither=0, sample_frequency=16000)`
    of a `(1, samples)` 16 kHz clip: `(frames, num_mel_bins)` float32, frames = 1 + (samples − 400) // 160."""
    wave = speech[0] if speech.dim() == 2 else speech
    if wave.shape[0] < FRAME:
        raise ClipError(f"the clip is too short for the speaker embedding: {wave.shape[0]} samples at 16 kHz, at least {FRAME} (25 ms) needed")
    frames = 1 + (wave.shape[0] - FRAME) // HOP
    x = wave.as_strided((frames, FRAME), (HOP * wave.stride(0), wave.stride(0)))  # (frames, 400)
    x = x - torch.mean(x, dim=1).unsqueeze(1)  # each frame's DC offset removed
    previous = torch.nn.functional.pad(x.unsqueeze(0), (1, 0), mode="replicate").squeeze(0)  # (frames, 401)
    x = x - _PREEMPHASIS * previous[:, :-1]
    x = x * _povey_window().unsqueeze(0)
    x = torch.nn.functional.pad(x.unsqueeze(0), (0, _FBANK_FFT - FRAME), mode="constant", value=0).squeeze(0)  # (frames, 512)
    power = torch.fft.rfft(x).abs().pow(2.0)  # (frames, 257)
    energies = torch.mm(power, _kaldi_mel_banks(num_mel_bins, float(SAMPLE_RATE)).T)  # (frames, bins)
    eps = torch.tensor(torch.finfo(torch.float).eps)
    return torch.max(energies, eps).log()


def speaker_fbank(speech: torch.Tensor) -> torch.Tensor:
    """CAM++'s input for a `(1, samples)` 16 kHz clip, as `_extract_spk_embedding` feeds it:
    `(1, frames, 80)`, 80-bin Kaldi filterbanks less their mean over frames."""
    feat = kaldi_fbank(speech, 80)
    feat = feat - feat.mean(dim=0, keepdim=True)
    return feat.unsqueeze(0)


# -- Whisper's log-mel (the speech tokenizer's input) -------------------------------------------------


@functools.lru_cache(maxsize=2)
def _slaney_filters(n_mels: int) -> torch.Tensor:
    return torch.from_numpy(mel_filterbank(SAMPLE_RATE, FRAME, n_mels))


def tokenizer_log_mel(speech: torch.Tensor, n_mels: int = 128) -> torch.Tensor:
    """`whisper.log_mel_spectrogram(speech, n_mels=128)` of a `(1, samples)` 16 kHz clip:
    `(1, n_mels, samples // 160)` float32. Refuses clips over 30 s, as upstream's tokenizer does,
    and clips too short for the STFT's reflect padding."""
    samples = speech.shape[-1]
    if samples / SAMPLE_RATE > MAX_TOKENIZER_SECONDS:
        raise ClipError(f"the clip is {samples / SAMPLE_RATE:.2f} s long; CosyVoice's speech tokenizer takes at most {MAX_TOKENIZER_SECONDS} s")
    if samples <= FRAME // 2:
        raise ClipError(f"the clip is too short for the speech tokenizer: {samples} samples at 16 kHz, more than {FRAME // 2} needed")
    window = torch.hann_window(FRAME)
    stft = torch.stft(speech, FRAME, HOP, window=window, return_complex=True)  # (1, 201, frames + 1)
    power = stft[..., :-1].abs() ** 2
    mel = _slaney_filters(n_mels) @ power  # (1, n_mels, frames)
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0
