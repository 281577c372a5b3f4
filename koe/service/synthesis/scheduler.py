"""The request scheduler: a bounded queue per model, micro-batching, cancellation.

Strategy: one lane per model key, each with a waiting queue (at most `queue_size` jobs; one more
is `Busy`, with a `retry_after` estimate) and one worker thread, because a model runs one
generation at a time anyway. Each generation runs on a thread of its own that ends with it
(`koe.runtime.compute`: no long-lived thread keeps an OpenMP team, which keeps torch's parallel
loops fast). The worker takes the oldest job, then waits up to `batch_window` seconds
for more jobs of its kind (one-shot or streamed) that differ from it only in text, speed and
format (same `SpeechPlan.batch_key`, no explicit seed), a window past the latest that joined
while they keep coming (at most `BURST_WINDOWS` windows in all), and runs them as one generation:
`Synthesizer.speak_batch` for one-shot jobs, `Synthesizer.stream_batch` for streams (where the
model can batch streams), whose chunks go to each job's thread-safe queue as they are made. While
a generation runs, new requests pile up and form the next batch without any extra wait; where the
model's batches take rows while they run (Qwen3-TTS in int8 / int4), the streams at the head of
the queue that share a running stream batch's key join it at its next frame instead (`_join`).

A stream whose text arrives while it runs (`submit_text_stream`, a `TextFeed`) runs alone and
holds its lane until its text has ended and been spoken.

Every job carries a `CancelToken`: a job cancelled while waiting is dropped; a running job stops
within a frame; a batch stops when all of its jobs are cancelled (a stream cancelled in a batch
gets no more chunks at once). A batch that fails in a way one request could cause (before any
stream got a chunk) is spoken again one request at a time, so a poisoned request fails alone.
Thread-based and asyncio-free so any caller can use it; the HTTP server awaits `SpeechJob.future`
with `asyncio.wrap_future`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from koe.engines.base import BatchCancel, Cancelled, CancelToken
from koe.runtime import compute
from koe.service.errors import Busy, KoeError, RequestCancelled, Unavailable
from koe.service.synthesis.cache import RAISED
from koe.service.synthesis.plan import SpeechPlan
from koe.service.synthesis.requests import SpeechOutput, SpeechRequest, StreamChunk
from koe.service.synthesis.synthesizer import Synthesizer
from koe.service.synthesis.textfeed import TextFeed

log = logging.getLogger(__name__)

_END = object()  # closes a stream job's chunk queue
BURST_WINDOWS = 4  # a batch that keeps growing waits at most this many batch windows for more


@dataclass
class SpeechJob:
    """One request waiting for, or in, a generation. `future` resolves to a `SpeechOutput`."""

    plan: SpeechPlan
    batchable: bool = True  # False when the request fixed its own seed (kept reproducible: runs alone)
    cancel_token: CancelToken = field(default_factory=CancelToken)
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    submitted_at: float = field(default_factory=time.monotonic)
    batch_key: tuple = field(init=False)

    def __post_init__(self) -> None:
        self.batch_key = self.plan.batch_key()  # computed once, outside the lane's lock

    def cancel(self) -> None:
        """Stop this request: dropped if still waiting, stopped within a frame if running."""
        self.cancel_token.cancel()

    @property
    def cancelled(self) -> bool:
        return self.cancel_token.cancelled


@dataclass
class StreamJob(SpeechJob):
    """A streamed request: its worker puts `StreamChunk`s (then an end mark) on `chunks`."""

    first_chunk_s: float | None = None  # None: the model's default
    chunk_s: float | None = None
    chunks: queue.Queue = field(default_factory=queue.Queue)

    def next_chunk(self, timeout: float | None = None) -> StreamChunk | None:
        """The next chunk (blocking up to `timeout`, then `TimeoutError`); None once the stream has
        ended. A failed generation raises its `KoeError` here."""
        try:
            item = self.chunks.get(timeout=timeout)
        except queue.Empty as e:
            raise TimeoutError("no chunk yet") from e
        if item is _END:
            self.chunks.put(_END)  # every later call sees the end too
            return None
        if isinstance(item, BaseException):
            self.chunks.put(_END)
            raise item
        return item

    def __iter__(self) -> Iterator[StreamChunk]:
        while (chunk := self.next_chunk()) is not None:
            yield chunk


@dataclass
class TextStreamJob(StreamJob):
    """A stream whose text arrives in pieces (`feed`) while it runs: it runs alone (never batched,
    never joins a batch) and holds its model's lane from its start until its text ends."""

    feed: TextFeed = field(default_factory=TextFeed)


