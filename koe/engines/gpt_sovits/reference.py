"""The reference clip as upstream's `TTS.set_ref_audio` reads it, twice and differently:

* For HuBERT (`_set_prompt_semantic`): `librosa.load(path, sr=16000)` — libsndfile's float32
  samples, channels averaged in numpy, resampled with soxr (`soxr_hq`, librosa's default) and cut
  or padded to `ceil(n * 16000 / rate)`; refused unless that is 48,000 to 160,000 samples (3 to
  10 s); then zeros appended: `int(sampling_rate * 0.3)` of them, where `sampling_rate` is the
  SoVITS model's (32 kHz for v2: 9,600 zeros, 0.6 s at 16 kHz). koe reads with `koe.audio.io`
  and resamples with `koe.audio.resample`, which give librosa's bits.
* For the spectrogram SoVITS conditions on (`_get_ref_spec`): `torchaudio.load` (float32,
  channels first), a stereo clip averaged in torch, brought to the model's rate with
  `torchaudio.transforms.Resample` (`koe.audio.sinc_resample`, the same bits), divided by
  `min(2, peak)` when its peak is over 1, then `spectrogram_torch`: reflect padding of
  `(n_fft - hop) / 2` each side, `stft` with a periodic Hann window, `center=False`, magnitudes
  `sqrt(re^2 + im^2 + 1e-8)`. v2Pro/ProPlus also take that audio resampled to 16 kHz for the
  speaker-verification model (`sv_audio=True`).

Where koe differs: upstream averages only two channels for the spectrogram (more would give one
spectrogram per channel, which SoVITS cannot take); koe averages any number. koe refuses audio it
cannot use at all (unreadable, non-finite, all silence) with `AudioError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from koe.audio.decode import array_frames, check_sample_rate, decode
from koe.audio.errors import AudioError, AudioTooLong
from koe.audio.io import AudioSource, encoded_audio, load_audio
from koe.audio.resample import resample
from koe.audio.sinc_resample import resample_sinc

__all__ = [
    "HUBERT_RATE",
    "ReferenceLengthError",
    "SpectrogramSettings",
    "hubert_input",
    "load_16k",
    "reference_spectrogram",
    "reference_waveform",
    "spectrogram",
]

HUBERT_RATE = 16000
MIN_SAMPLES, MAX_SAMPLES = 48000, 160000  # upstream's 3-10 s window, in 16 kHz samples
PADDING_S = 0.3  # of the SoVITS rate
DECODE_LIMIT_S = 60.0  # a longer file is refused while decoding, before it is held whole


class ReferenceLengthError(AudioError):
    """A reference clip outside upstream's 3-10 s window."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        length = f"{seconds:.2f} s" if seconds is not None else f"more than {DECODE_LIMIT_S:g} s"
        super().__init__(f"reference audio must be 3 to 10 seconds long, this one is {length}")


def load_16k(source: AudioSource, sample_rate: int | None = None) -> np.ndarray:
    """`librosa.load(source, sr=16000)`'s samples: float32 (N,), checked against the 3-10 s window."""
    try:
        y, rate = load_audio(source, sample_rate, max_seconds=DECODE_LIMIT_S)
    except AudioTooLong as e:
        raise ReferenceLengthError(e.seconds) from e
    y = resample(y, rate, HUBERT_RATE)
    if not MIN_SAMPLES <= y.shape[0] <= MAX_SAMPLES:
        raise ReferenceLengthError(y.shape[0] / HUBERT_RATE)
    return y


def hubert_input(source: AudioSource, sampling_rate: int, sample_rate: int | None = None) -> torch.Tensor:
    """What upstream gives HuBERT for a reference: the 16 kHz samples and `int(sampling_rate * 0.3)`
    zeros (`sampling_rate`: the SoVITS model's), float32 (N,)."""
    wav = torch.from_numpy(load_16k(source, sample_rate))
    return torch.cat([wav, torch.zeros(int(sampling_rate * PADDING_S), dtype=torch.float32)])


def reference_waveform(source: AudioSource, sample_rate: int | None = None) -> tuple[torch.Tensor, int]:
    """`torchaudio.load`'s float32 (channels, N) and rate, for a file (path or bytes) or an array
    (`(n,)` / `(n, channels)`, with `sample_rate`, or an `(array, rate)` tuple)."""
    if isinstance(source, tuple):
        source, sample_rate = source
    if isinstance(source, np.ndarray):
        if sample_rate is None:
            raise AudioError("a numpy waveform needs its sample_rate")
        frames, rate = array_frames(source), check_sample_rate(int(sample_rate))
    else:
        try:
            frames, rate = decode(encoded_audio(source), max_seconds=DECODE_LIMIT_S)
        except AudioTooLong as e:
            raise ReferenceLengthError(e.seconds) from e
    frames = frames[:, None] if frames.ndim == 1 else frames
    if frames.shape[0] == 0 or not np.isfinite(frames).all():
        raise AudioError("reference audio is empty or holds NaN or infinite samples")
    return torch.from_numpy(np.ascontiguousarray(frames.T)), rate


@dataclass(frozen=True)
class SpectrogramSettings:
    """The SoVITS model's `data` settings the reference spectrogram uses (v2's by default)."""

    sampling_rate: int = 32000
    filter_length: int = 2048
    hop_length: int = 640
    win_length: int = 2048


def spectrogram(y: torch.Tensor, n_fft: int, hop: int, win: int) -> torch.Tensor:
    """`spectrogram_torch(y, n_fft, _, hop, win, center=False)`: (B, N) -> (B, n_fft // 2 + 1, frames)."""
    pad = int((n_fft - hop) / 2)
    y = torch.nn.functional.pad(y.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    window = torch.hann_window(win).to(dtype=y.dtype, device=y.device)
    spec = torch.stft(y, n_fft, hop_length=hop, win_length=win, window=window, center=False, normalized=False, onesided=True, return_complex=True)
    return torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-8)


def reference_spectrogram(
    source: AudioSource,
    settings: SpectrogramSettings = SpectrogramSettings(),
    sample_rate: int | None = None,
    sv_audio: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`_get_ref_spec`: the reference's spectrogram (1, n_fft // 2 + 1, frames) at the model's rate,
    and with `sv_audio` the (1, N) 16 kHz audio v2Pro's speaker model takes (else None)."""
    raw, rate = reference_waveform(source, sample_rate)
    audio = raw.mean(0).unsqueeze(0) if raw.shape[0] > 1 else raw  # (1, N)
    audio = resample_sinc(audio, rate, settings.sampling_rate)
    peak = audio.abs().max()
    if peak > 1:
        audio = audio / min(2, peak)
    spec = spectrogram(audio, settings.filter_length, settings.hop_length, settings.win_length)
    sv = resample_sinc(audio, settings.sampling_rate, HUBERT_RATE) if sv_audio else None
    return spec, sv
