"""Errors raised by koe's audio front end."""

from __future__ import annotations


class AudioError(ValueError):
    """Audio that koe cannot use: unreadable, empty, truncated, non-finite or silent.

    Subclasses `ValueError` so callers that treat bad input generically still catch it; the message
    says what was wrong in words a user of the API or server can act on.
    """
