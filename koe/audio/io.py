"""Reading reference audio (any common format) into float32 mono, and writing WAV files.

Upstream qwen-tts reads a local path with `librosa.load(path, sr=None, mono=True)`, which opens it
with soundfile (libsndfile) as float32 `(frames, channels)`, transposes to `(channels, frames)` and
averages over the channel axis in float32. `load_audio` does the same for every format libsndfile
reads (wav, flac, ogg/vorbis, ogg/opus, mp3, aiff, ...), so those samples are upstream's bits; other
containers (m4a/aac, webm, ...) are decoded with PyAV (FFmpeg). Beyond upstream, it refuses audio a
voice clone cannot use: empty, truncated, non-finite or all-silent input raises `AudioError`.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Union

import av
import numpy as np
import soundfile as sf

from koe.audio.errors import AudioError

__all__ = ["AudioSource", "load_audio", "write_wav"]

AudioSource = Union[str, os.PathLike, bytes, bytearray, memoryview, np.ndarray, tuple]

# libsndfile's error code for a file it recognises but finds malformed (e.g. cut short).
_SF_ERR_MALFORMED_FILE = 3
# Lossy decoders estimate the frame count from headers/bitrate; a shortfall above this is truncation.
_FRAME_SHORTFALL_SAMPLES = 2304
_FRAME_SHORTFALL_FRACTION = 0.01
_PROBE_BYTES = 1 << 16  # how much of the start and end of a file the truncation checks look at


def load_audio(source: AudioSource, sample_rate: int | None = None, *, max_seconds: float | None = None) -> tuple[np.ndarray, int]:
    """Load audio as `(samples, sample_rate)`: float32, mono, shape `(n,)`, at its native rate.

    `source` is a file path, the bytes of an audio file, a `(array, sample_rate)` tuple, or an
    array with `sample_rate` given. Arrays are `(n,)` or `(n, channels)` (a `(channels, n)` array
    with at most 16 channels is also accepted); integer PCM arrays are scaled to [-1, 1) (upstream
    would only cast them). Multi-channel audio is averaged in float32 as upstream does. Raises
    `AudioError` for missing, non-audio, empty, truncated, non-finite or all-silent input, and
    (`max_seconds` given) for audio longer than `max_seconds`.
    """
    y, sr = _load(source, sample_rate)
    if max_seconds is not None and len(y) > max_seconds * sr:
        raise AudioError(f"audio is {len(y) / sr:.1f} s long; at most {max_seconds:g} s is allowed")
    return y, sr


def _load(source: AudioSource, sample_rate: int | None) -> tuple[np.ndarray, int]:
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
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not data:
            raise AudioError("audio bytes are empty")
        frames_nc, sr = _decode(lambda: io.BytesIO(data), data[:_PROBE_BYTES], data[-_PROBE_BYTES:], len(data), "<bytes>")
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise AudioError(f"no such audio file: {path}")
        size = path.stat().st_size
        if size == 0:
            raise AudioError(f"audio file is empty: {path}")
        with open(path, "rb") as f:
            head = f.read(_PROBE_BYTES)
            f.seek(max(0, size - _PROBE_BYTES))
            tail = f.read(_PROBE_BYTES)
        frames_nc, sr = _decode(lambda: str(path), head, tail, size, str(path))
    else:
        raise AudioError(f"unsupported audio source type: {type(source).__name__}")
    return _checked(_to_mono(frames_nc), sr)


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            sf.write(f, samples, int(sample_rate), format="WAV", subtype=subtype)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


# ---------------------------------------------------------------------------------------------
# decoding


def _decode(open_src, head: bytes, tail: bytes, total_size: int, name: str) -> tuple[np.ndarray, int]:
    """Decode a file to `(frames, channels)` float32 (or `(frames,)` for mono) and its rate."""
    if _riff_data_truncated(head, total_size):
        raise AudioError(f"audio file is truncated (WAV data chunk runs past the end): {name}")
    if head[:4] == b"OggS" and _ogg_truncated(tail):
        raise AudioError(f"audio file is truncated (Ogg stream has no complete end page): {name}")
    decoded = _decode_soundfile(open_src(), name)
    if decoded is None:
        decoded = _decode_av(open_src(), name)
    return decoded


def _decode_soundfile(src: str | BinaryIO, name: str) -> tuple[np.ndarray, int] | None:
    """Read with libsndfile as upstream (via librosa) does; None when libsndfile can't open the format."""
    try:
        f = sf.SoundFile(src)
    except sf.LibsndfileError as exc:
        if exc.code == _SF_ERR_MALFORMED_FILE:
            raise AudioError(f"audio file is malformed or truncated: {name} ({exc.error_string})") from exc
        return None
    with f:
        expected = f.frames
        sr = int(f.samplerate)
        try:
            y = f.read(frames=-1, dtype="float32", always_2d=False)  # (n,) or (n, channels)
        except sf.LibsndfileError as exc:
            raise AudioError(f"audio file is truncated or corrupt: {name} ({exc.error_string})") from exc
    shortfall = expected - y.shape[0]
    if shortfall > max(_FRAME_SHORTFALL_SAMPLES, _FRAME_SHORTFALL_FRACTION * expected):
        raise AudioError(f"audio file is truncated: {name} (header says {expected} frames, decoded {y.shape[0]})")
    return y, sr


