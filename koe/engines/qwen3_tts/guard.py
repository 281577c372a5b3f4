"""Long-text settings and the runaway guard: how many frames a text may take before it is cut off."""

from __future__ import annotations

import math
import re

FRAME_RATE = 12.5
MAX_SEGMENT_CHARS = 300
SEGMENT_PAUSE_S = 0.25
_WORD = re.compile(r"[^\W\d_\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+|\d+", re.UNICODE)
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def frame_budget(text: str) -> int:
    """The runaway guard: frames a text may take before it is cut off.

    Generous on purpose (about three times a slow reading): 4 s, plus 1 s per word or number,
    plus 0.75 s per CJK character (kana, hanzi/kanji, hangul), at 12.5 frames a second.
    """
    seconds = 4.0 + 1.0 * len(_WORD.findall(text)) + 0.75 * len(_CJK_CHAR.findall(text))
    return int(math.ceil(seconds * FRAME_RATE))
