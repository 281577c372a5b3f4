"""What the routes share: settings, KOE_HOME, the synthesizer and the scheduler."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from koe.service.home import KoeHome
from koe.service.plan import SpeechPlan
from koe.service.scheduler import Scheduler
from koe.service.settings import Settings
from koe.service.synthesizer import Synthesizer
from koe.server.openai_compat import speech_request
from koe.server.schemas import SpeechBody


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

    def plan_speech(self, body: SpeechBody) -> SpeechPlan:
        """Validate a speech body into a plan (blocking: reads model and voice files)."""
        return self.synthesizer.plan(speech_request(body, self.home, self.synthesizer.planner))


def server_state(request: Request) -> ServerState:
    return request.app.state.koe
