"""Errors raised by koe's audio front end."""

from __future__ import annotations


class AudioError(ValueError):
    """Audio that koe cannot use: unreadable, empty, truncated, non-finite or silent.

    Subclasses `ValueError` so callers that treat bad input generically still catch it; the message
    says what was wrong in words a user of the API or server can act on.
    """


class AudioTooLong(AudioError):
    """Audio longer than the caller allows, found from its header or while decoding it (stopped there).

    `seconds` is its length where known (from the header, or decoded in full), else None: decoding
    stopped at the limit, so only "longer than `max_seconds`" is known. The message keeps the phrase
    "at most N s" that callers and clients match on.
    """

    def __init__(self, max_seconds: float, seconds: float | None = None):
        self.max_seconds = float(max_seconds)
        self.seconds = seconds
        length = f"{_seconds_above(seconds, max_seconds)} s" if seconds is not None else f"more than {max_seconds:g} s"
        super().__init__(f"audio is too long: {length} (at most {max_seconds:g} s is allowed)")


def _seconds_above(seconds: float, max_seconds: float) -> str:
    """`seconds` with one decimal, or three where one would not show it is above `max_seconds`."""
    text = f"{seconds:.1f}"
    return text if float(text) > max_seconds else f"{seconds:.3f}"
