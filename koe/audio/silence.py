"""pydub's silence detection (`pydub.silence`) on `koe.audio.pcm.Pcm`, with the same cut points.

`WindowRms` is `audioop.rms` (`trunc(sqrt(sum of squares / samples))` over all interleaved
samples) of many pydub slices at once, from prefix sums instead of pydub's window-by-window
loop. For 16-bit (and 8-bit) audio the prefix sums are exact integers and so equal to audioop's
double sums; for 32-bit samples audioop's double sum can round, so a window whose rms sits within
rounding distance of an integer is recomputed the way audioop adds (sequential float64). dBFS
comparisons use pydub's own float formulas.
"""

from __future__ import annotations

import math

import numpy as np

from koe.audio.pcm import Pcm

__all__ = [
    "WindowRms",
    "db_to_amplitude",
    "detect_nonsilent",
    "detect_silence",
    "leading_silence_ms",
    "quietest_audible_rms",
    "remove_silence_edges",
    "reversed_segment",
    "split_on_silence",
]


class WindowRms:
    """rms of many pydub slices `seg[start:end]` of one segment, from prefix sums."""

    def __init__(self, seg: Pcm) -> None:
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
            self.limbs = [np.concatenate([[0], np.cumsum(part.sum(axis=1))]) for part in (hi * hi, 2 * hi * lo, lo * lo)]
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


def db_to_amplitude(db: float) -> float:
    """pydub's `db_to_float`: `10 ** (db / 20)`."""
    return 10 ** (float(db) / 20)


def quietest_audible_rms(threshold_db: float, max_amplitude: float) -> int:
    """Smallest integer rms whose pydub dBFS (`20 * log(rms / max, 10)`) is not below `threshold_db`."""

    def below(r: int) -> bool:
        return 20 * math.log(float(r) / max_amplitude, 10) < threshold_db

    r = max(1, int(max_amplitude * db_to_amplitude(threshold_db)) - 2)
    while r > 1 and not below(r - 1):
        r -= 1
    while below(r):
        r += 1
    return r


def detect_silence(seg: Pcm, min_silence_len: int, silence_thresh: float, seek_step: int, rms: WindowRms) -> list[list[int]]:
    """`silence.detect_silence`: `[start, end]` ms ranges of windows at most `silence_thresh` dBFS."""
    seg_len = seg.ms()
    if seg_len < min_silence_len:
        return []
    threshold = db_to_amplitude(silence_thresh) * seg.max_amplitude()
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


def detect_nonsilent(seg: Pcm, min_silence_len: int, silence_thresh: float, seek_step: int, rms: WindowRms) -> list[list[int]]:
    """`silence.detect_nonsilent`: the complement of `detect_silence`, as pydub forms it."""
    silent = detect_silence(seg, min_silence_len, silence_thresh, seek_step, rms)
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


def split_on_silence(seg: Pcm, min_silence_len: int, silence_thresh: float, rms: WindowRms, keep_silence: int = 1000, seek_step: int = 10) -> list[Pcm]:
    """`silence.split_on_silence`: the non-silent pieces, each with up to `keep_silence` ms of margin."""
    ranges = [[start - keep_silence, end + keep_silence] for start, end in detect_nonsilent(seg, min_silence_len, silence_thresh, seek_step, rms)]
    for left, right in zip(ranges, ranges[1:]):
        if right[0] < left[1]:  # margins overlap: meet halfway
            left[1] = (left[1] + right[0]) // 2
            right[0] = left[1]
    seg_len = seg.ms()
    return [seg.slice_ms(max(start, 0), min(end, seg_len)) for start, end in ranges]


def leading_silence_ms(seg: Pcm, threshold_db: float = -50.0, chunk_ms: int = 10) -> int:
    """`silence.detect_leading_silence`: start of the first chunk at or above `threshold_db` dBFS."""
    seg_len = seg.ms()
    if seg_len == 0:
        return 0
    starts = np.arange(0, seg_len, chunk_ms, dtype=np.int64)
    rms = WindowRms(seg)(starts, starts + chunk_ms)
    audible = np.nonzero(rms >= quietest_audible_rms(threshold_db, seg.max_amplitude()))[0]
    return int(starts[audible[0]]) if audible.size else seg_len


def reversed_segment(seg: Pcm) -> Pcm:
    """`AudioSegment.reverse` (audioop.reverse reverses samples, so channels swap too)."""
    return Pcm(seg.data[::-1, ::-1], seg.rate, seg.width)


def remove_silence_edges(seg: Pcm, threshold_db: float, chunk_ms: int = 10) -> tuple[Pcm, int, int]:
    """F5-TTS's `remove_silence_edges`: leading silence cut at both ends; the segment and the ms cut at each end."""
    lead = leading_silence_ms(seg, threshold_db, chunk_ms)
    seg = seg.slice_ms(lead, None)
    tail = leading_silence_ms(reversed_segment(seg), threshold_db, chunk_ms)
    if tail > 0:
        seg = seg.slice_ms(None, seg.ms() - tail)
    return seg, lead, tail
