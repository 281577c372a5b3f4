"""Waiting for scheduler jobs from the event loop, and streaming their chunks (audio bytes or SSE).

A client that goes away cancels its job: while a job waits or runs, `request.is_disconnected()`
is polled; once a stream has started, Starlette cancels the sending task when the client
disconnects, and the generator's `finally` cancels the job (the engine stops within a frame).
The shutdown's `Drain` is polled the same way: when its grace runs out, jobs are cancelled and
`ShutdownCancelled` is raised (see `guards.DrainGuard` for what the client then gets).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator

import anyio
from fastapi import Request

from koe.server.errors import error_body
from koe.server.state import Drain, ShutdownCancelled
from koe.service.errors import KoeError, RequestCancelled, Unavailable
from koe.service.synthesis.requests import SpeechOutput, StreamChunk
from koe.service.synthesis.scheduler import SpeechJob, StreamJob

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1


async def wait_for_output(job: SpeechJob, request: Request, drain: Drain) -> SpeechOutput:
    """The job's output; cancels the job (and raises `RequestCancelled`) if the client disconnects,
    or (`ShutdownCancelled`) when the shutdown's grace runs out."""
    future = asyncio.wrap_future(job.future)
    try:
        while True:
            done, _ = await asyncio.wait({future}, timeout=POLL_SECONDS)
            if done:
                return _result(future, drain)
            if drain.expired:
                log.info("the shutdown's grace is over; cancelling a request that is still waiting or running")
                job.cancel()
                raise ShutdownCancelled(drain.message())
            if await request.is_disconnected():
                log.info("client went away; cancelling its request")
                job.cancel()
                raise RequestCancelled("the client disconnected")
    finally:
        if not job.future.done():
            job.cancel()
            future.add_done_callback(_retrieve)


def _result(future: asyncio.Future, drain: Drain) -> SpeechOutput:
    """A finished job's output; a job the shutdown cancelled (scheduler closed) counts as cut by it."""
    try:
        return future.result()
    except (RequestCancelled, Unavailable) as e:
        if drain.draining:
            raise ShutdownCancelled(drain.message()) from e
        raise


def _retrieve(future: asyncio.Future) -> None:
    """Read a finished future's exception, so an abandoned job's error is not logged as unretrieved."""
    if not future.cancelled():
        future.exception()


async def first_chunk(job: StreamJob, request: Request, drain: Drain) -> StreamChunk | None:
    """Wait for a stream's first chunk (so errors still get a proper status), watching for
    disconnects and the shutdown's grace (`ShutdownCancelled`)."""
    try:
        while True:
            if drain.expired:
                raise ShutdownCancelled(drain.message())
            try:
                return await anyio.to_thread.run_sync(job.next_chunk, POLL_SECONDS)
            except TimeoutError:
                if await request.is_disconnected():
                    log.info("client went away before its stream started; cancelling it")
                    raise RequestCancelled("the client disconnected") from None
    except BaseException:
        job.cancel()
        raise


async def _next_chunk(job: StreamJob, drain: Drain) -> StreamChunk | None:
    """The job's next chunk, polled so that the shutdown's grace running out is noticed (`ShutdownCancelled`)."""
    while True:
        if drain.expired:
            raise ShutdownCancelled(drain.message())
        try:
            return await anyio.to_thread.run_sync(job.next_chunk, POLL_SECONDS, abandon_on_cancel=True)
        except TimeoutError:
            continue


async def _chunks(job: StreamJob, first: StreamChunk | None, drain: Drain) -> AsyncIterator[StreamChunk]:
    """`first`, then the job's chunks as they are made; cancels the job when the consumer stops early."""
    finished = False
    try:
        chunk = first
        while chunk is not None:
            finished = chunk.final
            yield chunk
            if finished:
                return
            chunk = await _next_chunk(job, drain)
        finished = True
    finally:
        if not finished:
            log.info("stream stopped early (client gone or shutdown); cancelling its generation")
            job.cancel()


async def audio_bytes(job: StreamJob, first: StreamChunk | None, drain: Drain) -> AsyncIterator[bytes]:
    """The encoded audio, chunk by chunk (concatenated: one playable file in the request's format).

    There is no way to report an error once the bytes flow: a failure, or the shutdown, cuts the
    stream (the connection closes without the final chunk, so the client sees it is incomplete)."""
    async for chunk in _chunks(job, first, drain):
        if chunk.data:
            yield chunk.data


async def sse_events(job: StreamJob, first: StreamChunk | None, input_chars: int, drain: Drain) -> AsyncIterator[bytes]:
    """OpenAI's speech SSE: `speech.audio.delta` events (base64 audio), then `speech.audio.done`.

    `usage` counts the input's characters as input tokens and codec frames as output tokens. A stream
    that fails for any reason ends with one `error` event (OpenAI's error object, `type: "error"`):
    a service error's status and message, 503 when the shutdown cut it, 500 for anything else
    (logged with its traceback).
    """
    frames = 0
    try:
        async for chunk in _chunks(job, first, drain):
            if chunk.data:
                yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(chunk.data).decode("ascii")})
            if chunk.final:
                frames = int(chunk.metadata.get("frames") or 0)
    except Exception as e:  # noqa: BLE001 - every failure must reach the client as an event
        yield _event({"type": "error", **_error_of(e, drain)})
        return
    usage = {"input_tokens": input_chars, "output_tokens": frames, "total_tokens": input_chars + frames}
    yield _event({"type": "speech.audio.done", "usage": usage})


def _error_of(e: Exception, drain: Drain) -> dict:
    """The OpenAI error body an SSE stream ends with when `e` stopped it."""
    return stream_failure(e, drain, "an SSE stream")[1]


def stream_failure(e: Exception, drain: Drain, what: str) -> tuple[int, dict]:
    """The HTTP status and OpenAI error body a stream (`what`, for the log) ends with when `e`
    stopped it: a service error's, 503 when the shutdown cut it, 500 for anything else (logged
    with its traceback)."""
    if isinstance(e, ShutdownCancelled) or (drain.draining and isinstance(e, RequestCancelled | Unavailable)):
        log.info("%s was cut by the shutdown", what)
        return 503, error_body(503, drain.message(), code="shutting_down")
    if isinstance(e, KoeError):
        if e.status >= 500:
            log.error("%s failed: %s", what, e)
        return e.status, error_body(e.status, str(e), param=e.param, code=e.code)
    log.error("%s failed", what, exc_info=e)
    return 500, error_body(500, f"internal error: {type(e).__name__}: {e}", code="internal_error")


def _event(data: dict) -> bytes:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
