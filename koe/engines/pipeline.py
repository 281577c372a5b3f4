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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from koe.engines.base import AudioChunk, BatchCancel, CancelToken, Capabilities, EmptyText, RequestError, SynthesisRequest
from koe.text.segment import segment_text, stream_segments

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
    capabilities: Capabilities

    def speak_segment(self, segment: Segment, checked: Any) -> Iterator[Piece]:
        """One segment's audio: whole (one `Piece`, `last=True`) or, when `segment.streamed`, in pieces
        (`koe.engines.chunker.Chunker` keeps the schedule); a generator, so closing it stops decoding."""
        ...

    def check_request(self, request: SynthesisRequest) -> Any:
        """Validate the request once (voice, language, options); the result is passed to each segment."""
        ...

    def result_metadata(self) -> dict[str, Any]:
        """Metadata every result of this engine carries (model, precision, device, ...)."""
        ...


class RowFeed(Protocol):
    """What a batch that takes rows while it runs asks between steps (`BatchSegmentSpeaker.speak_segments`)."""

    def more(self) -> list[Segment]:
        """Segments to start now (jobs numbered on from the ones given so far)."""
        ...

    def gone(self, job: int) -> bool:
        """Whether job `job`'s listener went away (its row can be dropped)."""
        ...


class BatchSegmentSpeaker(SegmentSpeaker, Protocol):
    """A family that can also speak several one-segment jobs as one batch (`run_batch`); where
    `capabilities.joins_rows`, its batches take new rows between steps (`speak_segments` gets a `feed`)."""

    def speak_segments(self, segments: list[Segment], checked: Any, cancel: CancelToken, feed: RowFeed | None = None) -> Iterator[tuple[int, Piece]]:
        """Each job's pieces as `(job index, piece)`, as `speak_segment` would give them one by one;
        `checked` is the first job's request's, `cancel` stops the whole batch."""
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
    segments = _segments(speaker, request)
    utterance = _Utterance(speaker, request, len(segments))
    checked = speaker.check_request(request)
    for i, text in enumerate(segments):
        yield from utterance.speak(utterance.segment(i, text, request.seed), checked)


def run_text_stream(speaker: SegmentSpeaker, pieces: Iterable[str], request: SynthesisRequest) -> Iterator[AudioChunk]:
    """Speak text that arrives in pieces (as an LLM writes it) with `speaker`, as chunks: each
    sentence as soon as it is complete (`koe.text.segment.stream_segments`), segment i with seed +
    i and the pause between segments, as `run` speaks a text's segments; `request` gives everything
    but the text (its `text` is not read). Since the end of the text is known only when the pieces
    end, the final chunk comes after the last segment's audio, without samples, carrying the
    utterance's metadata. Nothing is asked of `pieces` while a segment is being spoken."""
    max_chars = request.max_segment_chars or speaker.pipeline_defaults.max_segment_chars
    utterance = _Utterance(speaker, request, None)
    checked = None
    count = 0
    for text in _checked_pieces(stream_segments(pieces, max_chars, request.language)):
        if checked is None:
            checked = speaker.check_request(replace(request, text=text))
        yield from utterance.speak(utterance.segment(count, text, request.seed), checked)
        count += 1
    if count == 0:
        raise EmptyText("the text stream held nothing to speak")
    yield utterance.end()


def _checked_pieces(segments: Iterator[str]) -> Iterator[str]:
    """Streamed segments, a piece that is not text a `RequestError`."""
    try:
        yield from segments
    except TypeError as e:
        raise RequestError(str(e), param="input") from e


def run_batch(
    speaker: BatchSegmentSpeaker, requests: list[SynthesisRequest], admit: Callable[[], list[SynthesisRequest]] | None = None
) -> Iterator[tuple[int, AudioChunk | RequestError]]:
    """Speak requests that share voice, language and options as one batched generation, as
    `(request index, chunk)` pairs in the order they are made; each request's chunks are what `run`
    would give it (its own chunk sizes and frame budget, its metadata on its final chunk), from one
    decode that draws with the first request's seed.

    Where the speaker's batches take rows while they run (`capabilities.joins_rows`), a long text's segments
    follow one another in their row's place, and `admit` is asked between steps for more requests
    (numbered on from these); one of those that cannot be spoken comes out as `(index, error)`.
    Elsewhere a request whose text needs more than one segment is spoken after the batch, alone,
    through `run`. A request whose `cancel` is set gets no more chunks (and its row is dropped where
    rows can leave); the decode stops when every request's is set. Closing the iterator stops decoding.
    """
    if speaker.capabilities.joins_rows:
        yield from _run_rows(speaker, requests, admit)
        return
    plans = [(i, r, _segments(speaker, r)) for i, r in enumerate(requests)]
    together = [(i, r, segments[0]) for i, r, segments in plans if len(segments) == 1]
    alone = [(i, r) for i, r, segments in plans if len(segments) > 1]
    if len(together) == 1:  # nothing to share a batch with
        alone, together = sorted(alone + [together[0][:2]]), []
    if together:
        utterances = [_Utterance(speaker, r, 1) for _, r, _ in together]
        checked = [speaker.check_request(r) for _, r, _ in together]  # each text checked; voice and options are the first's
        seed = together[0][1].seed
        jobs = [u.segment(0, text, seed) for u, (_, _, text) in zip(utterances, together, strict=True)]
        cancel = BatchCancel([r.cancel for _, r, _ in together])
        pieces = speaker.speak_segments(jobs, checked[0], cancel)
        try:
            for row, piece in pieces:
                index, request, _ = together[row]
                if request.cancel is not None and request.cancel.cancelled:
                    continue
                chunk = utterances[row].chunk(jobs[row], piece)
                if chunk is not None:
                    yield index, chunk
        finally:
            pieces.close()
    for index, request in alone:
        if request.cancel is not None and request.cancel.cancelled:
            continue
        for chunk in run(speaker, request):
            yield index, chunk


