"""Decoding audio files, bounded: the part koe's audio loaders share.

`koe.audio.io.load_audio`, VoxCPM's prompt loader and F5-TTS's reference loader decode a file the
same way: two cheap checks for a file cut short (a WAV data chunk that runs past the end, an Ogg
stream without its end page), then libsndfile (through soundfile) for every format it reads, PyAV
(FFmpeg) for the rest. This module is that shared part, with a bound.

Given `max_seconds`, a decoder never holds more than that much audio plus one block: a small file
that expands to hours of samples (a "decompression bomb": an hour of a tone is ~500 KB of FLAC and
635 MB of float32) is refused after decoding at most `max_seconds` of it. Two layers:

* the header refuses early: libsndfile's frame count, or the audio stream's duration in MP4/MOV and
  Matroska/WebM (containers that store it; FFmpeg only guesses it for ADTS, MP3 and the like).
  Headers can lie or say nothing (a FLAC stream of unknown length, a streaming WAV's 0xFFFFFFFF
  sizes, an MP3 without a Xing header), so this is only the early exit;
* the decode itself runs in blocks and stops one frame past `max_seconds`: that is the bound.

Always refused: sample rates outside `MIN_SAMPLE_RATE`..`MAX_SAMPLE_RATE` and more than
`MAX_CHANNELS` channels (both multiply the memory a second of audio takes); with a bound, more than
`MAX_HELD_SAMPLES` decoded samples held at once (frames x channels kept; a loader that mixes to
mono block by block keeps one channel).

Exactness: reading libsndfile in blocks gives the same float32 samples as soundfile's one-call
`read()` (what librosa.load does) for every format, mp3 and ogg included, because the blocks are
read with libsndfile's `sf_readf_float` directly. soundfile's `read()` seeks to the current position
after every call, and libsndfile's MP3 and Opus decoders decode differently after a seek, so
calling `read()` per block would change the samples. A loader's per-block step (`reduce`: the
channel mean, a rounding) must work column by column, so that doing it per block gives what doing
it on the whole array gives.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import av
import numpy as np
import soundfile as sf

from koe.audio.errors import AudioError, AudioTooLong

__all__ = [
    "MAX_CHANNELS",
    "MAX_CHANNELS_FIRST",
    "MAX_CLIP_SECONDS",
    "MAX_HELD_SAMPLES",
    "MAX_SAMPLE_RATE",
    "MIN_SAMPLE_RATE",
    "EncodedAudio",
    "Reduce",
    "array_frames",
    "check_channels",
    "check_complete",
    "check_sample_rate",
    "decode",
    "decode_pyav",
    "frame_limit",
    "frame_to_float",
    "header_frames",
    "int_pcm_to_float",
    "open_soundfile",
    "read_soundfile",
    "to_mono",
]

# 8 kHz is narrowband telephone speech, the lowest rate speech is recorded at; 384 kHz the highest
# rate audio interfaces and formats commonly use. Outside them a "clip" is a mislabelled file (a
# 5-sample clip "at 1 Hz" is not 5 s of speech) or a way to multiply memory.
MIN_SAMPLE_RATE = 8_000
MAX_SAMPLE_RATE = 384_000
MAX_CHANNELS = 64  # 7th-order ambisonics; 22.2 surround is 24
MAX_CHANNELS_FIRST = 16  # a 2-D array (c, n) with c <= this < n is taken as channels first
MAX_CLIP_SECONDS = 600.0  # the longest clip any loader decodes when its caller sets no tighter bound (engine APIs)
MAX_HELD_SAMPLES = 1 << 25  # ~33.5 M samples (128 MiB of float32): 30 s of 96 kHz 8-channel audio fits
BLOCK_SAMPLES = 1 << 17  # interleaved samples per libsndfile read (512 KiB of float32)
PROBE_BYTES = 1 << 16  # how much of a file's start and end the truncation checks look at

# libsndfile's error code for a file it recognises but finds malformed (e.g. cut short).
SF_ERR_MALFORMED_FILE = 3
# Lossy decoders estimate the frame count from headers/bitrate; a shortfall above this is truncation.
FRAME_SHORTFALL_SAMPLES = 2304
FRAME_SHORTFALL_FRACTION = 0.01
_SF_COUNT_MAX = 2**63 - 1  # libsndfile's frame count for a stream of unknown length
# PyAV demuxers whose audio duration comes from the container's index, not a bitrate guess
_INDEXED_CONTAINERS = ("mov", "matroska")
_DURATION_SLACK_S = 0.1

Reduce = Callable[[np.ndarray], np.ndarray]
"""A per-block step on decoded `(frames,)` / `(frames, channels)` float32, column by column."""

_PYAV_ERRORS = (av.error.FFmpegError, OSError, ValueError)


@dataclass(frozen=True)
class EncodedAudio:
    """An audio file to decode: its path or bytes, its size, and its first and last bytes."""

    name: str
    size: int
    head: bytes
    tail: bytes
    source: str | bytes  # a path (opened by name, as upstream does) or the file's bytes

    @classmethod
    def from_path(cls, path: str | Path) -> EncodedAudio:
        """A file on disk; only its first and last `PROBE_BYTES` are read here."""
        path = Path(path)
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(PROBE_BYTES)
            f.seek(max(0, size - PROBE_BYTES))
            tail = f.read(PROBE_BYTES)
        return cls(str(path), size, head, tail, str(path))

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> EncodedAudio:
        """A file's bytes, already in memory."""
        return cls(name, len(data), data[:PROBE_BYTES], data[-PROBE_BYTES:], data)

    @classmethod
    def read(cls, source: Any, what: str = "audio") -> EncodedAudio:
        """A whole file in memory, from a path, its bytes or a binary file object (read to its end).
        `AudioError` for a missing or empty file or another kind of `source` (named as `what`)."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            data, name = bytes(source), "<bytes>"
        elif isinstance(source, (str, os.PathLike)):
            path = Path(source)
            if not path.is_file():
                raise AudioError(f"no such audio file: {path}")
            data, name = path.read_bytes(), str(path)
        elif hasattr(source, "read"):
            data, name = source.read(), str(getattr(source, "name", "<file object>"))
            if not isinstance(data, (bytes, bytearray)):
                raise AudioError("an audio file object must be opened in binary mode")
            data = bytes(data)
        else:
            raise AudioError(f"unsupported {what} source type: {type(source).__name__}")
        if not data:
            raise AudioError(f"audio file is empty: {name}")
        return cls.from_bytes(data, name)

    def open(self) -> str | BinaryIO:
        """What soundfile and PyAV open: the path, or a fresh reader over the bytes."""
        return self.source if isinstance(self.source, str) else io.BytesIO(self.source)


# ---------------------------------------------------------------------------------------------
# checks


def check_sample_rate(rate: int, name: str | None = None) -> int:
    """`rate` if koe accepts it (`MIN_SAMPLE_RATE`..`MAX_SAMPLE_RATE` Hz), else `AudioError`."""
    where = f": {name}" if name else ""
    if rate <= 0:
        raise AudioError(f"sample rate must be positive, got {rate}{where}")
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise AudioError(f"sample rate {rate} Hz is not supported{where} (koe reads {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz audio)")
    return rate


def check_channels(channels: int, name: str | None = None) -> int:
    """`channels` if koe accepts it (1..`MAX_CHANNELS`), else `AudioError`."""
    where = f": {name}" if name else ""
    if channels < 1:
        raise AudioError(f"audio has no channels{where}")
    if channels > MAX_CHANNELS:
        raise AudioError(f"audio has {channels} channels{where}; at most {MAX_CHANNELS} are supported")
    return channels


def frame_limit(max_seconds: float, rate: int) -> int:
    """The most frames `max_seconds` allows at `rate`: `n` frames fit iff `n <= max_seconds * rate`."""
    return math.floor(max_seconds * rate)


def check_complete(enc: EncodedAudio) -> None:
    """Refuse a WAV whose data chunk runs past the end, or an Ogg stream without its end page.

    Both decoders would quietly return what is there, so the cut would go unnoticed.
    """
    if _riff_data_truncated(enc.head, enc.size):
        raise AudioError(f"audio file is truncated (WAV data chunk runs past the end): {enc.name}")
    if enc.head[:4] == b"OggS" and _ogg_truncated(enc.tail):
        raise AudioError(f"audio file is truncated (Ogg stream has no complete end page): {enc.name}")


def _riff_data_truncated(head: bytes, total_size: int) -> bool:
    """True if a RIFF/WAVE header declares more data than the file holds.

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


