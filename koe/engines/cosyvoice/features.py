"""The features CosyVoice's two ONNX parts read, computed as upstream computes them (CPU, float32).

A prompt clip reaches both parts at 16 kHz, as upstream's `load_wav(wav, 16000)` makes it: the mean
of its channels, resampled with `torchaudio.transforms.Resample` at its defaults when the rate
differs (koe: `koe.audio.sinc_resample.resample_sinc`, bit for bit); rates under 16 kHz are refused,
as upstream asserts (`clip_16k`).

* The speaker embedding (CAM++) reads Kaldi filterbanks less their mean over frames
  (`speaker_fbank`): `torchaudio.compliance.kaldi.fbank(speech, num_mel_bins=80, dither=0,
  sample_frequency=16000)` as `koe.audio.kaldi` computes it, bit for bit.
* The speech tokenizer reads Whisper's log-mel (`whisper.log_mel_spectrogram(speech, n_mels=128)`,
  `tokenizer_log_mel`): a 400-point STFT every 160 samples (centred, reflect padded, periodic Hann
  window), the power of all frames but the last, librosa's Slaney mel filterbank (128 bins; koe's
  `mel_filterbank` gives the same float32 bits as Whisper's stored matrix), `log10(max(x, 1e-10))`,
  floored at the clip's maximum − 8, then `(x + 4) / 4`. Upstream refuses clips over 30 s
  (`MAX_TOKENIZER_SECONDS`); koe does too, with an error naming the length.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from koe.audio.kaldi import mean_normalized_fbank
from koe.audio.mel import mel_filterbank
from koe.audio.sinc_resample import resample_sinc

__all__ = [
    "MAX_TOKENIZER_SECONDS",
    "SAMPLE_RATE",
    "ClipError",
    "clip_16k",
    "clip_at",
    "speaker_fbank",
    "tokenizer_log_mel",
]

SAMPLE_RATE = 16000  # both ONNX parts read 16 kHz
MAX_TOKENIZER_SECONDS = 30  # upstream asserts `len / 16000 <= 30` before tokenizing
FRAME = 400  # 25 ms at 16 kHz: Kaldi's frame; also Whisper's n_fft
HOP = 160  # 10 ms at 16 kHz: both hops


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


def speaker_fbank(speech: torch.Tensor) -> torch.Tensor:
    """CAM++'s input for a `(1, samples)` 16 kHz clip, as `_extract_spk_embedding` feeds it:
    `(1, frames, 80)`, 80-bin Kaldi filterbanks less their mean over frames."""
    if speech.shape[-1] < FRAME:
        raise ClipError(f"the clip is too short for the speaker embedding: {speech.shape[-1]} samples at 16 kHz, at least {FRAME} (25 ms) needed")
    return mean_normalized_fbank(speech, 80)


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