def _run_rows(speaker: BatchSegmentSpeaker, requests: list[SynthesisRequest], admit) -> Iterator[tuple[int, AudioChunk | RequestError]]:
    feed = _Feed(speaker, requests[0].seed, admit)
    checked = [feed.add(r, strict=True) for r in requests][0]  # every text checked; voice and options are the first's
    pieces = speaker.speak_segments(feed.take(), checked, feed.cancel, feed)
    try:
        for job, piece in pieces:
            yield from feed.failures()
            index, segment = feed.jobs[job]
            if feed.gone(job):
                continue
            utterance = feed.utterances[index]
            if piece.last:  # a segment's row ended: the most rows any of the request's segments shared a step with
                feed.shared[index] = max(feed.shared.get(index, 1), piece.metadata.get("batch_size", 1))
            chunk = utterance.chunk(segment, piece)
            if piece.last and segment.index + 1 < utterance.count:
                feed.queued.append((index, segment.index + 1))  # its next segment takes the row's place at the next step
            if chunk is not None:
                if chunk.final:
                    chunk.metadata["batch_size"] = feed.shared[index]
                yield index, chunk
        yield from feed.failures()
    finally:
        pieces.close()


class _Feed:
    """A running batch's requests (those it began with and those that joined) and its jobs (one per
    segment started), for `_run_rows`; it is the speaker's `RowFeed`."""

    def __init__(self, speaker: BatchSegmentSpeaker, seed: int | None, admit) -> None:
        self.speaker, self.seed, self.admit = speaker, seed, admit
        self.requests: list[SynthesisRequest] = []
        self.texts: list[list[str]] = []
        self.utterances: list[_Utterance | None] = []
        self.jobs: list[tuple[int, Segment]] = []  # job number -> (request index, segment)
        self.queued: list[tuple[int, int]] = []  # (request index, segment index) to start at the next step
        self.failed: list[tuple[int, RequestError]] = []
        self.shared: dict[int, int] = {}
        self.cancel = BatchCancel([])

    def add(self, request: SynthesisRequest, strict: bool) -> Any:
        """Take a request (its first segment is queued); returns its `check_request`. A request that
        cannot be spoken raises when `strict`, else is kept as a failure for `failures`."""
        index = len(self.requests)
        self.requests.append(request)
        self.texts.append([])
        self.utterances.append(None)
        try:
            texts = _segments(self.speaker, request)
            utterance = _Utterance(self.speaker, request, len(texts))
            checked = self.speaker.check_request(request)
        except RequestError as e:
            if strict:
                raise
            self.failed.append((index, e))
            return None
        self.texts[index], self.utterances[index] = texts, utterance
        self.cancel.add(request.cancel)
        self.queued.append((index, 0))
        return checked

    def take(self) -> list[Segment]:
        """The queued segments' jobs, numbered on."""
        out = []
        for index, i in self.queued:
            segment = self.utterances[index].segment(i, self.texts[index][i], self.seed)
            self.jobs.append((index, segment))
            out.append(segment)
        self.queued = []
        return out

    def more(self) -> list[Segment]:
        for request in self.admit() if self.admit is not None else []:
            self.add(request, strict=False)
        return self.take()

    def gone(self, job: int) -> bool:
        cancel = self.requests[self.jobs[job][0]].cancel
        return cancel is not None and cancel.cancelled

    def failures(self) -> Iterator[tuple[int, RequestError]]:
        while self.failed:
            yield self.failed.pop(0)


