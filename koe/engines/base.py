"""What every engine hands the rest of koe: audio chunks, results and a cancel handle (torch-free)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np


@dataclass
class AudioChunk:
    """A piece of a streamed utterance: float32 mono samples starting at `offset` (in samples)."""

    samples: np.ndarray
    sample_rate: int
    offset: int
    final: bool
    metadata: dict = field(default_factory=dict)  # frames so far, time to this chunk, warnings, ...


class Cancelled(Exception):
    """Raised inside a generation whose cancel handle was set."""


class CancelToken:
    """Set from any thread; the decode loop checks it once per frame and stops."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled("generation cancelled")