@dataclass
class LaneStats:
    """What one model's lane is doing and has done (for /health and tests)."""

    waiting: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    batches: int = 0
    largest_batch: int = 0
    seconds_per_run: float = 0.0  # moving average of one generation's wall time


class _Lane:
    """One model's queue and worker thread."""

    def __init__(self, scheduler: Scheduler, key: str, name: str) -> None:
        self.scheduler = scheduler
        self.key = key
        self.name = name
        self.waiting: deque[SpeechJob] = deque()
        self.running: list[SpeechJob] = []
        self.stats = LaneStats()
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._work, name=f"koe-lane-{name}", daemon=True)
        self.thread.start()

    # -- producer side ------------------------------------------------------------------------
    def put(self, job: SpeechJob) -> None:
        with self.cond:
            if self.closed:
                raise Unavailable("the server is shutting down")
            self._drop_cancelled()
            if len(self.waiting) >= self.scheduler.queue_size:
                raise Busy(
                    f"model {self.name!r} is busy: {len(self.waiting)} requests are already waiting (server.queue_size)",
                    retry_after=self.retry_after(),
                    hint="retry after the time in the Retry-After header",
                )
            self.waiting.append(job)
            self.stats.waiting = len(self.waiting)
            self.cond.notify_all()

    def _drop_cancelled(self) -> None:
        """Free the slots of waiting jobs whose clients went away. Called with `cond` held."""
        gone = [job for job in self.waiting if job.cancelled]
        for job in gone:
            self.waiting.remove(job)
            self._count_cancelled(job)

    def retry_after(self) -> float:
        """Seconds until a queue slot is likely free: the waiting batches times a generation's time."""
        per_run = self.stats.seconds_per_run or 1.0
        batches = math.ceil((len(self.waiting) + 1) / self.scheduler.max_batch_size)
        return float(max(1, math.ceil(per_run * batches)))

    def close(self) -> None:
        with self.cond:
            self.closed = True
            dropped = list(self.waiting)
            self.waiting.clear()
            for job in self.running:
                job.cancel()
            self.cond.notify_all()
        for job in dropped:
            job.cancel()
            _fail(job, Unavailable("the server is shutting down"))

    # -- worker side --------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.waiting and not self.closed:
                    self.cond.wait()
                if self.closed:
                    return
                batch = self._take_batch()
                if self.closed:  # closed while the batch was forming
                    for job in batch:
                        _fail(job, Unavailable("the server is shutting down"))
                    return
                self.running = batch
                self.stats.waiting = len(self.waiting)
                self.stats.running = len(batch)
            if batch:
                compute.run(self._run, batch)  # on a thread that ends with it (koe.runtime.compute)
            with self.cond:
                self.running = []
                self.stats.running = 0

    def _take_batch(self) -> list[SpeechJob]:
        """Pop the oldest live job and, for a one-shot batchable job, its compatible followers
        (waiting up to the batch window for more). Called with `cond` held."""
        while self.waiting:
            job = self.waiting.popleft()
            if job.cancelled:
                self._count_cancelled(job)
                continue
            break
        else:
            return []
        batch = [job]
        if not job.batchable or self.scheduler.max_batch_size < 2:
            return batch
        kind = type(job)  # streams batch with streams, one-shot jobs with one-shot jobs
        key = job.batch_key
        window = self.scheduler.batch_window
        start = time.monotonic()
        deadline = start + window
        while len(batch) < self.scheduler.max_batch_size:
            size = len(batch)
            for other in list(self.waiting):
                if len(batch) >= self.scheduler.max_batch_size:
                    break
                if type(other) is kind and other.batchable and not other.cancelled and other.batch_key == key:
                    self.waiting.remove(other)
                    batch.append(other)
            if len(batch) > size:  # a burst still arriving: wait a window past its latest job, at most BURST_WINDOWS in all
                deadline = min(time.monotonic() + window, start + BURST_WINDOWS * window)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or len(batch) >= self.scheduler.max_batch_size or self.closed:
                break
            self.cond.wait(remaining)
        return batch

    def _count_cancelled(self, job: SpeechJob) -> None:
        self.stats.cancelled += 1
        _fail(job, RequestCancelled("the request was cancelled before it started"))

    def _run(self, batch: list[SpeechJob]) -> None:
        started = time.monotonic()
        batch = [job for job in batch if job.future.set_running_or_notify_cancel()]  # drops futures cancelled by their owner
        if not batch:
            return
        size = len(batch)  # streams that join it later count in largest_batch as they join
        try:
            if isinstance(batch[0], StreamJob):
                self._run_streams(batch) if batch[0].batchable else self._run_stream(batch[0])  # a batchable stream may be joined
            else:
                self._run_speak(batch)
        except KoeError as e:
            for job in batch:
                _fail(job, e)
        except Exception as e:  # an engine bug must not kill the lane; the client gets a 500
            log.exception("generation failed on model %s", self.name, extra=RAISED)  # the job's future raises it
            for job in batch:
                _fail(job, e)
        with self.cond:
            elapsed = time.monotonic() - started
            s = self.stats
            s.seconds_per_run = elapsed if not s.seconds_per_run else 0.7 * s.seconds_per_run + 0.3 * elapsed
            s.batches += 1
            s.largest_batch = max(s.largest_batch, size)
            for job in batch:
                outcome = _outcome(job)
                setattr(s, outcome, getattr(s, outcome) + 1)

    def _run_speak(self, batch: list[SpeechJob]) -> None:
        """Speak one job, or a batch as one generation. A batch that fails in a way one request
        could cause (`one_requests_fault`) is spoken again one job at a time, so the culprit fails
        alone and the others get their audio; any other failure (cancellation, an unloadable
        model, ...) is every job's and propagates."""
        synth = self.scheduler.synthesizer
        if len(batch) == 1:
            _finish(batch[0], synth.speak(batch[0].plan, cancel=batch[0].cancel_token))
            return
        log.debug("batching %d requests on %s", len(batch), self.name)
        token = BatchCancel([j.cancel_token for j in batch])
        try:
            outputs = synth.speak_batch([j.plan for j in batch], cancel=token)
        except Exception as e:
            if not one_requests_fault(e):
                raise
            log.warning("a batch of %d requests on %s failed (%s: %s); speaking them one at a time", len(batch), self.name, type(e).__name__, e)
            for job in batch:
                self._run_alone(job)
            return
        for job, out in zip(batch, outputs, strict=True):
            _finish(job, out)

    def _run_alone(self, job: SpeechJob) -> None:
        """Speak (or stream) `job` by itself; its failure is its own (set on its future, never raised)."""
        if job.cancelled:
            _fail(job, RequestCancelled("the request was cancelled"))
            return
        try:
            if isinstance(job, StreamJob):
                self._run_stream(job)
            else:
                _finish(job, self.scheduler.synthesizer.speak(job.plan, cancel=job.cancel_token))
        except KoeError as e:
            _fail(job, e)
        except Exception as e:
            log.exception("generation failed on model %s", self.name, extra=RAISED)  # the job's future raises it
            _fail(job, e)

    def _run_streams(self, batch: list[StreamJob]) -> None:
        """Streams as one batched generation, each job's chunks handed to it as they come. A job
        cancelled on the way gets no more chunks (and ends cancelled); the others go on. A batch
        that fails before any chunk in a way one request could cause is streamed again one job at a
        time, as `_run_speak` does; after a chunk, every unfinished job gets the error."""
        log.debug("batching %d streams on %s", len(batch), self.name)
        delivered = False
        try:
            pairs = self.scheduler.synthesizer.stream_batch(
                [j.plan for j in batch],
                [j.cancel_token for j in batch],
                first_chunk_s=[j.first_chunk_s for j in batch],
                chunk_s=[j.chunk_s for j in batch],
                admit=lambda: self._join(batch),
            )
            with contextlib.closing(pairs):
                for i, chunk in pairs:
                    job, delivered = batch[i], True
                    if isinstance(chunk, BaseException):  # a stream that joined and cannot be spoken: its own failure
                        _fail(job, chunk)
                        continue
                    job.chunks.put(chunk)
                    if chunk.final:
                        _end(job)
        except Exception as e:
            if delivered or not one_requests_fault(e):
                raise
            log.warning("a batch of %d streams on %s failed (%s: %s); streaming them one at a time", len(batch), self.name, type(e).__name__, e)
            for job in batch:
                self._run_alone(job)
            return
        for job in batch:  # cancelled on the way
            _fail(job, RequestCancelled("the request was cancelled"))

    def _join(self, batch: list[StreamJob]) -> list[tuple]:
        """Streams that join `batch` while it runs (where the model takes rows then): the waiting
        streams at the head of the queue that it could have started with, while it has room. Only
        from the head, so a request of another kind waits for no more than this batch's end."""
        taken: list[StreamJob] = []
        with self.cond:
            room = self.scheduler.max_batch_size - sum(1 for j in batch if not j.future.done())
            while room > 0 and self.waiting and not self.closed:
                job = self.waiting[0]
                if job.cancelled:
                    self._count_cancelled(self.waiting.popleft())
                    continue
                if type(job) is not StreamJob or not job.batchable or job.batch_key != batch[0].batch_key:
                    break
                self.waiting.popleft()
                if job.future.set_running_or_notify_cancel():
                    taken.append(job)
                    room -= 1
            if taken:
                batch.extend(taken)
                self.running.extend(taken)
                s = self.stats
                s.waiting, s.running = len(self.waiting), sum(1 for j in self.running if not j.future.done())
                s.largest_batch = max(s.largest_batch, s.running)
        return [(j.plan, j.cancel_token, j.first_chunk_s, j.chunk_s) for j in taken]

    def _run_stream(self, job: StreamJob) -> None:
        synth = self.scheduler.synthesizer
        sizes = {"first_chunk_s": job.first_chunk_s, "chunk_s": job.chunk_s}
        if isinstance(job, TextStreamJob):
            chunks = synth.stream_text(job.plan, job.feed, job.cancel_token, **sizes)
        else:
            chunks = synth.stream(job.plan, job.cancel_token, **sizes)
        with contextlib.closing(chunks):
            for chunk in chunks:
                job.chunks.put(chunk)
                if job.cancelled and not chunk.final:
                    raise RequestCancelled("the request was cancelled")
        _end(job)


