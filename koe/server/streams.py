"""Waiting for scheduler jobs from the event loop, and streaming their chunks (audio bytes or SSE).

A client that goes away cancels its job: while a job waits or runs, `request.is_disconnected()`
is polled; once a stream has started, Starlette cancels the sending task when the client
disconnects, and the generator's `finally` cancels the job (the engine stops within a frame).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator

import anyio
from fastapi import Request

from koe.service.errors import KoeError, RequestCancelled
from koe.service.requests import SpeechOutput, StreamChunk
from koe.service.scheduler import SpeechJob, StreamJob
from koe.server.errors import error_body

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1


async def wait_for_output(job: SpeechJob, request: Request) -> SpeechOutput:
    """The job's output; cancels the job (and raises `RequestCancelled`) if the client disconnects."""
    future = asyncio.wrap_future(job.future)
    try:
        while True:
            done, _ = await asyncio.wait({future}, timeout=POLL_SECONDS)
            if done:
                return future.result()
            if await request.is_disconnected():
                log.info("client went away; cancelling its request")
                job.cancel()
                raise RequestCancelled("the client disconnected")
    finally:
        if not job.future.done():
            job.cancel()
            future.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future) -> None:
    """Read a finished future's exception, so an abandoned job's error is not logged as unretrieved."""
    if not future.cancelled():
        future.exception()


async def first_chunk(job: StreamJob, request: Request) -> StreamChunk | None:
    """Wait for a stream's first chunk (so errors still get a proper status), watching for disconnects."""
    try:
        while True:
            try:
                return await anyio.to_thread.run_sync(job.next_chunk, POLL_SECONDS)
            except TimeoutError:
                if await request.is_disconnected():
                    log.info("client went away before its stream started; cancelling it")
                    raise RequestCancelled("the client disconnected") from None
    except BaseException:
        job.cancel()
        raise


async def _chunks(job: StreamJob, first: StreamChunk | None) -> AsyncIterator[StreamChunk]:
    """`first`, then the job's chunks as they are made; cancels the job when the consumer stops early."""
    finished = False
    try:
        chunk = first
        while chunk is not None:
            finished = chunk.final
            yield chunk
            if finished:
                return
            chunk = await anyio.to_thread.run_sync(job.next_chunk, None, abandon_on_cancel=True)
        finished = True
    finally:
        if not finished:
            log.info("stream stopped early (client gone?); cancelling its generation")
            job.cancel()


async def audio_bytes(job: StreamJob, first: StreamChunk | None) -> AsyncIterator[bytes]:
    """The encoded audio, chunk by chunk (concatenated: one playable file in the request's format)."""
    async for chunk in _chunks(job, first):
        if chunk.data:
            yield chunk.data


async def sse_events(job: StreamJob, first: StreamChunk | None, input_chars: int) -> AsyncIterator[bytes]:
    """OpenAI's speech SSE: `speech.audio.delta` events (base64 audio), then `speech.audio.done`.

    `usage` counts the input's characters as input tokens and codec frames as output tokens.
    """
    frames = 0
    try:
        async for chunk in _chunks(job, first):
            if chunk.data:
                yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(chunk.data).decode("ascii")})
            if chunk.final:
                frames = int(chunk.metadata.get("frames") or 0)
    except KoeError as e:
        if isinstance(e, RequestCancelled):
            raise
        yield _event({"type": "error", **error_body(e.status, str(e), param=e.param, code=e.code)})
        return
    usage = {"input_tokens": input_chars, "output_tokens": frames, "total_tokens": input_chars + frames}
    yield _event({"type": "speech.audio.done", "usage": usage})


def _event(data: dict) -> bytes:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