def _segments(speaker: SegmentSpeaker, request: SynthesisRequest) -> list[str]:
    if not isinstance(request.text, str):
        raise RequestError("text must be a string", param="input")
    max_chars = request.max_segment_chars or speaker.pipeline_defaults.max_segment_chars
    segments = segment_text(request.text, max_chars, request.language)  # the language picks the splitter's abbreviations
    if not segments:
        raise EmptyText("text is empty: give at least one word to speak")
    return segments


class _Utterance:
    """One request's way through the pipeline: its segments' jobs, and its pieces turned into
    chunks (offsets, the pause between segments, the frame count, the final metadata)."""

    def __init__(self, speaker: SegmentSpeaker, request: SynthesisRequest, count: int | None) -> None:
        d = speaker.pipeline_defaults
        self.speaker, self.request, self.count = speaker, request, count
        self.first_s, self.chunk_s = _chunk_sizes(request, d)
        pause_s = d.pause_s if request.pause_s is None else float(request.pause_s)
        if pause_s < 0:
            raise RequestError(f"pause_s must be >= 0, got {pause_s}", param="pause_s")
        self.pause = np.zeros(int(round(pause_s * speaker.sample_rate)), dtype=np.float32)
        self.started = time.perf_counter()
        self.offset, self.frames_before, self.seen = 0, 0, []
        self.head: np.ndarray | None = None  # the pause still to put in front of the next samples

    def segment(self, i: int, text: str, seed: int | None) -> Segment:
        """Segment `i`'s job (seed + i, the guard's budget or the request's cap, its chunk sizes)."""
        r = self.request
        budget = guard_seconds(text) if r.max_segment_s is None else float(r.max_segment_s)
        self.head = self.pause if i > 0 and len(self.pause) else None
        return Segment(text, i, None if seed is None else int(seed) + i, budget, self.first_s if i == 0 else self.chunk_s, self.chunk_s)

    def speak(self, job: Segment, checked: Any) -> Iterator[AudioChunk]:
        """The speaker's pieces of one segment as chunks (closing the speaker's generator at the end,
        which stops its decoding when the caller stops early)."""
        pieces = self.speaker.speak_segment(job, checked)
        try:
            for piece in pieces:
                chunk = self.chunk(job, piece)
                if chunk is not None:
                    yield chunk
        finally:
            pieces.close()

    def chunk(self, job: Segment, piece: Piece) -> AudioChunk | None:
        """The chunk that carries `piece` (None when it holds no samples and ends nothing)."""
        samples = np.asarray(piece.samples, dtype=np.float32)
        if self.head is not None and (len(samples) or piece.last):
            samples, self.head = np.concatenate([self.head, samples]), None
        final = piece.last and self.count is not None and job.index == self.count - 1  # count None: streamed text, `end` finishes
        meta = {**piece.metadata, "frames": self.frames_before + piece.frames, "elapsed_s": time.perf_counter() - self.started, "segment": job.index}
        if piece.last:
            self.seen.append(_segment_record(job, piece, self.speaker.sample_rate, self.count))
            meta["truncated"] = piece.truncated
            if piece.truncated:
                warnings.warn(self.seen[-1]["warning"], stacklevel=3)
                meta["warnings"] = [self.seen[-1]["warning"]]
            self.frames_before += piece.frames
        if final:
            meta.update(_result_metadata(self.speaker, self.request, self.seen))
        if not (len(samples) or final):
            return None
        chunk = AudioChunk(samples, self.speaker.sample_rate, self.offset, final, meta)
        self.offset += len(samples)
        return chunk

    def end(self) -> AudioChunk:
        """The final chunk of streamed text, after its last segment: no samples, the utterance's metadata."""
        meta = {"frames": self.frames_before, "elapsed_s": time.perf_counter() - self.started, **_result_metadata(self.speaker, self.request, self.seen)}
        return AudioChunk(np.zeros(0, np.float32), self.speaker.sample_rate, self.offset, True, meta)


def _chunk_sizes(request: SynthesisRequest, d: PipelineDefaults) -> tuple[float | None, float | None]:
    if not request.streamed:
        return None, None
    first = d.first_chunk_s if request.first_chunk_s is None else float(request.first_chunk_s)
    chunk = d.chunk_s if request.chunk_s is None else float(request.chunk_s)
    for name, value in (("first_chunk_s", first), ("chunk_s", chunk)):
        if not math.isfinite(value) or value <= 0:
            raise RequestError(f"{name} must be > 0 seconds, got {value}", param=name)
    return first, chunk


def _segment_record(job: Segment, piece: Piece, sr: int, count: int | None) -> dict[str, Any]:
    record = {"text": job.text, "seed": job.seed, "frames": piece.frames, "truncated": piece.truncated, "budget_s": job.budget_s, **piece.info}
    if piece.truncated:
        seconds = piece.info.get("seconds", job.budget_s)
        record["warning"] = truncation_warning(seconds, job.index, count or job.index + 2)  # streamed text: "segment i of more"
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
