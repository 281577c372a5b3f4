"""Text that arrives in pieces on one thread (a WebSocket client's messages) and is spoken on another.

A `TextFeed` is what `Scheduler.submit_text_stream` and `Synthesizer.stream_text` take: the caller
`put`s pieces as they come and `end`s the text; the engine iterates the feed on its generation
thread (`Engine.synthesize_text`), which blocks until the next piece, the end, or cancellation.
Its cancel handle is the job's: cancelling the job (the client went away, the server shuts down)
stops a generation that is waiting for text within `POLL_SECONDS`.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator

from koe.engines.base import CancelToken

POLL_SECONDS = 0.1
_END = object()


class TextFeed:
    """Pieces of text, put from one thread and iterated (once) on another; thread-safe.

    `put(text)` adds a piece, `end()` says no more will come (the iteration then ends after the
    pieces it has). While it waits, the iteration checks `cancel` every `POLL_SECONDS` and raises
    `Cancelled` once it is set. `text` is everything put so far, `chars` its length.
    """

    def __init__(self, cancel: CancelToken | None = None) -> None:
        self.cancel = cancel or CancelToken()
        self._pieces: queue.Queue = queue.Queue()
        self._said: list[str] = []
        self.chars = 0
        self.ended = False

    def put(self, text: str) -> None:
        """Add a piece (after `end` it is a `RuntimeError`)."""
        if self.ended:
            raise RuntimeError("the text has ended; no more pieces can be put")
        self._said.append(text)
        self.chars += len(text)
        self._pieces.put(text)

    def end(self) -> None:
        """No more pieces: the iteration ends once it has given those it has (a second call does nothing)."""
        if not self.ended:
            self.ended = True
            self._pieces.put(_END)

    @property
    def text(self) -> str:
        """Every piece put so far, joined."""
        return "".join(self._said)

    def __iter__(self) -> Iterator[str]:
        while True:
            self.cancel.raise_if_cancelled()
            try:
                piece = self._pieces.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            if piece is _END:
                self._pieces.put(_END)  # a second iteration ends too
                return
            yield piece