def _shortfall_allowance(expected: int) -> float:
    """How far a lossy decoder may fall short of its header's (estimated) frame count."""
    return max(FRAME_SHORTFALL_SAMPLES, FRAME_SHORTFALL_FRACTION * expected)


# ---------------------------------------------------------------------------------------------
# what the decoders hold


class _Held:
    """Decoded blocks as they arrive, within the bound; `reduce` applied to each.

    With `max_seconds`, at most `frame_limit(max_seconds, rate)` frames are kept: one more is
    `AudioTooLong`, or with `trim` the frames past it are dropped and decoding stops.
    """

    def __init__(self, name: str, rate: int, channels: int, max_seconds: float | None, reduce: Reduce | None, trim: bool):
        self.name, self.rate, self.channels = name, rate, channels
        self.max_seconds, self.reduce, self.trim = max_seconds, reduce, trim
        self.limit = None if max_seconds is None else frame_limit(max_seconds, rate)
        self.pieces: list[np.ndarray] = []
        self.frames = 0
        self.samples = 0

    def room(self) -> int | None:
        """Frames still worth decoding: up to the limit when trimming, one past it otherwise (None: no bound)."""
        if self.limit is None:
            return None
        return self.limit + (0 if self.trim else 1) - self.frames

    @property
    def full(self) -> bool:
        """True once a trimmed decode holds `max_seconds` of audio."""
        return self.limit is not None and self.trim and self.frames >= self.limit

    def add(self, block: np.ndarray, header_seconds: float | None = None) -> None:
        """Keep `block` (`(n,)` or `(n, channels)` float32), or refuse it if it passes the bound.

        `header_seconds`: the length the header claims, named in the refusal where it is over the bound.
        """
        n = block.shape[0]
        if self.limit is not None and self.frames + n > self.limit:
            if not self.trim:
                known = header_seconds if header_seconds is not None and header_seconds > self.max_seconds else None
                raise AudioTooLong(self.max_seconds, known)
            block = block[: self.limit - self.frames]
            n = block.shape[0]
        if n == 0:
            return
        piece = block if self.reduce is None else self.reduce(block)
        self.samples += piece.size
        if self.limit is not None and self.samples > MAX_HELD_SAMPLES:
            raise AudioError(
                f"audio is too large to decode: {self.channels} channels at {self.rate} Hz pass {MAX_HELD_SAMPLES} samples "
                f"within {self.max_seconds:g} s: {self.name}"
            )
        self.pieces.append(piece)
        self.frames += n

    def result(self, empty: np.ndarray) -> np.ndarray:
        """Everything kept, in order (`empty`, reduced, when nothing was)."""
        if not self.pieces:
            return empty if self.reduce is None else self.reduce(empty)
        if len(self.pieces) == 1:
            return self.pieces[0]
        return np.concatenate(self.pieces, axis=0)


