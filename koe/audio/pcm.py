"""Integer PCM audio as pydub and audioop handle it, for bit-exact ports of code built on them.

`Pcm` is pydub's `AudioSegment` as an integer array `(frames, channels)` with its frame rate and
sample width: millisecond positions become frames as pydub computes them (`int(ms * (rate /
1000.0))`, lengths `round(1000 * frames / rate)`, slices capped at the length and zero-filled when
the rounded length runs past the data). `ratecv` and `lin2lin` are `audioop`'s, vectorised;
`converted` is pydub's `_sync` of one segment; `parse_wav` is pydub's own RIFF reader (integer
PCM; 8-bit made signed, 24-bit kept for `widen_24_bit`); `pcm16_from_float` is how libsndfile
stores float samples as PCM_16, `pcm_from_decoded` how ffmpeg converts float to s16 / s32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from koe.audio.errors import AudioError

__all__ = [
    "SILENT_RATE",
    "Pcm",
    "concat",
    "converted",
    "int24",
    "lin2lin",
    "ms_of",
    "parse_wav",
    "pcm16_from_float",
    "pcm_from_decoded",
    "ratecv",
    "silent",
    "sync_params",
    "widen_24_bit",
]

SILENT_RATE = 11025  # AudioSegment.silent's default frame rate (16-bit mono)


@dataclass(frozen=True)
class Pcm:
    """Integer samples `(frames, channels)` int64 with pydub's frame rate and sample width (bytes)."""

    data: np.ndarray
    rate: int
    width: int

    @property
    def channels(self) -> int:
        return self.data.shape[1]

    @property
    def frames(self) -> int:
        return self.data.shape[0]

    def ms(self) -> int:
        """pydub's `len()`: `round(1000 * (frames / rate))` (Python's round: half to even)."""
        return ms_of(self.frames, self.rate)

    def frame_at(self, ms: int) -> int:
        """pydub's `_parse_position` for `0 <= ms`: `int(ms * (rate / 1000.0))`."""
        return int(ms * (self.rate / 1000.0))

    def slice_ms(self, start: int | None = None, end: int | None = None) -> Pcm:
        """pydub's `segment[start:end]` (non-negative positions)."""
        length = self.ms()
        start = min(0 if start is None else start, length)
        end = min(length if end is None else end, length)
        a, b = self.frame_at(start), self.frame_at(end)
        data = self.data[a:b]
        missing = (b - a) - data.shape[0]
        if missing > 0 and data.shape[0]:
            # the rounded length runs past the data: pydub fills the end with silence
            data = np.concatenate([data, np.zeros((missing, self.channels), dtype=np.int64)])
        return Pcm(data, self.rate, self.width)

    def max_amplitude(self) -> float:
        return float(2 ** (self.width * 8)) / 2


def ms_of(frames: int, rate: int) -> int:
    return round(1000 * (float(frames) / rate))


def silent(duration_ms: int) -> Pcm:
    """`AudioSegment.silent(duration)`: 16-bit mono zeros at 11025 Hz, `int(11025 * (ms / 1000.0))` frames."""
    frames = int(SILENT_RATE * (duration_ms / 1000.0))
    return Pcm(np.zeros((frames, 1), dtype=np.int64), SILENT_RATE, 2)


def ratecv(data: np.ndarray, width: int, in_rate: int, out_rate: int) -> np.ndarray:
    """`audioop.ratecv(data, width, channels, in_rate, out_rate, None)` (weights 1, 0), vectorised.

    audioop walks a phase `d` that starts at `-out` (rates divided by their gcd): each input frame
    adds `out`, each output frame subtracts `in`. Output j therefore takes input frame
    `i = ceil(j * in / out)` as `cur` (frame i - 1, or 0 before the first, as `prev`) at phase
    `d = i * out - j * in`, and is `int((prev * d + cur * (out - d)) / out)` in doubles, on samples
    scaled to 32 bits (`<< (32 - 8 * width)`) and shifted back (`>>`, rounding down). There are
    `(frames - 1) * out // in + 1` outputs.
    """
    frames = data.shape[0]
    if frames == 0:
        return data
    g = math.gcd(in_rate, out_rate)
    num, den = in_rate // g, out_rate // g  # in, out
    shift = 32 - 8 * width
    n_out = (frames - 1) * den // num + 1
    j = np.arange(n_out, dtype=np.int64)
    cur_i = (j * num + den - 1) // den
    d = (cur_i * den - j * num).astype(np.float64)[:, None]
    scaled = data.astype(np.int64) << shift
    cur = scaled[cur_i].astype(np.float64)
    prev = np.where((cur_i > 0)[:, None], scaled[np.maximum(cur_i - 1, 0)], 0).astype(np.float64)
    mixed = np.trunc((prev * d + cur * (den - d)) / den).astype(np.int64)
    return mixed >> shift


def lin2lin(data: np.ndarray, width: int, new_width: int) -> np.ndarray:
    """`audioop.lin2lin`: through 32-bit scaling (`<<` up, `>>` down: rounds toward minus infinity)."""
    scaled = data.astype(np.int64) << (32 - 8 * width)
    return scaled >> (32 - 8 * new_width)


