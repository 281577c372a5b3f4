"""Speed change that keeps pitch (FFmpeg's `atempo` through PyAV), one-shot or streamed."""

from __future__ import annotations

import math
from fractions import Fraction

import av
import numpy as np
from av.filter import Graph

from koe.service.errors import InvalidRequest

MIN_SPEED = 0.25
MAX_SPEED = 4.0


def check_speed(speed: float) -> float:
    """`speed` as a float if it is within 0.25-4.0, else `InvalidRequest`."""
    try:
        s = float(speed)
    except (TypeError, ValueError) as e:
        raise InvalidRequest(f"speed must be a number, got {speed!r}", param="speed") from e
    if not math.isfinite(s) or not MIN_SPEED <= s <= MAX_SPEED:
        raise InvalidRequest(f"speed {speed} is out of range: use {MIN_SPEED} to {MAX_SPEED} (1.0 = unchanged)", param="speed")
    return s


def atempo_chain(speed: float) -> list[float]:
    """Factors, each within atempo's 0.5-2.0, whose product is `speed` (e.g. 0.25 -> [0.5, 0.5])."""
    factors = []
    s = float(speed)
    while s > 2.0:
        factors.append(2.0)
        s /= 2.0
    while s < 0.5:
        factors.append(0.5)
        s /= 0.5
    factors.append(s)
    return factors


class TempoChanger:
    """Time-stretch float32 mono audio by `speed` without changing its pitch, chunk by chunk.

    `feed(samples)` returns what the filter has ready (possibly nothing yet); `finish()` flushes the
    rest. Output length is about `input length / speed`. speed == 1.0 passes samples through untouched.
    """

    def __init__(self, sample_rate: int, speed: float) -> None:
        self.sample_rate = int(sample_rate)
        self.speed = check_speed(speed)
        self._pts = 0
        self._graph: Graph | None = None
        if self.speed != 1.0:
            g = Graph()
            prev = g.add_abuffer(format="flt", sample_rate=self.sample_rate, layout="mono", time_base=Fraction(1, self.sample_rate))
            for factor in atempo_chain(self.speed):
                node = g.add("atempo", repr(factor))
                prev.link_to(node)
                prev = node
            sink = g.add("abuffersink")
            prev.link_to(sink)
            g.configure()
            self._graph = g

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """Push float32 mono samples; returns the stretched samples that are ready."""
        x = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        if self._graph is None or x.size == 0:
            return x if self._graph is None else np.zeros(0, np.float32)
        frame = av.AudioFrame.from_ndarray(x[None, :], format="flt", layout="mono")  # (1, n) packed mono
        frame.sample_rate = self.sample_rate
        frame.time_base = Fraction(1, self.sample_rate)
        frame.pts = self._pts
        self._pts += x.size
        self._graph.push(frame)
        return self._drain()

    def finish(self) -> np.ndarray:
        """Flush the filter; returns the last stretched samples."""
        if self._graph is None:
            return np.zeros(0, np.float32)
        self._graph.push(None)
        out = self._drain()
        self._graph = None
        return out

    def _drain(self) -> np.ndarray:
        parts = []
        while True:
            try:
                frame = self._graph.pull()
            except (av.error.BlockingIOError, av.error.EOFError):
                break
            parts.append(frame.to_ndarray().reshape(-1).astype(np.float32, copy=False))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def change_speed(samples: np.ndarray, sample_rate: int, speed: float) -> np.ndarray:
    """One-shot speed change that keeps pitch: about `len(samples) / speed` float32 samples."""
    t = TempoChanger(sample_rate, speed)
    return np.concatenate([t.feed(samples), t.finish()])