def _decode_av(src: str | BinaryIO, name: str) -> tuple[np.ndarray, int]:
    """Decode the first audio stream with PyAV (FFmpeg) to `(frames, channels)` float32."""
    try:
        container = av.open(src, mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise AudioError(f"not a readable audio file: {name} ({exc})") from exc
    with container:
        if not container.streams.audio:
            raise AudioError(f"file has no audio stream: {name}")
        stream = container.streams.audio[0]
        chunks: list[np.ndarray] = []
        sr = 0
        try:
            for frame in container.decode(stream):
                sr = int(frame.sample_rate)
                chunks.append(_frame_to_float(frame))
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            raise AudioError(f"audio file is truncated or corrupt: {name} ({exc})") from exc
    if not chunks:
        raise AudioError(f"audio file has no samples: {name}")
    if len({c.shape[1] for c in chunks}) != 1:
        raise AudioError(f"channel count changes inside the file: {name}")
    return np.concatenate(chunks, axis=0), sr


def _frame_to_float(frame: "av.AudioFrame") -> np.ndarray:
    """One decoded frame as float32 `(samples, channels)`; integer PCM scaled as libsndfile does."""
    fmt = frame.format
    arr = frame.to_ndarray()  # planar: (channels, n); packed: (1, n * channels)
    channels = len(frame.layout.channels)
    if fmt.is_planar:
        arr = arr.T  # (n, channels)
    else:
        arr = arr.reshape(-1, channels)  # (n, channels)
    base = fmt.name.rstrip("p")
    if base in ("flt", "dbl"):
        return arr.astype(np.float32)
    if base == "s16":
        return (arr.astype(np.float32) * np.float32(1.0 / 32768.0)).astype(np.float32)
    if base == "s32":
        return (arr.astype(np.float64) / 2147483648.0).astype(np.float32)
    if base == "u8":
        return ((arr.astype(np.float32) - 128.0) / 128.0).astype(np.float32)
    raise AudioError(f"unsupported decoded sample format: {fmt.name}")


def _riff_data_truncated(head: bytes, total_size: int) -> bool:
    """True if a RIFF/WAVE header declares more data than the file holds.

    libsndfile quietly shortens such a file to what is there, so the cut would go unnoticed.
    A data size of 0 or 0xFFFFFFFF (written by streaming writers that never patch it) is accepted.
    """
    if len(head) < 12 or head[8:12] != b"WAVE" or head[:4] not in (b"RIFF", b"RIFX"):
        return False
    order = "little" if head[:4] == b"RIFF" else "big"
    pos = 12
    while pos + 8 <= len(head):
        chunk_id = head[pos : pos + 4]
        size = int.from_bytes(head[pos + 4 : pos + 8], order)
        if chunk_id == b"data":
            if size in (0, 0xFFFFFFFF):
                return False
            return pos + 8 + size > total_size
        pos += 8 + size + (size & 1)
    return False


def _ogg_truncated(tail: bytes) -> bool:
    """True if the last Ogg page is cut short or lacks the end-of-stream flag.

    Ogg has no total length up front: libsndfile and FFmpeg both decode a cut stream up to its last
    whole page without complaint, so the only sign of a cut is a last page that isn't an EOS page.
    """
    start = tail.rfind(b"OggS")
    if start < 0 or len(tail) - start < 27:
        return True
    header_type = tail[start + 5]
    n_segments = tail[start + 26]
    table_end = start + 27 + n_segments
    if table_end > len(tail):
        return True
    page_end = table_end + sum(tail[start + 27 : table_end])
    if page_end > len(tail):
        return True
    return not header_type & 0x04


# ---------------------------------------------------------------------------------------------
# arrays, mono, checks


def _from_array(arr: np.ndarray, sample_rate) -> tuple[np.ndarray, int]:
    """Mirror upstream's `(np.ndarray, sr)` branch: cast to float32 first, then average channels."""
    if arr.ndim == 0 or arr.ndim > 2:
        raise AudioError(f"waveform must be (n,) or (n, channels), got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.integer):
        arr = _int_pcm_to_float(arr)
    elif not np.issubdtype(arr.dtype, np.floating):
        raise AudioError(f"waveform dtype {arr.dtype} is not a number type")
    y = arr.astype(np.float32)
    if y.ndim == 2 and y.shape[0] <= 16 < y.shape[1]:
        y = y.T  # (channels, n) given; view as (n, channels)
    if y.ndim == 2:
        if y.shape[1] == 0:
            raise AudioError("waveform has zero channels")
        y = np.mean(y, axis=-1).astype(np.float32)  # (n,)
    try:
        sr = int(sample_rate)
    except (TypeError, ValueError) as exc:
        raise AudioError(f"invalid sample rate: {sample_rate!r}") from exc
    return _checked(y, sr)


def _int_pcm_to_float(arr: np.ndarray) -> np.ndarray:
    """Integer PCM to float64 in [-1, 1) (signed: / 2**(bits-1); unsigned: centred first)."""
    info = np.iinfo(arr.dtype)
    if info.min < 0:
        return arr.astype(np.float64) / float(-info.min)
    half = (info.max + 1) / 2
    return (arr.astype(np.float64) - half) / half


def _to_mono(frames: np.ndarray) -> np.ndarray:
    """`(n,)` or `(n, channels)` float32 -> `(n,)` float32, as librosa.load(mono=True) averages."""
    if frames.ndim == 1:
        return frames.astype(np.float32, copy=False)
    by_channel = frames.T  # (channels, n), the layout librosa averages over
    return np.mean(by_channel, axis=0).astype(np.float32)


def _checked(y: np.ndarray, sr: int) -> tuple[np.ndarray, int]:
    """Refuse audio a voice clone cannot use."""
    if sr <= 0:
        raise AudioError(f"sample rate must be positive, got {sr}")
    if y.size == 0:
        raise AudioError("audio has no samples (empty or zero-length)")
    if not np.isfinite(y).all():
        raise AudioError("audio contains NaN or infinite samples")
    if not np.any(y):
        raise AudioError("audio is all silence (every sample is zero)")
    return y, sr
