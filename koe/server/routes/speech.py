"""`POST /v1/audio/speech`: OpenAI's text-to-speech endpoint."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from koe.server.schemas import SpeechBody
from koe.server.state import server_state
from koe.server.streams import audio_bytes, first_chunk, sse_events, wait_for_output
from koe.service.synthesis.plan import SpeechPlan
from koe.service.synthesis.requests import SpeechOutput

router = APIRouter(tags=["speech"])

AUDIO_RESPONSES = {"content": {"audio/mpeg": {}, "audio/ogg": {}, "audio/aac": {}, "audio/flac": {}, "audio/wav": {}, "audio/pcm": {}, "text/event-stream": {}}}


@router.post("/v1/audio/speech", response_class=Response, responses={200: {"description": "the audio", **AUDIO_RESPONSES}})
async def create_speech(body: SpeechBody, request: Request) -> Response:
    """Speak `input` with `voice`. Without `stream_format` the answer is one complete file; with
    `stream_format=audio` the bytes are sent as they are made; with `sse`, as base64 events."""
    state = server_state(request)
    if body.stream_format is None:
        job = await run_in_threadpool(lambda: state.scheduler.submit(state.plan_speech(body)))
        output = await wait_for_output(job, request, state.drain)
        return Response(output.audio, media_type=output.format.media_type, headers=output_headers(job.plan, output))
    job = await run_in_threadpool(lambda: state.scheduler.submit_stream(state.plan_speech(body), first_chunk_s=state.first_chunk_s, chunk_s=state.chunk_s))
    plan = job.plan
    first = await first_chunk(job, request, state.drain)
    headers = {**plan_headers(plan), "Cache-Control": "no-cache"}
    if body.stream_format == "sse":
        return StreamingResponse(sse_events(job, first, len(plan.text), state.drain), media_type="text/event-stream", headers=headers)
    return StreamingResponse(audio_bytes(job, first, state.drain), media_type=plan.format.media_type, headers=headers)


def plan_headers(plan: SpeechPlan) -> dict[str, str]:
    return {"X-Koe-Model": plan.model.name, "X-Koe-Voice": _ascii(plan.voice_label or ""), "X-Koe-Seed": str(plan.seed)}


def output_headers(plan: SpeechPlan, out: SpeechOutput) -> dict[str, str]:
    headers = {
        **plan_headers(plan),
        "X-Koe-Seed": str(out.seed),
        "X-Koe-Duration": f"{out.duration:.3f}",
        "X-Koe-Batch-Size": str(out.metadata.get("batch_size", 1)),
    }
    if out.warnings:
        headers["X-Koe-Warnings"] = _ascii(" | ".join(out.warnings))
    return headers


def _ascii(text: str) -> str:
    """A header-safe rendering (HTTP headers are latin-1; non-ASCII is escaped)."""
    return text.encode("ascii", "backslashreplace").decode("ascii").replace("\n", " ")
