"""The one chunk schedule of a streamed segment: `first_chunk_s` of audio, then every `chunk_s`.

Every family streams through it, in the unit it makes audio in: Qwen3-TTS counts codec frames
(`add(1)` per frame, its codec decodes what is held when a piece is due), VoxCPM counts samples
as its patches come (`add(len(samples))`), and F5-TTS cuts a text batch's finished samples
(`split`). Sizes are whole units, at least one: `max(1, round(seconds * rate))`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["Chunker"]


class Chunker:
    """When a piece is due: after `first` units, then after every `every` units (frames or samples)."""

    def __init__(self, first: int, every: int) -> None:
        self.due, self.every = max(1, int(first)), max(1, int(every))
        self.held = 0  # units since the last piece

    @classmethod
    def of(cls, first_s: float, chunk_s: float, rate: float) -> Chunker:
        """The schedule for `first_s` then `chunk_s` seconds at `rate` units per second."""
        return cls(*(max(1, round(x * rate)) for x in (first_s, chunk_s)))

    def add(self, units: int) -> bool:
        """`units` more are held; True when a piece is due (all that is held goes out: the count starts again, with `every`)."""
        self.held += units
        if self.held < self.due:
            return False
        self.held, self.due = 0, self.every
        return True

    def split(self, samples: np.ndarray) -> Iterator[np.ndarray]:
        """Samples that are final now, as pieces of the due size; the rest goes out too, short (nothing is
        held), and the next call starts with `every`."""
        start = 0
        while start < len(samples):
            yield samples[start : start + self.due]
            start += self.due
            self.due = self.every
        self.due, self.held = self.every, 0
