"""`WS /v1/audio/speech/stream`: text in as it is written (an LLM's tokens), speech out as it is made.

One utterance per connection. The client sends JSON text messages: `start` first (the fields of
`POST /v1/audio/speech` but `input` and `stream_format`), then `text` pieces, then `end`; the
server answers `speech.started`, the audio as binary messages (concatenated: one file in the
chosen `response_format`), and `speech.audio.done` (usage, duration, seed, warnings), then closes
(1000). Any failure is one `error` message (the HTTP API's error object) and a close whose code
says what kind of failure it was (`CLOSE_CODES`). docs/server.md has the protocol in full.

Every family takes streamed text: each sentence is spoken as soon as it is complete, or as the
family decodes streamed text itself (`Capabilities.text_stream`). The stream is a job on the
model's lane like any request (`Scheduler.submit_text_stream`: the queue limit, 429 when full),
but it holds the lane from its start until its text has ended and been spoken.

The guards are the HTTP routes' (a WebSocket is not covered by CORS): the Host and Origin checks
(`guards.BrowserGuard`, every handshake as a state-changing request), the access token (checked
before the handshake is accepted; from `Authorization: Bearer`, or, since a browser cannot set
that header on a WebSocket, from the subprotocol `koe.bearer.<base64url of the token>` offered
beside `koe`, which the server then selects: it never sends the token back), the drain (refused while shutting down; an open stream gets the
grace, then an `error` and close 1012), `server.max_input_chars` for the whole text, uvicorn's
message size cap, `server.body_timeout_s` for the longest pause before the text has ended, and
`server.max_stream_s` for the whole stream (a client trickling text just inside the pause limit
would otherwise hold the model for hours). A client that goes away cancels its generation.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import time
from dataclasses import replace
from typing import Any

import anyio
from fastapi import APIRouter, WebSocket
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketDisconnect, WebSocketState

from koe.server.auth import BearerAuth
from koe.server.errors import _validation_message, client_text, error_body, error_response
from koe.server.guards import refuse
from koe.server.limits import message_limit
from koe.server.schemas import SpeechBody
from koe.server.state import ServerState
from koe.server.streams import POLL_SECONDS, stream_failure
from koe.service.synthesis.scheduler import TextStreamJob
from koe.service.synthesis.textfeed import TextFeed
from koe.text.checks import text_problem

log = logging.getLogger(__name__)

router = APIRouter()

PATH = "/v1/audio/speech/stream"
PLACEHOLDER = "-"  # the text a start message is planned with (`plan` needs one; the stream's text comes in pieces)
# A browser cannot set Authorization on a WebSocket; it can offer subprotocols. A client offers
# PROTOCOL and TOKEN_PROTOCOL + base64url(token) (as Kubernetes' base64url.bearer.authorization.k8s.io.
# does: any token fits a subprotocol's characters so); the server selects PROTOCOL, never the token's.
PROTOCOL = "koe"
TOKEN_PROTOCOL = "koe.bearer."

# The close code that follows an `error` message, by its HTTP status (RFC 6455's codes).
CLOSE_CODES = {413: 1009, 429: 1013, 503: 1012}  # message too big, try again later, service restart
CLOSE_CLIENT_ERROR = 1008  # policy violation: any other 4xx
CLOSE_SERVER_ERROR = 1011  # internal error: any other 5xx


class _Refused(Exception):
    """What the stream answers and closes with: an error body (`error_body`'s) and its close code."""

    def __init__(self, body: dict, close: int) -> None:
        super().__init__(body["error"]["message"])
        self.body, self.close = body, close


class _Gone(Exception):
    """The client closed the connection (or it broke)."""


def close_code(status: int) -> int:
    """The WebSocket close code after an `error` message of HTTP `status`."""
    return CLOSE_CODES.get(status) or (CLOSE_SERVER_ERROR if status >= 500 else CLOSE_CLIENT_ERROR)


def _refused(status: int, message: str, *, param: str | None = None, code: str | None = None) -> _Refused:
    return _Refused(error_body(status, message, param=param, code=code), close_code(status))


@router.websocket(PATH)
async def speech_stream(websocket: WebSocket) -> None:
    """Speak text that arrives in pieces; see the module's docstring and docs/server.md."""
    state: ServerState = websocket.app.state.koe
    server = state.settings.server
    offered = offered_protocols(websocket.headers.getlist("sec-websocket-protocol"))
    tokens = [p for p in offered if p.startswith(TOKEN_PROTOCOL)]
    problem = None
    if len(tokens) > 1:
        problem = f"offer at most one {TOKEN_PROTOCOL}… subprotocol (the access token)"
    elif tokens and PROTOCOL not in offered:
        problem = f"offer the subprotocol {PROTOCOL!r} beside {TOKEN_PROTOCOL}…: the server selects {PROTOCOL!r} (it never answers with the token)"
    if problem is not None:
        log.warning("refused a WebSocket on %s: %s", PATH, problem)
        await refuse(websocket.scope, websocket.receive, websocket.send, error_response(400, problem, param="Sec-WebSocket-Protocol", code="invalid_protocol"))
        return
    auth = BearerAuth(server.token.get_secret_value() if server.token else None)
    header = websocket.headers.get("authorization", "")
    refusal = auth.refusal(header or (token_header(tokens[0]) if tokens else ""))  # the header wins where both are sent
    if refusal is not None:
        log.warning("refused a WebSocket on %s: %s", PATH, refusal)  # never the token
        if tokens and not header:
            refusal = f"invalid access token (the {TOKEN_PROTOCOL}… subprotocol carries the token in base64url, without padding)"
        elif not header:
            refusal = f"{refusal}, or from a browser offer the subprotocols {PROTOCOL!r} and '{TOKEN_PROTOCOL}<base64url of the token>'"
        denial = error_response(401, refusal, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        await refuse(websocket.scope, websocket.receive, websocket.send, denial)
        return
    await websocket.accept(subprotocol=PROTOCOL if PROTOCOL in offered else None)
    await _Stream(websocket, state).run()


def offered_protocols(values: list[str]) -> list[str]:
    """The subprotocols a handshake offers: every Sec-WebSocket-Protocol header, split at its commas
    (read from the headers, not the ASGI scope: uvicorn 0.50 put each header there unsplit)."""
    return [p.strip() for value in values for p in value.split(",") if p.strip()]


def token_header(protocol: str) -> str:
    """The Authorization header a `koe.bearer.<base64url>` subprotocol stands for: `Bearer TOKEN`,
    or `Bearer ` (an invalid token) when its base64url or UTF-8 is broken."""
    encoded = protocol[len(TOKEN_PROTOCOL) :]
    try:
        token = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        token = ""
    return f"Bearer {token}"


class _Stream:
    """One connection's utterance: the reader puts text pieces on the feed, `run` sends the audio."""

    def __init__(self, websocket: WebSocket, state: ServerState) -> None:
        self.ws, self.state = websocket, state
        server = state.settings.server
        self.idle_s = server.body_timeout_s
        self.max_chars = server.max_input_chars
        self.max_s = server.max_stream_s
        self.began = time.monotonic()  # reset when the start message has come
        self.feed = TextFeed()
        self.job: TextStreamJob | None = None

    async def run(self) -> None:
        reader: asyncio.Task | None = None
        try:
            start = await self._start()
            self.began = time.monotonic()
            self.job = await run_in_threadpool(self._submit, start)
            await self._send(self._started(self.job))
            reader = asyncio.create_task(self._read())
            await self._send_audio(self.job, reader)
        except _Gone:
            log.info("a text stream's client went away; cancelling its generation")
        except _Refused as e:
            await self._close_with(e.body, e.close)
        except Exception as e:  # noqa: BLE001 - every failure reaches the client as an `error` message
            status, body = stream_failure(e, self.state.drain, "a text stream")
            retry_after = getattr(e, "retry_after", None)
            if retry_after is not None:  # busy: when a queue slot is likely free
                body["retry_after"] = max(1, round(retry_after))
            await self._close_with(body, close_code(status))
        finally:
            self.feed.cancel.cancel()  # a job still waiting or running stops (a finished one is untouched)
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader

    # -- the client's messages ----------------------------------------------------------------
    async def _message(self, timeout: float | None) -> dict[str, Any]:
        """The client's next message as a JSON object; `_Gone` when it closed, `_Refused` for
        anything that is not one, or when nothing came within `timeout` seconds."""
        try:
            with anyio.fail_after(timeout):
                message = await self.ws.receive()
        except TimeoutError:
            what = "the start message" if self.job is None else "more text, or the end message"
            raise _refused(408, f"{what} did not come: nothing came for {self.idle_s:g} s (server.body_timeout_s)", code="timeout") from None
        if message["type"] == "websocket.disconnect":
            raise _Gone
        text = message.get("text")
        if text is None:
            raise _refused(400, "send JSON text messages (start, text, end); binary messages are not taken", code="invalid_message")
        if len(text) > message_limit(self.max_chars):
            raise _refused(413, f"a message of {len(text)} characters is larger than any text allowed (server.max_input_chars)", code="too_large")
        try:
            data = json.loads(text)
        except ValueError as e:
            raise _refused(400, f"a message is not JSON ({e})", code="invalid_message") from None
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise _refused(400, 'each message is a JSON object with a "type": start, text or end', code="invalid_message")
        return data

    async def _start(self) -> SpeechBody:
        """The start message as a speech body (its text the placeholder; an `input` in it is the first piece)."""
        data = await self._message(self.idle_s)
        if data["type"] != "start":
            raise _refused(400, f'the first message must be "start" (the model, voice and format), not {data["type"]!r}', param="type", code="invalid_message")
        fields = {k: v for k, v in data.items() if k != "type"}
        if "stream_format" in fields:
            raise _refused(
                400, "stream_format: unknown field here (the audio is always streamed, as binary messages)", param="stream_format", code="invalid_value"
            )
        first = fields.pop("input", None)
        try:
            body = SpeechBody(**fields, input=PLACEHOLDER)
        except ValidationError as e:
            message, param = _validation_message(e)  # type: ignore[arg-type]  # the same lines as the HTTP routes' 400s
            raise _refused(400, message, param=param, code="invalid_value") from None
        if first is not None:
            self._put(first)
        return body

    def _submit(self, body: SpeechBody) -> TextStreamJob:
        """Plan the start message and queue the stream (blocking: reads model and voice files)."""
        plan = replace(self.state.plan_speech(body), text="")
        return self.state.scheduler.submit_text_stream(plan, self.feed, first_chunk_s=self.state.first_chunk_s, chunk_s=self.state.chunk_s)

    def _put(self, text: Any) -> None:
        """One piece of text on the feed, checked, within `server.max_input_chars` for the whole."""
        problem = text_problem(text, "text", controls=True)
        if problem is not None:
            raise _refused(400, problem.message, param="text", code="invalid_value")
        if self.feed.chars + len(text) > self.max_chars:
            raise _refused(413, f"the text is longer than {self.max_chars} characters (server.max_input_chars)", param="text", code="too_large")
        self.feed.put(text)

    async def _read(self) -> None:
        """Text pieces onto the feed until the end message; then only watch for the client closing."""
        while True:
            data = await self._message(None if self.feed.ended else self.idle_s)
            kind = data["type"]
            if self.feed.ended:
                raise _refused(400, f"a {kind!r} message after the end message: the text has ended", param="type", code="invalid_message")
            if kind == "text":
                if "text" not in data:
                    raise _refused(400, 'a text message needs its "text"', param="text", code="invalid_message")
                self._put(data["text"])
            elif kind == "end":
                self.feed.end()
            elif kind == "start":
                raise _refused(400, "the stream has started already: one utterance per connection", param="type", code="invalid_message")
            else:
                raise _refused(400, f"unknown message type {kind!r}: start, text or end", param="type", code="invalid_message")

    # -- the server's messages ----------------------------------------------------------------
    def _started(self, job: TextStreamJob) -> dict[str, Any]:
        plan = job.plan
        caps = self.state.synthesizer.planner.details(plan.model).capabilities
        return {
            "type": "speech.started",
            "model": plan.model.name,
            "voice": plan.voice_label,
            "seed": plan.seed,
            "response_format": plan.format.name,
            "media_type": plan.format.media_type,
            "sample_rate": plan.format.output_rate(caps.sample_rate) if caps is not None else None,
            "text_stream": bool(caps and caps.text_stream),
        }

    async def _send_audio(self, job: TextStreamJob, reader: asyncio.Task) -> None:
        """The job's audio as binary messages as it is made, then `speech.audio.done`. A failure of
        the reader (the client gone, a bad message, the idle timeout) or the drain's grace running
        out stops it."""
        seconds, frames, started = 0.0, 0, time.monotonic()
        while True:
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                raise reader.exception()  # type: ignore[misc]
            if self.state.drain.expired:
                log.info("the shutdown's grace is over; ending a text stream")
                raise _refused(503, self.state.drain.message(), code="shutting_down")
            if time.monotonic() - self.began > self.max_s:
                log.info("a text stream ran past server.max_stream_s (%g s); ending it", self.max_s)
                raise _refused(
                    408,
                    f"the stream lasted longer than {self.max_s:g} s (server.max_stream_s): end the text sooner, one connection per reply",
                    code="stream_too_long",
                )
            try:
                chunk = await anyio.to_thread.run_sync(job.next_chunk, POLL_SECONDS, abandon_on_cancel=True)
            except TimeoutError:
                continue
            if chunk is None:
                return
            if chunk.data:
                await self._send(chunk.data)
            seconds += len(chunk.samples) / chunk.sample_rate
            if chunk.final:
                frames = int(chunk.metadata.get("frames") or 0)
                chars = self.feed.chars
                await self._send(
                    {
                        "type": "speech.audio.done",
                        "usage": {"input_tokens": chars, "output_tokens": frames, "total_tokens": chars + frames},
                        "duration": round(seconds, 3),
                        "seed": int(chunk.metadata.get("seed", job.plan.seed)),
                        "batch_size": int(chunk.metadata.get("batch_size", 1)),
                        "warnings": [client_text(w) for w in chunk.warnings],  # paths redacted
                        "elapsed": round(time.monotonic() - started, 3),
                    }
                )
                with contextlib.suppress(Exception):
                    await self.ws.close(1000)
                return

    async def _send(self, message: bytes | dict) -> None:
        try:
            if isinstance(message, bytes):
                await self.ws.send_bytes(message)
            else:
                await self.ws.send_json(message)
        except (WebSocketDisconnect, RuntimeError, OSError):
            raise _Gone from None

    async def _close_with(self, body: dict, code: int) -> None:
        """Send `error` (the HTTP API's error object) and close with `code`, unless the client is gone."""
        if self.ws.application_state != WebSocketState.CONNECTED or self.ws.client_state != WebSocketState.CONNECTED:
            return
        with contextlib.suppress(Exception):
            await self.ws.send_json({"type": "error", **body})
            await self.ws.close(code)


__all__ = ["CLOSE_CODES", "PATH", "PROTOCOL", "TOKEN_PROTOCOL", "router"]
