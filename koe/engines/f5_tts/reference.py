"""F5-TTS's reference clip: upstream's preprocessing, sample for sample, without pydub or torchaudio.

Upstream (`f5_tts.infer.utils_infer`, f5-tts 1.1.22) prepares a reference like this:

1. `AudioSegment.from_file(path)`: for a `.wav`, pydub's own RIFF reader (integer PCM; 8-bit made
   signed; 24-bit widened to 32-bit by prepending a sign-fill byte, i.e. `v * 256 + (255 if v < 0
   else 0)`); anything else through ffmpeg.
2. `split_on_silence(min_silence_len=1000, silence_thresh=-50, keep_silence=1000, seek_step=10)`,
   then the pieces are appended until the total would pass 12 s (once past 6 s); if that is still
   over 12 s the same with `(100 ms, -40 dBFS)`; if still over 12 s, a hard cut at 12000 ms.
3. `remove_silence_edges`: `detect_leading_silence(-42 dBFS, 10 ms chunks)` at both ends.
4. `+ AudioSegment.silent(50)`: 50 ms of zeros, made at 11025 Hz 16-bit mono and converted by
   pydub's `_sync` to the clip's channels, rate (`audioop.ratecv`) and sample width. Appending to
   `AudioSegment.silent(0)` in step 2 syncs the other way too: a clip below 11025 Hz is resampled
   piece by piece with `ratecv` to 11025 Hz, and 8-bit audio widened to 16-bit.
5. Export as WAV (the sample width kept: 16 or 32 bit), `torchaudio.load` it (float32
   `int / 2**(bits-1)`, `(channels, frames)`), and in `infer_batch_process` average the channels
   (`torch.mean(dim=0, keepdim=True)`), raise the level to `target_rms` if below it, and resample to
   24 kHz with `torchaudio.transforms.Resample`.

This module reproduces every step on integer sample arrays: millisecond positions become frames as
pydub computes them (`int(ms * (rate / 1000.0))`, lengths `round(1000 * frames / rate)`, slices
capped at the length and zero-filled when the rounded length runs past the data), rms as
`audioop.rms` (`trunc(sqrt(sum of squares / samples))` over all interleaved samples) and the dBFS
comparisons with pydub's own float formulas. Silence is found with prefix sums of squared samples
instead of pydub's window-by-window loop, with the same cut points. For 16-bit (and 8-bit) audio
the prefix sums are exact integers and so equal to audioop's double sums; for 32-bit samples
(24-bit files included) audioop's double sum can round, so a window whose rms sits within rounding
distance of an integer is recomputed the way audioop adds (sequential float64).

Deliberate differences from upstream: a missing transcript is an error (upstream would run Whisper),
and audio that is empty, all silent or too short after trimming is refused instead of becoming a
50 ms clip of silence.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np
import torch

from koe.audio.errors import AudioError
from koe.audio.sinc_resample import resample_sinc
from koe.engines.base import UnsupportedVoice

__all__ = [
    "MIN_REFERENCE_SECONDS",
    "TARGET_SAMPLE_RATE",
    "ReferenceClip",
    "ReferenceSource",
    "fix_transcript",
    "load_reference",
    "model_reference_text",
    "normalised_reference",
    "pcm16_from_float",
    "prepare_reference",
]

TARGET_SAMPLE_RATE = 24000  # F5-TTS's mel rate
MIN_REFERENCE_SECONDS = 0.3  # koe's floor on what is left after silence trimming

# upstream's preprocessing constants (preprocess_ref_audio_text / remove_silence_edges)
_LONG_SILENCE = (1000, -50.0)  # (min_silence_len ms, silence_thresh dBFS), first pass
_SHORT_SILENCE = (100, -40.0)  # second pass, when the first leaves more than 12 s
_KEEP_SILENCE_MS = 1000
_SEEK_STEP_MS = 10
_MAX_MS = 12000
_MIN_MS_BEFORE_STOP = 6000
_EDGE_THRESHOLD_DB = -42.0
_EDGE_CHUNK_MS = 10
_PAD_MS = 50
_SILENT_RATE = 11025  # AudioSegment.silent's default frame rate (16-bit mono)

ReferenceSource = Union[str, os.PathLike, bytes, bytearray, memoryview, tuple]


# ---------------------------------------------------------------------------------------------
# the result


@dataclass(frozen=True)
class ReferenceClip:
    """A reference clip as upstream hands it to the model, before level and rate normalisation.

    `samples`: float32 mono `(n,)` at `sample_rate` (the rate of upstream's temporary WAV: the
    source rate, or 11025 Hz for sources below it); the channel mean of `int / 2**(bits-1)`.
    `text`: the transcript with upstream's ending fix-up. `clip_steps`: which of upstream's three
    12-second clippings fired (1: at a long silence, 2: at a short silence, 3: hard cut), in order.
    `leading_trim_ms` / `trailing_trim_ms`: silence removed at the edges (pydub ms). `seconds` is the
    clip's length including the 50 ms of silence upstream appends; `source_seconds` the input's.
    """

    samples: np.ndarray
    sample_rate: int
    text: str
    channels: int
    sample_width: int
    source_seconds: float
    clip_steps: tuple[int, ...] = ()
    leading_trim_ms: int = 0
    trailing_trim_ms: int = 0

    @property
    def clipped(self) -> bool:
        return bool(self.clip_steps)

    @property
    def seconds(self) -> float:
        return self.samples.shape[0] / self.sample_rate

    @property
    def info(self) -> dict:
        """What preprocessing did, JSON-friendly (for a voice prompt's metadata)."""
        return {
            "source_seconds": round(self.source_seconds, 3),
            "clipped": self.clipped,
            "clip_steps": list(self.clip_steps),
            "leading_trim_ms": self.leading_trim_ms,
            "trailing_trim_ms": self.trailing_trim_ms,
            "channels": self.channels,
            "sample_width": self.sample_width,
        }


# ---------------------------------------------------------------------------------------------
# pydub's AudioSegment, as integer frames


@dataclass(frozen=True)
class _Pcm:
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
        return _ms_of(self.frames, self.rate)

    def frame_at(self, ms: int) -> int:
        """pydub's `_parse_position` for `0 <= ms`: `int(ms * (rate / 1000.0))`."""
        return int(ms * (self.rate / 1000.0))

    def slice_ms(self, start: int | None = None, end: int | None = None) -> "_Pcm":
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
        return _Pcm(data, self.rate, self.width)

    def max_amplitude(self) -> float:
        return float(2 ** (self.width * 8)) / 2


def _ms_of(frames: int, rate: int) -> int:
    return round(1000 * (float(frames) / rate))


def _silent(duration_ms: int) -> _Pcm:
    """`AudioSegment.silent(duration)`: 16-bit mono zeros at 11025 Hz, `int(11025 * (ms / 1000.0))` frames."""
    frames = int(_SILENT_RATE * (duration_ms / 1000.0))
    return _Pcm(np.zeros((frames, 1), dtype=np.int64), _SILENT_RATE, 2)


def _ratecv(data: np.ndarray, width: int, in_rate: int, out_rate: int) -> np.ndarray:
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


def _lin2lin(data: np.ndarray, width: int, new_width: int) -> np.ndarray:
    """`audioop.lin2lin`: through 32-bit scaling (`<<` up, `>>` down: rounds toward minus infinity)."""
    scaled = data.astype(np.int64) << (32 - 8 * width)
    return scaled >> (32 - 8 * new_width)


def _converted(seg: _Pcm, channels: int, rate: int, width: int) -> _Pcm:
    """pydub's `_sync` for one segment: `set_channels`, then `set_frame_rate`, then `set_sample_width`."""
    data = seg.data
    if channels != seg.channels:
        if seg.channels != 1:
            raise AudioError(f"cannot convert {seg.channels}-channel audio to {channels} channels")
        data = np.repeat(data, channels, axis=1)  # tostereo(1, 1) / from_mono_audiosegments: copies
    if rate != seg.rate and data.shape[0]:
        data = _ratecv(data, seg.width, seg.rate, rate)
    if width != seg.width:
        data = _lin2lin(data, seg.width, width)
    return _Pcm(data, rate, width)


def _sync_params(*segs: _Pcm) -> tuple[int, int, int]:
    return max(s.channels for s in segs), max(s.rate for s in segs), max(s.width for s in segs)


def _concat(pieces: list[_Pcm], channels: int, rate: int, width: int) -> _Pcm:
    if not pieces:
        return _Pcm(np.zeros((0, channels), dtype=np.int64), rate, width)
    return _Pcm(np.concatenate([p.data for p in pieces]), rate, width)


# ---------------------------------------------------------------------------------------------
# rms of millisecond windows (audioop.rms over pydub slices)


class _WindowRms:
    """rms of many pydub slices `seg[start:end]` of one segment, from prefix sums."""

    def __init__(self, seg: _Pcm) -> None:
        self.seg = seg
        data = seg.data
        n = data.shape[0]
        self.exact = seg.width <= 2  # 8/16-bit: all sums are integers below 2**53, as in audioop's doubles
        if self.exact:
            energy = np.einsum("ij,ij->i", data, data)  # int64 per frame
            self.prefix = np.concatenate([[0], np.cumsum(energy)])
        else:
            # 32-bit samples: |v| = hi * 2**16 + lo, v**2 = hi**2 2**32 + 2 hi lo 2**16 + lo**2; every limb is
            # non-negative and its prefix sum fits int64, so window sums are exact and recombine without cancellation
            magnitude = np.abs(data)
            hi = magnitude >> 16
            lo = magnitude & 0xFFFF
            self.limbs = [
                np.concatenate([[0], np.cumsum(part.sum(axis=1))])
                for part in (hi * hi, 2 * hi * lo, lo * lo)
            ]
        self.n = n

    def __call__(self, start_ms: np.ndarray, end_ms: np.ndarray) -> np.ndarray:
        seg = self.seg
        length = seg.ms()
        step = seg.rate / 1000.0
        a = np.trunc(np.minimum(start_ms, length) * step).astype(np.int64)
        b = np.trunc(np.minimum(end_ms, length) * step).astype(np.int64)
        a_in, b_in = np.minimum(a, self.n), np.minimum(b, self.n)
        # a slice that starts inside the data is zero-filled to b - a frames; one past it is empty
        count = np.where(a < self.n, np.maximum(b - a, 0), 0) * seg.channels
        safe = np.maximum(count, 1).astype(np.float64)
        if self.exact:
            total = (self.prefix[b_in] - self.prefix[a_in]).astype(np.float64)
            rms = np.trunc(np.sqrt(total / safe)).astype(np.int64)
        else:
            h, m, lo = (p[b_in] - p[a_in] for p in self.limbs)  # exact int64 limb sums
            total = h.astype(np.float64) * 2.0**32 + m.astype(np.float64) * 2.0**16 + lo.astype(np.float64)
            root = np.sqrt(total / safe)  # within a few ulps of the exact rms
            rms = np.trunc(root).astype(np.int64)
            # audioop's double sum of n squares is within about n ulps: only near an integer can it truncate otherwise
            margin = root * (count + 16) * 2.0**-52 + 1e-9
            doubtful = np.nonzero((count > 0) & (np.floor(root - margin) != np.floor(root + margin)))[0]
            for k in doubtful.tolist():
                exact = int(h[k]) * 2**32 + int(m[k]) * 2**16 + int(lo[k])
                if exact < 2**53:  # every partial sum is an exact double: audioop's sum is this integer
                    rms[k] = int(math.sqrt(exact / int(count[k])))
                else:
                    rms[k] = self._audioop_rms(int(a_in[k]), int(b_in[k]), int(count[k]))
        return np.where(count > 0, rms, 0)

    def _audioop_rms(self, a: int, b: int, count: int) -> int:
        """audioop's own arithmetic: squares rounded to double, added one by one in memory order."""
        if count == 0:
            return 0
        values = self.seg.data[a:b].ravel().astype(np.float64)
        total = float(np.cumsum(values * values)[-1]) if values.size else 0.0  # padding zeros add nothing
        return int(math.sqrt(total / count))


def _db_to_amplitude(db: float) -> float:
    """pydub's `db_to_float`: `10 ** (db / 20)`."""
    return 10 ** (float(db) / 20)


def _quietest_audible_rms(threshold_db: float, max_amplitude: float) -> int:
    """Smallest integer rms whose pydub dBFS (`20 * log(rms / max, 10)`) is not below `threshold_db`."""

    def below(r: int) -> bool:
        return 20 * math.log(float(r) / max_amplitude, 10) < threshold_db

    r = max(1, int(max_amplitude * _db_to_amplitude(threshold_db)) - 2)
    while r > 1 and not below(r - 1):
        r -= 1
    while below(r):
        r += 1
    return r


# ---------------------------------------------------------------------------------------------
# pydub.silence


def _detect_silence(seg: _Pcm, min_silence_len: int, silence_thresh: float, seek_step: int, rms: _WindowRms) -> list[list[int]]:
    """`silence.detect_silence`: `[start, end]` ms ranges of windows at most `silence_thresh` dBFS."""
    seg_len = seg.ms()
    if seg_len < min_silence_len:
        return []
    threshold = _db_to_amplitude(silence_thresh) * seg.max_amplitude()
    last_start = seg_len - min_silence_len
    starts = np.arange(0, last_start + 1, seek_step, dtype=np.int64)
    if last_start % seek_step:
        starts = np.append(starts, last_start)
    quiet = rms(starts, starts + min_silence_len) <= threshold
    silence_starts = starts[quiet].tolist()
    if not silence_starts:
        return []

    ranges = []
    prev = current = silence_starts[0]
    for start in silence_starts[1:]:
        continuous = start == prev + seek_step
        gap = start > prev + min_silence_len
        if not continuous and gap:
            ranges.append([current, prev + min_silence_len])
            current = start
        prev = start
    ranges.append([current, prev + min_silence_len])
    return ranges


def _detect_nonsilent(seg: _Pcm, min_silence_len: int, silence_thresh: float, seek_step: int, rms: _WindowRms) -> list[list[int]]:
    """`silence.detect_nonsilent`: the complement of `_detect_silence`, as pydub forms it."""
    silent = _detect_silence(seg, min_silence_len, silence_thresh, seek_step, rms)
    seg_len = seg.ms()
    if not silent:
        return [[0, seg_len]]
    if silent[0][0] == 0 and silent[0][1] == seg_len:
        return []
    ranges = []
    prev_end = 0
    for start, end in silent:
        ranges.append([prev_end, start])
        prev_end = end
    if silent[-1][1] != seg_len:
        ranges.append([prev_end, seg_len])
    if ranges[0] == [0, 0]:
        ranges.pop(0)
    return ranges


def _split_on_silence(seg: _Pcm, min_silence_len: int, silence_thresh: float, rms: _WindowRms) -> list[_Pcm]:
    """`silence.split_on_silence(keep_silence=1000, seek_step=10)`: pieces with up to 1 s of margin."""
    ranges = [
        [start - _KEEP_SILENCE_MS, end + _KEEP_SILENCE_MS]
        for start, end in _detect_nonsilent(seg, min_silence_len, silence_thresh, _SEEK_STEP_MS, rms)
    ]
    for left, right in zip(ranges, ranges[1:]):
        if right[0] < left[1]:  # margins overlap: meet halfway
            left[1] = (left[1] + right[0]) // 2
            right[0] = left[1]
    seg_len = seg.ms()
    return [seg.slice_ms(max(start, 0), min(end, seg_len)) for start, end in ranges]


def _leading_silence_ms(seg: _Pcm, threshold_db: float = _EDGE_THRESHOLD_DB, chunk_ms: int = _EDGE_CHUNK_MS) -> int:
    """`silence.detect_leading_silence`: start of the first chunk at or above `threshold_db` dBFS."""
    seg_len = seg.ms()
    if seg_len == 0:
        return 0
    starts = np.arange(0, seg_len, chunk_ms, dtype=np.int64)
    rms = _WindowRms(seg)(starts, starts + chunk_ms)
    audible = np.nonzero(rms >= _quietest_audible_rms(threshold_db, seg.max_amplitude()))[0]
    return int(starts[audible[0]]) if audible.size else seg_len


def _reversed(seg: _Pcm) -> _Pcm:
    """`AudioSegment.reverse` (audioop.reverse reverses samples, so channels swap too)."""
    return _Pcm(seg.data[::-1, ::-1], seg.rate, seg.width)


def _remove_silence_edges(seg: _Pcm) -> tuple[_Pcm, int, int]:
    """upstream's `remove_silence_edges(-42)`: the trimmed segment, and the ms cut at each end."""
    lead = _leading_silence_ms(seg)
    seg = seg.slice_ms(lead, None)
    tail = _leading_silence_ms(_reversed(seg))
    if tail > 0:
        seg = seg.slice_ms(None, seg.ms() - tail)
    return seg, lead, tail


def _gather(pieces: list[_Pcm]) -> tuple[_Pcm, bool]:
    """upstream's loop: append pieces to `silent(0)` until, once past 6 s, the next would pass 12 s.

    Each `+=` syncs: every piece is converted to (channels, max(rate, 11025), max(width, 2)).
    Returns the result and whether the loop stopped early.
    """
    params = _sync_params(_silent(0), *pieces) if pieces else (1, _SILENT_RATE, 2)
    channels, rate, width = params
    kept: list[_Pcm] = []
    frames = 0
    stopped = False
    for piece in pieces:
        piece = _converted(piece, channels, rate, width)
        if _ms_of(frames, rate) > _MIN_MS_BEFORE_STOP and _ms_of(frames + piece.frames, rate) > _MAX_MS:
            stopped = True
            break
        kept.append(piece)
        frames += piece.frames
    return _concat(kept, channels, rate, width), stopped


# ---------------------------------------------------------------------------------------------
# WAV bytes as pydub reads them


def _parse_wav(data: bytes) -> _Pcm | None:
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
        samples = _int24(raw)
    return _Pcm(samples.reshape(frames, channels), rate, width)


def _int24(raw: np.ndarray) -> np.ndarray:
    """Little-endian signed 24-bit samples from bytes."""
    b = raw.reshape(-1, 3).astype(np.int64)
    value = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
    return np.where(value >= 1 << 23, value - (1 << 24), value)


def _widen_24_bit(seg: _Pcm) -> _Pcm:
    """pydub's 24 -> 32-bit conversion: a sign-fill byte below each sample, `v * 256 + (255 if v < 0 else 0)`."""
    return _Pcm(seg.data * 256 + np.where(seg.data < 0, 255, 0), seg.rate, 4)


# ---------------------------------------------------------------------------------------------
# float audio to integer PCM


def pcm16_from_float(samples: np.ndarray) -> np.ndarray:
    """Float samples to int16 as `soundfile.write(..., subtype="PCM_16")` stores them (libsndfile 1.2).

    libsndfile scales to 32 bits with clipping, `clip(rint(x * 2**31))` (in the array's precision;
    exact for float32), and keeps the top 16 bits (`>> 16`, i.e. rounding down). So 0.5 -> 16384,
    1.0 -> 32767, -1.0 -> -32768.
    """
    scaled = np.rint(np.asarray(samples).astype(np.float64) * 2.0**31)
    scaled = np.clip(scaled, -(2.0**31), 2.0**31 - 1).astype(np.int64)
    return (scaled >> 16).astype(np.int16)


def _pcm_from_decoded(samples: np.ndarray, float_source: bool) -> tuple[np.ndarray, int]:
    """Decoded float audio to the integers ffmpeg would hand pydub: 32-bit for float WAV, else 16-bit.

    ffmpeg converts float to s16 as `clip(lrintf(x * 32768))` and to s32 as `clip(llrintf(x * 2**31))`.
    """
    x = samples.astype(np.float64)
    if float_source:
        return np.clip(np.rint(x * 2.0**31), -(2.0**31), 2.0**31 - 1).astype(np.int64), 4
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype(np.int64), 2


def _decode_other(data: bytes, name: str) -> _Pcm:
    """Non-WAV (or non-integer WAV) bytes: decode to float with koe's loaders, then to integer PCM."""
    from koe.audio.io import _decode

    samples, rate = _decode(lambda: io.BytesIO(data), data[:65536], data[-65536:], len(data), name)
    if samples.ndim == 1:
        samples = samples[:, None]
    float_source = data[:4] == b"RIFF" and data[8:12] == b"WAVE"  # a float WAV: ffmpeg picks pcm_s32le
    ints, width = _pcm_from_decoded(samples, float_source)
    return _Pcm(ints, int(rate), width)


# ---------------------------------------------------------------------------------------------
# transcript


def fix_transcript(text: str) -> str:
    """upstream's fix-up: end with ". " unless the text ends with ". " or "。" ("." gets a space)."""
    if text.endswith(". ") or text.endswith("。"):
        return text
    return text + (" " if text.endswith(".") else ". ")


def model_reference_text(text: str) -> str:
    """What `infer_batch_process` makes of the fixed-up text: one more space after a 1-byte last character."""
    if text and len(text[-1].encode("utf-8")) == 1:
        return text + " "
    return text


def _checked_transcript(text: str | None) -> str:
    if text is None or not isinstance(text, str) or not text.strip():
        raise UnsupportedVoice(
            "F5-TTS needs the reference's transcript: pass the exact words spoken in the clip as its text "
            "(upstream would transcribe the clip with Whisper; koe does not run an ASR model)"
        )
    return text


# ---------------------------------------------------------------------------------------------
# the pipeline


def _prepare(seg: _Pcm, text: str) -> ReferenceClip:
    text = fix_transcript(_checked_transcript(text))
    if seg.frames == 0:
        raise AudioError("reference audio has no samples (empty or zero-length)")
    if seg.width == 3:
        seg = _widen_24_bit(seg)
    source_seconds = seg.frames / seg.rate

    rms = _WindowRms(seg)
    steps: list[int] = []
    pieces = _split_on_silence(seg, *_LONG_SILENCE, rms)
    if not pieces:
        raise AudioError("reference audio is silent (nothing louder than -50 dBFS)")
    wave, stopped = _gather(pieces)
    if stopped:
        steps.append(1)
    if wave.ms() > _MAX_MS:
        wave, stopped = _gather(_split_on_silence(seg, *_SHORT_SILENCE, rms))
        if stopped:
            steps.append(2)
    if wave.ms() > _MAX_MS:
        wave = wave.slice_ms(None, _MAX_MS)
        steps.append(3)

    trimmed, lead, tail = _remove_silence_edges(wave)
    if trimmed.frames == 0:
        raise AudioError("reference audio is silent: nothing is left above -42 dBFS once the silent edges are trimmed")
    if trimmed.frames / trimmed.rate < MIN_REFERENCE_SECONDS:
        raise AudioError(
            f"reference audio is too short: {trimmed.frames / trimmed.rate:.2f} s of sound once silence is trimmed; "
            f"give at least {MIN_REFERENCE_SECONDS} s of speech (F5-TTS works best with 3-12 s)"
        )
    channels, rate, width = _sync_params(trimmed, _silent(_PAD_MS))
    final = _concat([_converted(trimmed, channels, rate, width), _converted(_silent(_PAD_MS), channels, rate, width)], channels, rate, width)

    # the exported WAV read back as float32 (channels, frames), then upstream's channel mean
    scale = float(2 ** (8 * final.width - 1))
    by_channel = torch.from_numpy((final.data.T / scale).astype(np.float32))
    if by_channel.shape[0] > 1:
        by_channel = torch.mean(by_channel, dim=0, keepdim=True)
    return ReferenceClip(
        samples=by_channel[0].numpy().copy(),
        sample_rate=final.rate,
        text=text,
        channels=final.channels,
        sample_width=final.width,
        source_seconds=source_seconds,
        clip_steps=tuple(steps),
        leading_trim_ms=lead,
        trailing_trim_ms=tail,
    )


def prepare_reference(pcm: np.ndarray, sample_rate: int, sample_width_bytes: int, text: str) -> ReferenceClip:
    """Upstream's reference preprocessing of integer PCM `(frames, channels)` (or `(frames,)`).

    `sample_width_bytes`: 2 for 16-bit, 3 for 24-bit (values in the 24-bit range; widened as pydub
    widens them), 4 for 32-bit, 1 for 8-bit (signed values, as pydub holds them). Raises
    `UnsupportedVoice` without a transcript and `AudioError` for empty, silent or too short audio.
    """
    pcm = np.asarray(pcm)
    if not np.issubdtype(pcm.dtype, np.integer):
        raise AudioError(f"prepare_reference needs integer PCM, got {pcm.dtype}")
    if pcm.ndim == 1:
        pcm = pcm[:, None]
    if pcm.ndim != 2 or pcm.shape[1] < 1:
        raise AudioError(f"PCM must be (frames, channels), got shape {pcm.shape}")
    if sample_width_bytes not in (1, 2, 3, 4):
        raise AudioError(f"sample width must be 1, 2, 3 or 4 bytes, got {sample_width_bytes}")
    if int(sample_rate) <= 0:
        raise AudioError(f"sample rate must be positive, got {sample_rate}")
    limit = 1 << (8 * sample_width_bytes - 1)
    if pcm.size and (pcm.min() < -limit or pcm.max() >= limit):
        raise AudioError(f"PCM values out of range for {8 * sample_width_bytes}-bit samples")
    return _prepare(_Pcm(pcm.astype(np.int64), int(sample_rate), int(sample_width_bytes)), text)


def load_reference(source: ReferenceSource, text: str) -> ReferenceClip:
    """Load and prepare a reference: a file path, the bytes of a file, or `(samples, sample_rate)`.

    Integer PCM WAV (8/16/24/32-bit, any extension) is read as pydub reads it, so the result is
    upstream's bit for bit. Other formats are decoded by koe's loaders (libsndfile, else PyAV) and
    turned into 16-bit PCM as ffmpeg would (float WAV: 32-bit), which matches upstream only as far
    as the decoders agree. A `(float array (n,) or (n, channels), sample_rate)` tuple is stored as
    16-bit PCM the way `soundfile.write` writes PCM_16 (`pcm16_from_float`), as if saved to a WAV
    first; int16 / int32 arrays are taken as 16 / 32-bit PCM.
    """
    if isinstance(source, tuple):
        _checked_transcript(text)
        return _prepare(_from_array(source), text)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "<bytes>"
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise AudioError(f"no such audio file: {path}")
        data, name = path.read_bytes(), str(path)
    else:
        raise AudioError(f"unsupported reference audio source: {type(source).__name__}")
    _checked_transcript(text)
    if not data:
        raise AudioError(f"audio file is empty: {name}")
    seg = _parse_wav(data)
    if seg is None:
        seg = _decode_other(data, name)
    return _prepare(seg, text)


def _from_array(source: tuple) -> _Pcm:
    if len(source) != 2 or not isinstance(source[0], np.ndarray):
        raise AudioError("a tuple audio source must be (numpy array, sample_rate)")
    samples, rate = source
    try:
        rate = int(rate)
    except (TypeError, ValueError) as exc:
        raise AudioError(f"invalid sample rate: {rate!r}") from exc
    if rate <= 0:
        raise AudioError(f"sample rate must be positive, got {rate}")
    if samples.ndim == 1:
        samples = samples[:, None]
    if samples.ndim != 2 or samples.shape[1] < 1:
        raise AudioError(f"waveform must be (n,) or (n, channels), got shape {samples.shape}")
    if samples.dtype == np.int16:
        return _Pcm(samples.astype(np.int64), rate, 2)
    if samples.dtype == np.int32:
        return _Pcm(samples.astype(np.int64), rate, 4)
    if not np.issubdtype(samples.dtype, np.floating):
        raise AudioError(f"waveform dtype {samples.dtype} is not float32/float64 (or int16/int32 PCM)")
    if not np.isfinite(samples).all():
        raise AudioError("audio contains NaN or infinite samples")
    return _Pcm(pcm16_from_float(samples).astype(np.int64), rate, 2)


def normalised_reference(clip: ReferenceClip, target_rms: float = 0.1) -> tuple[torch.Tensor, float]:
    """The clip as F5-TTS conditions on it: float32 `(1, n)` at 24 kHz, and the clip's rms.

    `clip` is a `ReferenceClip` or anything with its `samples` (float32 mono) and `sample_rate`.

    upstream's `infer_batch_process`: `rms = sqrt(mean(square(audio)))` in float32 torch ops; a clip
    quieter than `target_rms` is scaled by `target_rms / rms` (as `audio * target_rms / rms`);
    then `Resample(sr, 24000)` (here `resample_sinc`). The rms returned is the float32 value.
    """
    audio = torch.from_numpy(np.ascontiguousarray(clip.samples, dtype=np.float32).copy())[None]  # (1, n)
    rms = torch.sqrt(torch.mean(torch.square(audio)))
    if rms < target_rms:
        audio = audio * target_rms / rms
    if clip.sample_rate != TARGET_SAMPLE_RATE:
        audio = resample_sinc(audio, clip.sample_rate, TARGET_SAMPLE_RATE)
    return audio, float(rms)