def one_requests_fault(error: BaseException) -> bool:
    """Whether a failed batch may owe its failure to one of its requests, so that speaking them
    one by one can save the others: a request error (4xx) or an unexpected engine error (a
    tokenizer that chokes on one text, say). Not cancellation, a busy or unavailable model, a
    settings or storage fault (5xx), nor an OS error (a full disk fails every request alike)."""
    if isinstance(error, KoeError):
        return error.status < 500 and not isinstance(error, (RequestCancelled, Busy))
    return isinstance(error, Exception) and not isinstance(error, (OSError, Cancelled))


def _finish(job: SpeechJob, output: SpeechOutput) -> None:
    if not job.future.done():
        job.future.set_result(output)


def _outcome(job: SpeechJob) -> str:
    """The stats field a finished job counts in: completed, cancelled or failed."""
    if not job.future.done():
        return "completed"
    error = job.future.exception()
    if error is None:
        return "completed"
    return "cancelled" if isinstance(error, RequestCancelled) else "failed"


def _end(job: StreamJob) -> None:
    """A stream whose last chunk is out: its reader sees the end, its future resolves."""
    if not job.future.done():
        job.chunks.put(_END)
        job.future.set_result(None)


def _fail(job: SpeechJob, error: BaseException) -> None:
    """`error` for a job not yet finished (a stream's reader gets it after the chunks it has)."""
    if job.future.done():
        return
    job.future.set_exception(error)
    if isinstance(job, StreamJob):
        job.chunks.put(error)
        job.chunks.put(_END)