def converted(seg: Pcm, channels: int, rate: int, width: int) -> Pcm:
    """pydub's `_sync` for one segment: `set_channels`, then `set_frame_rate`, then `set_sample_width`."""
    data = seg.data
    if channels != seg.channels:
        if seg.channels != 1:
            raise AudioError(f"cannot convert {seg.channels}-channel audio to {channels} channels")
        data = np.repeat(data, channels, axis=1)  # tostereo(1, 1) / from_mono_audiosegments: copies
    if rate != seg.rate and data.shape[0]:
        data = ratecv(data, seg.width, seg.rate, rate)
    if width != seg.width:
        data = lin2lin(data, seg.width, width)
    return Pcm(data, rate, width)


def sync_params(*segs: Pcm) -> tuple[int, int, int]:
    return max(s.channels for s in segs), max(s.rate for s in segs), max(s.width for s in segs)


def concat(pieces: list[Pcm], channels: int, rate: int, width: int) -> Pcm:
    if not pieces:
        return Pcm(np.zeros((0, channels), dtype=np.int64), rate, width)
    return Pcm(np.concatenate([p.data for p in pieces]), rate, width)


def parse_wav(data: bytes) -> Pcm | None:
    """pydub's `read_wav_audio` for integer PCM WAV; None for anything it would hand to ffmpeg.

    Walks at most 10 sub-chunks from byte 12 (no pad bytes, as pydub walks), takes the first
    `fmt ` and the `data` chunk (cut to what the file holds). Format 1, or WAVE_FORMAT_EXTENSIBLE
    with a PCM sub-format, at 8/16/24/32 bits. A float sub-format in an extensible header, which
    pydub would misread as integers, is left to the float path instead.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    chunks: list[tuple[bytes, int, int]] = []
    pos = 12
    while pos + 8 <= len(data) and len(chunks) < 10:
        chunk_id = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        chunks.append((chunk_id, pos, size))
        if chunk_id == b"data":
            break
        pos += size + 8
    fmt = [c for c in chunks if c[0] == b"fmt "]
    if not fmt or fmt[0][2] < 16 or not chunks or chunks[-1][0] != b"data":
        return None
    f = fmt[0][1] + 8
    audio_format = int.from_bytes(data[f : f + 2], "little")
    if audio_format == 0xFFFE and fmt[0][2] >= 40:
        audio_format = int.from_bytes(data[f + 24 : f + 26], "little")  # sub-format GUID's first field
    if audio_format not in (1, 0xFFFE):
        return None
    channels = int.from_bytes(data[f + 2 : f + 4], "little")
    rate = int.from_bytes(data[f + 4 : f + 8], "little")
    bits = int.from_bytes(data[f + 14 : f + 16], "little")
    width = bits // 8
    if channels < 1 or rate < 1 or width not in (1, 2, 3, 4):
        raise AudioError(f"unsupported WAV: {channels} channels, {rate} Hz, {bits} bits per sample")
    start = chunks[-1][1] + 8
    raw = data[start : start + chunks[-1][2]]
    frames = len(raw) // (width * channels)
    raw = np.frombuffer(raw, dtype=np.uint8, count=frames * width * channels)
    if width == 1:
        samples = raw.astype(np.int64) - 128  # unsigned in WAV; pydub biases to signed
    elif width == 2:
        samples = raw.view("<i2").astype(np.int64)
    elif width == 4:
        samples = raw.view("<i4").astype(np.int64)
    else:
        samples = int24(raw)
    return Pcm(samples.reshape(frames, channels), rate, width)


def int24(raw: np.ndarray) -> np.ndarray:
    """Little-endian signed 24-bit samples from bytes."""
    b = raw.reshape(-1, 3).astype(np.int64)
    value = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
    return np.where(value >= 1 << 23, value - (1 << 24), value)


def widen_24_bit(seg: Pcm) -> Pcm:
    """pydub's 24 -> 32-bit conversion: a sign-fill byte below each sample, `v * 256 + (255 if v < 0 else 0)`."""
    return Pcm(seg.data * 256 + np.where(seg.data < 0, 255, 0), seg.rate, 4)


def pcm16_from_float(samples: np.ndarray) -> np.ndarray:
    """Float samples to int16 as `soundfile.write(..., subtype="PCM_16")` stores them (libsndfile 1.2).

    libsndfile scales to 32 bits with clipping, `clip(rint(x * 2**31))` (in the array's precision;
    exact for float32), and keeps the top 16 bits (`>> 16`, i.e. rounding down). So 0.5 -> 16384,
    1.0 -> 32767, -1.0 -> -32768.
    """
    scaled = np.rint(np.asarray(samples).astype(np.float64) * 2.0**31)
    scaled = np.clip(scaled, -(2.0**31), 2.0**31 - 1).astype(np.int64)
    return (scaled >> 16).astype(np.int16)


def pcm_from_decoded(samples: np.ndarray, float_source: bool) -> tuple[np.ndarray, int]:
    """Decoded float audio to the integers ffmpeg would hand pydub: 32-bit for float WAV, else 16-bit.

    ffmpeg converts float to s16 as `clip(lrintf(x * 32768))` and to s32 as `clip(llrintf(x * 2**31))`.
    """
    x = samples.astype(np.float64)
    if float_source:
        return np.clip(np.rint(x * 2.0**31), -(2.0**31), 2.0**31 - 1).astype(np.int64), 4
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype(np.int64), 2
