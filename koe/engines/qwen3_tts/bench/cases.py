"""Qwen3-TTS's benchmark cases and their inputs, the same on every side (koe, qwen-tts, the peer).

Stdlib only: the compared sides' workers import this file by path in their own virtualenvs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

FRAME_RATE = 12.5
SAMPLE_RATE = 24000
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green hills."
BATCH_TEXTS = [
    TEXT,
    "A benchmark measures what a program does, not what its authors hope it does.",
    "Speech synthesis turns written words into sound, one frame at a time.",
    "Every frame reads the whole talker once and the code predictor fifteen times.",
    "On a small machine, memory bandwidth is the limit, not arithmetic.",
    "Seeds make random draws repeatable, which makes results comparable.",
    "The codec turns sixteen codes per frame into nineteen hundred and twenty samples.",
    "Warm-up runs are excluded; the median and the minimum of the rest are reported.",
]
INSTRUCT = "A calm, warm, low-pitched male voice speaking slowly and clearly."
SPEAKER = "ryan"
LANGUAGE = "english"
# Case -> (model kind, batch size). "streaming" measures the time to the first audio chunk.
CASES = {
    "custom_voice": ("custom_voice", 1),
    "voice_design": ("voice_design", 1),
    "clone_xvector": ("base", 1),
    "clone_icl": ("base", 1),
    "streaming": ("custom_voice", 1),
    "batch8": ("custom_voice", 8),
}


class Phases:
    """Collects phase times of one run: the start of decoding, the end of the first talker
    forward (prefill), and the time spent in the code predictor."""

    def __init__(self) -> None:
        self.decode_start = 0.0
        self.prefill_end: float | None = None
        self.predictor_s = 0.0

    def mark_talker_forward(self) -> None:
        if self.prefill_end is None:
            self.prefill_end = time.perf_counter()

    def timed(self, fn: Callable) -> Callable:
        """`fn` wrapped so that its time adds to `predictor_s`."""

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.predictor_s += time.perf_counter() - t

        return wrapper

    def result(self, decode_end: float, frames: int) -> dict:
        prefill = (self.prefill_end or decode_end) - self.decode_start
        steps = max(frames, 1)
        per_frame = (decode_end - self.decode_start - prefill) / steps
        predictor = self.predictor_s / steps
        return {
            "prefill_s": prefill,
            "decode_s": decode_end - self.decode_start,
            "ms_per_frame": per_frame * 1e3,
            "predictor_ms_per_frame": predictor * 1e3,
            "talker_ms_per_frame": (per_frame - predictor) * 1e3,
        }