class Scheduler:
    """Queues requests per model and runs them on the synthesizer, batching compatible ones.

    `submit` / `submit_stream` validate (plan) the request in the caller's thread, so bad input
    raises at once, then queue it; a full queue raises `Busy` (HTTP 429) with `retry_after`.
    """

    def __init__(
        self,
        synthesizer: Synthesizer,
        *,
        queue_size: int = 16,
        max_batch_size: int = 8,
        batch_window: float = 0.05,
    ) -> None:
        self.synthesizer = synthesizer
        self.queue_size = max(1, int(queue_size))
        self.max_batch_size = max(1, int(max_batch_size))
        self.batch_window = max(0.0, float(batch_window))
        self._lanes: dict[str, _Lane] = {}
        self._guard = threading.Lock()
        self._closed = False

    def submit(self, request: SpeechRequest | SpeechPlan, *, batchable: bool | None = None) -> SpeechJob:
        """Queue a one-shot request; `job.future` gives its `SpeechOutput`.

        A request with an explicit seed runs alone (a batch shares one seed), unless `batchable`.
        """
        plan = self._plan(request)
        job = SpeechJob(plan, batchable=plan.batchable and (not plan.seed_given if batchable is None else batchable))
        self._lane(plan).put(job)
        return job

    def submit_stream(self, request: SpeechRequest | SpeechPlan, *, first_chunk_s: float | None = None, chunk_s: float | None = None) -> StreamJob:
        """Queue a streamed request; read its chunks with `job.next_chunk()` or by iterating it.

        Chunks carry about `first_chunk_s`, then `chunk_s` seconds of audio (None: the model's
        defaults). Streams without an explicit seed that arrive together share one batched
        generation where the model can batch streams (and join a running one where its batches
        take rows while they run)."""
        plan = self._plan(request)
        job = StreamJob(plan, batchable=plan.stream_batchable and not plan.seed_given, first_chunk_s=first_chunk_s, chunk_s=chunk_s)
        self._lane(plan).put(job)
        return job

    def submit_text_stream(
        self, request: SpeechRequest | SpeechPlan, feed: TextFeed, *, first_chunk_s: float | None = None, chunk_s: float | None = None
    ) -> TextStreamJob:
        """Queue a stream whose text arrives in pieces: `feed` gets them (`put`, then `end`) while the
        job waits or runs; read its chunks as a `submit_stream` job's. The request's own text is not
        spoken. The job's cancel handle is the feed's, so cancelling it also stops a generation that
        waits for text. It runs alone, holding the model's lane until its text has ended and been spoken."""
        plan = self._plan(request)
        job = TextStreamJob(plan, batchable=False, cancel_token=feed.cancel, first_chunk_s=first_chunk_s, chunk_s=chunk_s, feed=feed)
        self._lane(plan).put(job)
        return job

    def speak(self, request: SpeechRequest | SpeechPlan, timeout: float | None = None) -> SpeechOutput:
        """Submit and wait (a convenience for synchronous callers)."""
        job = self.submit(request)
        try:
            return job.future.result(timeout)
        finally:
            if not job.future.done():
                job.cancel()

    def stats(self) -> dict[str, LaneStats]:
        """Each lane's stats by model name (a snapshot)."""
        with self._guard:
            lanes = list(self._lanes.values())
        out = {}
        for lane in lanes:
            with lane.cond:
                out[lane.name] = LaneStats(**vars(lane.stats))
        return out

    def close(self, timeout: float = 5.0) -> None:
        """Refuse new work, fail waiting jobs, cancel running ones and stop the workers."""
        with self._guard:
            self._closed = True
            lanes = list(self._lanes.values())
        for lane in lanes:
            lane.close()
        for lane in lanes:
            lane.thread.join(timeout)

    def _plan(self, request: SpeechRequest | SpeechPlan) -> SpeechPlan:
        return request if isinstance(request, SpeechPlan) else self.synthesizer.plan(request)

    def _lane(self, plan: SpeechPlan) -> _Lane:
        key = plan.model.key
        with self._guard:
            if self._closed:
                raise Unavailable("the server is shutting down")
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane(self, key, plan.model.name)
            return lane
