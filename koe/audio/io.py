"""Reading reference audio (any common format) into float32 mono, and writing WAV files.

Upstream qwen-tts reads a local path with `librosa.load(path, sr=None, mono=True)`, which opens it
with soundfile (libsndfile) as float32 `(frames, channels)`, transposes to `(channels, frames)` and
averages over the channel axis in float32. `load_audio` does the same for every format libsndfile
reads (wav, flac, ogg/vorbis, ogg/opus, mp3, aiff, ...), so those samples are upstream's bits; other
containers (m4a/aac, webm, ...) are decoded with PyAV (FFmpeg). Beyond upstream, it refuses audio a
voice clone cannot use: empty, truncated, non-finite or all-silent input, absurd sample rates or
channel counts raise `AudioError`; and with `max_seconds` a file is decoded bounded (koe.audio.decode),
so a small file that expands to hours of audio costs no more memory than `max_seconds` of it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import soundfile as sf

from koe.audio.decode import (
    EncodedAudio,
    array_frames,
    check_sample_rate,
    decode,
    frame_limit,
    to_mono,
)
from koe.audio.errors import AudioError, AudioTooLong
from koe.runtime.files import atomic_file

__all__ = ["AudioSource", "encoded_audio", "load_audio", "write_wav"]

AudioSource = str | os.PathLike | bytes | bytearray | memoryview | np.ndarray | tuple


def load_audio(source: AudioSource, sample_rate: int | None = None, *, max_seconds: float | None = None, trim: bool = False) -> tuple[np.ndarray, int]:
    """Load audio as `(samples, sample_rate)`: float32, mono, shape `(n,)`, at its native rate.

    `source` is a file path, the bytes of an audio file, a `(array, sample_rate)` tuple, or an
    array with `sample_rate` given. Arrays are `(n,)` or `(n, channels)` (a `(channels, n)` array
    with at most 16 channels is also accepted); integer PCM arrays are scaled to [-1, 1) (upstream
    would only cast them). Multi-channel audio is averaged in float32 as upstream does. Raises
    `AudioError` for missing, non-audio, empty, truncated, non-finite or all-silent input, a sample
    rate outside 8000-384000 Hz or more than 64 channels.

    `max_seconds`: refuse longer audio with `AudioTooLong` ("... at most N s is allowed"). A file is
    then decoded block by block and mixed to mono as it goes, and decoding stops at the limit, so
    no more than `max_seconds` of mono samples (plus one block) is ever held, whatever the file
    claims or expands to. With `trim`, keep the first `max_seconds` instead of refusing (for a
    file, only that much is decoded). Without `max_seconds`, all of it is decoded.
    """
    if max_seconds is not None and not math.isfinite(max_seconds):
        max_seconds = None
    if max_seconds is not None and max_seconds <= 0:
        raise ValueError(f"max_seconds must be positive, got {max_seconds}")
    if trim and max_seconds is None:
        raise ValueError("trim needs max_seconds")
    y, sr = _load(source, sample_rate, max_seconds, trim)
    if max_seconds is not None and len(y) > max_seconds * sr:
        if not trim:
            raise AudioTooLong(max_seconds, len(y) / sr)
        y = y[: frame_limit(max_seconds, sr)]
    return _checked(y, sr)


def _load(source: AudioSource, sample_rate: int | None, max_seconds: float | None, trim: bool) -> tuple[np.ndarray, int]:
    """The source as unchecked float32 mono and its rate (a file decoded within `max_seconds`)."""
    if isinstance(source, tuple):
        if len(source) != 2 or not isinstance(source[0], np.ndarray):
            raise AudioError("a tuple audio source must be (numpy array, sample_rate)")
        if sample_rate is not None:
            raise AudioError("sample_rate given twice (in the tuple and as an argument)")
        return _from_array(source[0], source[1])
    if isinstance(source, np.ndarray):
        if sample_rate is None:
            raise AudioError("a numpy waveform needs its sample_rate")
        return _from_array(source, sample_rate)
    if sample_rate is not None:
        raise AudioError("sample_rate is only for numpy input; files carry their own rate")
    return decode(encoded_audio(source), max_seconds=max_seconds, reduce=_mono_block, trim=trim)


def encoded_audio(source: str | os.PathLike | bytes | bytearray | memoryview) -> EncodedAudio:
    """A file's path or its bytes, not yet decoded: `AudioError` for empty bytes, a missing or empty
    file, or another type of source."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not data:
            raise AudioError("audio bytes are empty")
        return EncodedAudio.from_bytes(data)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise AudioError(f"no such audio file: {path}")
        if path.stat().st_size == 0:
            raise AudioError(f"audio file is empty: {path}")
        return EncodedAudio.from_path(path)
    raise AudioError(f"unsupported audio source type: {type(source).__name__}")


def _mono_block(block: np.ndarray) -> np.ndarray:
    """One decoded block mixed to mono, as the whole file would be (see `to_mono`)."""
    return to_mono(np.ascontiguousarray(block))


def write_wav(path: str | os.PathLike, samples: np.ndarray, sample_rate: int, subtype: str = "PCM_16") -> Path:
    """Write `samples` (`(n,)` or `(n, channels)`) as a WAV file, atomically (temp file + rename).

    `subtype` is a libsndfile subtype ("PCM_16" as `soundfile.write` picks for WAV by default,
    "FLOAT" to keep float32 bits). Returns the final path.
    """
    path = Path(path)
    samples = np.asarray(samples)
    if samples.ndim not in (1, 2) or samples.shape[0] == 0:
        raise AudioError(f"write_wav needs (n,) or (n, channels) samples, got shape {samples.shape}")
    if int(sample_rate) <= 0:
        raise AudioError(f"sample rate must be positive, got {sample_rate}")
    with atomic_file(path) as f:
        sf.write(f, samples, int(sample_rate), format="WAV", subtype=subtype)
    return path


# ---------------------------------------------------------------------------------------------
# arrays, mono, checks


def _from_array(arr: np.ndarray, sample_rate) -> tuple[np.ndarray, int]:
    """Mirror upstream's `(np.ndarray, sr)` branch: cast to float32 first, then average channels."""
    y = array_frames(arr)
    if y.ndim == 2:
        y = np.mean(y, axis=-1).astype(np.float32)  # (n,)
    try:
        sr = int(sample_rate)
    except (TypeError, ValueError) as exc:
        raise AudioError(f"invalid sample rate: {sample_rate!r}") from exc
    return y, check_sample_rate(sr)


def _checked(y: np.ndarray, sr: int) -> tuple[np.ndarray, int]:
    """Refuse audio a voice clone cannot use."""
    if y.size == 0:
        raise AudioError("audio has no samples (empty or zero-length)")
    if not np.isfinite(y).all():
        raise AudioError("audio contains NaN or infinite samples")
    if not np.any(y):
        raise AudioError("audio is all silence (every sample is zero)")
    return y, sr
