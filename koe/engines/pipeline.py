"""The one generic pipeline: text -> segments -> a family's segment speaker -> audio chunks.

Written once for every engine: text segmentation, a seed per segment (seed + i), pauses between
segments, the runaway guard in seconds, chunk sizes, metadata and the truncation warning. A family
supplies only `speak_segment` (one segment's audio, whole or in pieces) and its own metadata.
One-shot synthesis is collecting the stream (`koe.engines.base.collect`); a request without chunk
sizes asks each segment whole, which is the family's exact (upstream-equal) path.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from koe.engines.base import AudioChunk, EmptyText, RequestError, SynthesisRequest
from koe.text.segment import segment_text

_WORD = re.compile(r"[^\W\d_\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+|\d+", re.UNICODE)
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def guard_seconds(text: str) -> float:
    """The runaway guard: seconds of audio a text may take before it is cut off.

    Generous on purpose (about three times a slow reading): 4 s, plus 1 s per word or number,
    plus 0.75 s per CJK character (kana, hanzi/kanji, hangul).
    """
    return 4.0 + 1.0 * len(_WORD.findall(text)) + 0.75 * len(_CJK_CHAR.findall(text))


def steps_for(seconds: float, rate: float) -> int:
    """Whole steps (frames, patches) that cover `seconds` at `rate` per second, at least 1."""
    return max(1, math.ceil(round(seconds * rate, 6)))


@dataclass(frozen=True)
class PipelineDefaults:
    """A family's defaults for what a request leaves out."""

    max_segment_chars: int = 300
    pause_s: float = 0.25
    first_chunk_s: float = 0.32
    chunk_s: float = 0.96


@dataclass(frozen=True)
class Segment:
    """One segment's job: its text, index, seed, audio budget and chunking (None: whole)."""

    text: str
    index: int
    seed: int | None
    budget_s: float
    first_chunk_s: float | None
    chunk_s: float | None

    @property
    def streamed(self) -> bool:
        return self.first_chunk_s is not None


@dataclass
class Piece:
    """Audio a segment speaker made: `frames` counts its steps so far in the segment.

    The segment's last piece has `last=True`, `truncated` set, and may carry `info` for the
    segment's metadata; `metadata` goes on the chunk that carries these samples.
    """

    samples: np.ndarray
    frames: int
    last: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


class SegmentSpeaker(Protocol):
    """What a family gives the pipeline."""

    sample_rate: int
    pipeline_defaults: PipelineDefaults

    def check_request(self, request: SynthesisRequest) -> Any:
        """Validate the request once (voice, language, options); the result is passed to each segment."""
        ...

    def speak_segment(self, segment: Segment, checked: Any) -> Iterator[Piece]: ...

    def result_metadata(self) -> dict[str, Any]:
        """Metadata every result of this engine carries (model, precision, device, ...)."""
        ...


def truncation_warning(seconds: float, segment: int, segments: int) -> str:
    """The one wording of the runaway guard's warning."""
    where = f" (segment {segment + 1} of {segments})" if segments > 1 else ""
    return (
        f"speech was cut off after {seconds:.1f} s{where}: the model did not end the utterance within "
        "its frame budget (the runaway guard, or the model's own length limit: max_new_tokens, max_len)"
    )


def run(speaker: SegmentSpeaker, request: SynthesisRequest) -> Iterator[AudioChunk]:
    """Speak `request` with `speaker`, as chunks; the final chunk carries the utterance's metadata.

    Truncated segments raise a `UserWarning` (and are listed in `metadata["warnings"]`). Closing
    the iterator closes the segment speaker's generator, which stops its decoding.
    """
    if not isinstance(request.text, str):
        raise RequestError("text must be a string", param="input")
    d = speaker.pipeline_defaults
    max_chars = request.max_segment_chars or d.max_segment_chars
    segments = segment_text(request.text, max_chars, request.language)  # the language picks the splitter's abbreviations
    if not segments:
        raise EmptyText("text is empty: give at least one word to speak")
    first_s, chunk_s = _chunk_sizes(request, d)
    pause_s = d.pause_s if request.pause_s is None else float(request.pause_s)
    if pause_s < 0:
        raise RequestError(f"pause_s must be >= 0, got {pause_s}", param="pause_s")
    checked = speaker.check_request(request)
    sr = speaker.sample_rate
    pause = np.zeros(int(round(pause_s * sr)), dtype=np.float32)
    started = time.perf_counter()
    offset, frames_before, seen = 0, 0, []
    for i, text in enumerate(segments):
        budget = guard_seconds(text) if request.max_segment_s is None else float(request.max_segment_s)
        seed = None if request.seed is None else int(request.seed) + i
        job = Segment(text, i, seed, budget, first_s if i == 0 else chunk_s, chunk_s)
        head = pause if i > 0 and len(pause) else None
        pieces = speaker.speak_segment(job, checked)
        try:
            for piece in pieces:
                samples = np.asarray(piece.samples, dtype=np.float32)
                if head is not None and (len(samples) or piece.last):
                    samples, head = np.concatenate([head, samples]), None
                final = piece.last and i == len(segments) - 1
                meta = {**piece.metadata, "frames": frames_before + piece.frames, "elapsed_s": time.perf_counter() - started, "segment": i}
                if piece.last:
                    seen.append(_segment_record(job, piece, sr, len(segments)))
                    meta["truncated"] = piece.truncated
                    if piece.truncated:
                        warnings.warn(seen[-1]["warning"], stacklevel=2)
                        meta["warnings"] = [seen[-1]["warning"]]
                    frames_before += piece.frames
                if final:
                    meta.update(_result_metadata(speaker, request, seen))
                if len(samples) or final:
                    yield AudioChunk(samples, sr, offset, final, meta)
                    offset += len(samples)
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()


def _chunk_sizes(request: SynthesisRequest, d: PipelineDefaults) -> tuple[float | None, float | None]:
    if not request.streamed:
        return None, None
    first = d.first_chunk_s if request.first_chunk_s is None else float(request.first_chunk_s)
    chunk = d.chunk_s if request.chunk_s is None else float(request.chunk_s)
    for name, value in (("first_chunk_s", first), ("chunk_s", chunk)):
        if not math.isfinite(value) or value <= 0:
            raise RequestError(f"{name} must be > 0 seconds, got {value}", param=name)
    return first, chunk


def _segment_record(job: Segment, piece: Piece, sr: int, count: int) -> dict[str, Any]:
    record = {"text": job.text, "seed": job.seed, "frames": piece.frames, "truncated": piece.truncated, "budget_s": job.budget_s, **piece.info}
    if piece.truncated:
        seconds = piece.info.get("seconds", job.budget_s)
        record["warning"] = truncation_warning(seconds, job.index, count)
    return record


def _result_metadata(speaker: SegmentSpeaker, request: SynthesisRequest, seen: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **speaker.result_metadata(),
        "seed": request.seed,
        "frames": sum(s["frames"] for s in seen),
        "truncated": any(s["truncated"] for s in seen),
        "warnings": [s["warning"] for s in seen if "warning" in s],
        "segments": [{k: v for k, v in s.items() if k != "warning"} for s in seen],
    }
