"""How long Qwen3-TTS speaks in one go: a long text's segment length and the pause between segments,
and the runaway guard in its unit, codec frames (12.5 a second)."""

from __future__ import annotations

from koe.engines.pipeline import guard_seconds, steps_for
from koe.engines.qwen3_tts.spec import FRAME_RATE

MAX_SEGMENT_CHARS = 300
SEGMENT_PAUSE_S = 0.25

__all__ = ["FRAME_RATE", "MAX_SEGMENT_CHARS", "SEGMENT_PAUSE_S", "frame_budget"]


def frame_budget(text: str) -> int:
    """The runaway guard (`koe.engines.pipeline.guard_seconds`) in frames."""
    return steps_for(guard_seconds(text), FRAME_RATE)
