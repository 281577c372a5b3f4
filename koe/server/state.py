"""What the routes share: settings, KOE_HOME, the synthesizer, the scheduler and the drain."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import JSONResponse

from koe.server.errors import error_response
from koe.server.openai_compat import speech_request
from koe.server.schemas import SpeechBody
from koe.service.config.settings import Settings
from koe.service.home import KoeHome
from koe.service.synthesis.plan import SpeechPlan
from koe.service.synthesis.scheduler import Scheduler
from koe.service.synthesis.synthesizer import Synthesizer

SHUTDOWN_RETRY_AFTER_S = 5  # what a refused client is told: about how long a restart takes


class ShutdownCancelled(Exception):
    """Raised where the shutdown's grace ran out on a request (its job is cancelled first).

    Deliberately not a `KoeError`, so it passes the app's error handlers to `guards.DrainGuard`:
    a request that has not answered yet gets `Drain.response()` (503 + Retry-After); a raw audio
    stream is left unfinished, so the server closes the connection and the client sees an
    incomplete transfer (never a short file that looks whole)."""


@dataclass
class Drain:
    """The server's graceful shutdown, as the routes see it (`koe serve` drives it on SIGTERM).

    `begin()`: the server stops accepting; new requests get 503. In-flight ones have `grace_s`
    seconds to finish; then `expire()`: the routes cancel their jobs and answer 503 + Retry-After
    (or end their SSE stream with an `error` event, or cut a raw audio stream). The routes poll
    `expired` (as they poll for client disconnects), so no job registry is needed.
    """

    grace_s: float = 10.0
    draining: bool = False
    expired: bool = False

    def begin(self) -> None:
        """Stop taking requests; in-flight ones may still finish."""
        self.draining = True

    def expire(self) -> None:
        """The grace period is over: whatever is still running is cancelled."""
        self.draining = self.expired = True

    @staticmethod
    def message() -> str:
        return f"the server is shutting down; retry in {SHUTDOWN_RETRY_AFTER_S} s"

    def response(self) -> JSONResponse:
        """The 503 a request gets when the shutdown refuses or cuts it (closes the connection)."""
        headers = {"Retry-After": str(SHUTDOWN_RETRY_AFTER_S), "Connection": "close"}
        return error_response(503, self.message(), code="shutting_down", headers=headers)


@dataclass
class ServerState:
    """One per app (`app.state.koe`). `first_chunk_s` / `chunk_s` (seconds) shape streamed responses."""

    settings: Settings
    home: KoeHome
    synthesizer: Synthesizer
    scheduler: Scheduler
    owns_synthesizer: bool
    first_chunk_s: float | None = None
    chunk_s: float | None = None
    drain: Drain = field(default_factory=Drain)

    def plan_speech(self, body: SpeechBody) -> SpeechPlan:
        """Validate a speech body into a plan (blocking: reads model and voice files)."""
        return self.synthesizer.plan(speech_request(body, self.home, self.synthesizer.planner))


def server_state(request: Request) -> ServerState:
    """The app's `ServerState` (set in the lifespan)."""
    return request.app.state.koe