# ---------------------------------------------------------------------------------------------
# libsndfile


def open_soundfile(enc: EncodedAudio) -> sf.SoundFile | None:
    """The file opened by libsndfile; None when libsndfile does not read its format.

    A file libsndfile recognises but finds malformed raises `AudioError`.
    """
    try:
        return sf.SoundFile(enc.open())
    except sf.LibsndfileError as exc:
        if exc.code == SF_ERR_MALFORMED_FILE:
            raise AudioError(f"audio file is malformed or truncated: {enc.name} ({exc.error_string})") from exc
        return None


def header_frames(f: sf.SoundFile) -> int | None:
    """libsndfile's frame count from the header (exact for PCM and FLAC, estimated for lossy codecs); None if unknown."""
    frames = int(f.frames)
    return None if frames < 0 or frames >= _SF_COUNT_MAX else frames


def read_soundfile(f: sf.SoundFile, name: str, *, max_seconds: float | None = None, reduce: Reduce | None = None, trim: bool = False) -> np.ndarray:
    """Read an open file as float32 `(frames,)` (mono) or `(frames, channels)`, `reduce`d block by block.

    The samples are those of soundfile's `f.read(dtype="float32", always_2d=False)`, which reads
    the header's frame count; a stream of unknown length is read to its end (soundfile can't).
    `max_seconds`: refuse longer audio (`AudioTooLong`) from the header where it says so, else once
    decoding passes it; with `trim`, keep the first `max_seconds` instead. A read error, or a lossy
    stream that falls well short of its header's count, is truncation (`AudioError`).
    """
    rate = check_sample_rate(int(f.samplerate), name)
    channels = check_channels(int(f.channels), name)
    expected = header_frames(f)
    held = _Held(name, rate, channels, max_seconds, reduce, trim)
    header_seconds = None if expected is None else expected / rate
    if held.limit is not None and not trim and expected is not None and expected - _shortfall_allowance(expected) > held.limit:
        raise AudioTooLong(max_seconds, header_seconds)
    block_frames = max(1, BLOCK_SAMPLES // channels)
    total = 0
    while True:
        want = block_frames if expected is None else min(block_frames, expected - total)
        room = held.room()
        if room is not None:
            want = min(want, room)
        if want <= 0:
            break
        block = np.empty((want, channels), dtype=np.float32)
        got = _readf_float(f, block, want, name)
        total += got
        held.add(block[:got, 0] if channels == 1 else block[:got], header_seconds)
        if got < want:
            break
    if expected is not None and not held.full and expected - total > _shortfall_allowance(expected):
        raise AudioError(f"audio file is truncated: {name} (header says {expected} frames, decoded {total})")
    empty = np.zeros((0,) if channels == 1 else (0, channels), dtype=np.float32)
    return held.result(empty)


def _readf_float(f: sf.SoundFile, out: np.ndarray, frames: int, name: str) -> int:
    """libsndfile's `sf_readf_float` into `out` (C-contiguous `(frames, channels)` float32).

    soundfile's `read()` would seek to the current position after the call; that seek restarts
    libsndfile's MP3 and Opus decoders and changes what the next block decodes to.
    """
    lib, ffi = sf._snd, sf._ffi
    got = lib.sf_readf_float(f._file, ffi.cast("float *", ffi.from_buffer(out)), frames)
    err = lib.sf_error(f._file)
    if err:
        raise AudioError(f"audio file is truncated or corrupt: {name} ({sf.LibsndfileError(err).error_string})")
    return int(got)


# ---------------------------------------------------------------------------------------------
# PyAV (FFmpeg)


def decode_pyav(enc: EncodedAudio, *, max_seconds: float | None = None, reduce: Reduce | None = None, trim: bool = False) -> tuple[np.ndarray, int]:
    """Decode the first audio stream with PyAV to float32 `(frames, channels)` (`reduce`d frame by frame) and its rate.

    `max_seconds` and `trim` as for `read_soundfile`; the header check uses the stream's duration
    only in containers that index it (MP4/MOV, Matroska/WebM). Raises `AudioError` for unreadable
    or corrupt files, no audio, a sample rate or channel count that changes inside the stream.
    """
    try:
        container = av.open(enc.open(), mode="r")
    except _PYAV_ERRORS as exc:
        raise AudioError(f"not a readable audio file: {enc.name} ({exc})") from exc
    with container:
        if not container.streams.audio:
            raise AudioError(f"file has no audio stream: {enc.name}")
        stream = container.streams.audio[0]
        ctx = stream.codec_context
        if ctx.sample_rate:
            check_sample_rate(int(ctx.sample_rate), enc.name)
        if ctx.channels:
            check_channels(int(ctx.channels), enc.name)
        seconds = _indexed_seconds(container, stream)
        if max_seconds is not None and not trim and seconds is not None and seconds - max(_DURATION_SLACK_S, 0.01 * seconds) > max_seconds:
            raise AudioTooLong(max_seconds, seconds)
        held: _Held | None = None
        frames = container.decode(stream)
        while held is None or not held.full:
            try:
                frame = next(frames)
            except StopIteration:
                break
            except _PYAV_ERRORS as exc:
                raise AudioError(f"audio file is truncated or corrupt: {enc.name} ({exc})") from exc
            rate, channels = int(frame.sample_rate), len(frame.layout.channels)
            if held is None:
                held = _Held(enc.name, check_sample_rate(rate, enc.name), check_channels(channels, enc.name), max_seconds, reduce, trim)
            elif rate != held.rate:
                raise AudioError(f"sample rate changes inside the file: {enc.name}")
            elif channels != held.channels:
                raise AudioError(f"channel count changes inside the file: {enc.name}")
            held.add(frame_to_float(frame), seconds)
    if held is None or held.frames == 0:
        raise AudioError(f"audio file has no samples: {enc.name}")
    return held.result(np.zeros((0, held.channels), dtype=np.float32)), held.rate


def _indexed_seconds(container, stream) -> float | None:
    """The audio stream's duration where the container indexes it (None where FFmpeg would only guess)."""
    if not container.format.name.startswith(_INDEXED_CONTAINERS):
        return None
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / av.time_base
    return None


def frame_to_float(frame: av.AudioFrame) -> np.ndarray:
    """One decoded frame as C-contiguous float32 `(samples, channels)`; integer PCM scaled as libsndfile does."""
    fmt = frame.format
    arr = frame.to_ndarray()  # planar: (channels, n); packed: (1, n * channels)
    channels = len(frame.layout.channels)
    if fmt.is_planar:
        arr = arr.T  # (n, channels)
    else:
        arr = arr.reshape(-1, channels)  # (n, channels)
    base = fmt.name.rstrip("p")
    if base in ("flt", "dbl"):
        out = arr.astype(np.float32)
    elif base == "s16":
        out = (arr.astype(np.float32) * np.float32(1.0 / 32768.0)).astype(np.float32)
    elif base == "s32":
        out = (arr.astype(np.float64) / 2147483648.0).astype(np.float32)
    elif base == "u8":
        out = ((arr.astype(np.float32) - 128.0) / 128.0).astype(np.float32)
    else:
        raise AudioError(f"unsupported decoded sample format: {fmt.name}")
    return np.ascontiguousarray(out)


# ---------------------------------------------------------------------------------------------
# both


def decode(enc: EncodedAudio, *, max_seconds: float | None = None, reduce: Reduce | None = None, trim: bool = False) -> tuple[np.ndarray, int]:
    """Decode a file as koe.audio.io does: the truncation checks, libsndfile, else PyAV.

    Returns float32 `(frames,)` (mono, libsndfile) or `(frames, channels)`, `reduce`d per block,
    and the sample rate. `max_seconds` / `trim` as for `read_soundfile`.
    """
    check_complete(enc)
    f = open_soundfile(enc)
    if f is None:
        return decode_pyav(enc, max_seconds=max_seconds, reduce=reduce, trim=trim)
    with f:
        return read_soundfile(f, enc.name, max_seconds=max_seconds, reduce=reduce, trim=trim), int(f.samplerate)


# ---------------------------------------------------------------------------------------------
# samples


def to_mono(frames: np.ndarray) -> np.ndarray:
    """`(n,)` or `(n, channels)` float32 -> `(n,)` float32, as librosa.load(mono=True) averages.

    Column by column, so it may run per block of a C-contiguous `(n, channels)` array.
    """
    if frames.ndim == 1:
        return frames.astype(np.float32, copy=False)
    by_channel = frames.T  # (channels, n), the layout librosa averages over
    return np.mean(by_channel, axis=0).astype(np.float32)


def array_frames(arr: np.ndarray) -> np.ndarray:
    """A waveform array as a decoder gives it: float32 `(n,)` or `(n, channels)`.

    Integer PCM is scaled to [-1, 1) (`int_pcm_to_float`), other floats cast to float32; a
    `(channels, n)` array with at most `MAX_CHANNELS_FIRST` channels and more samples is turned to
    `(n, channels)`. `AudioError` for other shapes and dtypes, no channels or too many.
    """
    if arr.ndim not in (1, 2):
        raise AudioError(f"waveform must be (n,) or (n, channels), got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.integer):
        arr = int_pcm_to_float(arr)
    elif not np.issubdtype(arr.dtype, np.floating):
        raise AudioError(f"waveform dtype {arr.dtype} is not a number type")
    y = arr.astype(np.float32)
    if y.ndim == 2:
        if y.shape[0] <= MAX_CHANNELS_FIRST < y.shape[1]:
            y = y.T  # (channels, n) given; view as (n, channels)
        if y.shape[1] == 0:
            raise AudioError("waveform has zero channels")
        check_channels(y.shape[1])
    return y


def int_pcm_to_float(arr: np.ndarray) -> np.ndarray:
    """Integer PCM to float64 in [-1, 1) (signed: / 2**(bits-1); unsigned: centred first)."""
    info = np.iinfo(arr.dtype)
    if info.min < 0:
        return arr.astype(np.float64) / float(-info.min)
    half = (info.max + 1) / 2
    return (arr.astype(np.float64) - half) / half
