"""`POST /v1/audio/conversions`: voice conversion, koe's extension beside OpenAI's routes.

A multipart form: the speech to convert (`file`), the voice to convert it into (`voice`, a library
voice, or `reference`, a clip, with an optional `reference_text`), and `model`, `response_format`,
`seed`, `options` (a JSON object of the model's options) and `stream_format` ("audio": the bytes as
they are made). Uploads are limited by server.max_upload_bytes, the source's length by
server.max_source_seconds. Conversion is model work: it runs on the scheduler's threads like
speech (queue limit, cancellation when the client hangs up, the shutdown's drain), one at a time
(conversions are never batched).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from koe.server.openai_compat import first_bad_text, model_name
from koe.server.routes.speech import AUDIO_RESPONSES, output_headers, plan_headers
from koe.server.state import server_state
from koe.server.streams import audio_bytes, first_chunk, wait_for_output
from koe.service.errors import InvalidRequest, PayloadTooLarge
from koe.service.synthesis.requests import ConvertRequest

router = APIRouter(tags=["speech"])

_FORM = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "the speech to convert (wav, flac, mp3, ogg, ...)"},
                        "voice": {"type": "string", "description": "the library voice to convert into"},
                        "reference": {"type": "string", "format": "binary", "description": "or a clip of the voice to convert into"},
                        "reference_text": {"type": "string", "description": "the clip's transcript (not needed)"},
                        "model": {"type": "string", "description": "a model that converts voices (default: the server's)"},
                        "response_format": {"type": "string", "enum": ["wav", "flac", "mp3", "opus", "aac", "m4a", "pcm"]},
                        "seed": {"type": "integer", "minimum": 0},
                        "options": {"type": "string", "description": "the model's options as a JSON object"},
                        "stream_format": {"type": "string", "enum": ["audio"], "description": "send the audio as it is made"},
                    },
                }
            }
        },
    }
}


@router.post("/v1/audio/conversions", response_class=Response, responses={200: {"description": "the converted speech", **AUDIO_RESPONSES}}, openapi_extra=_FORM)
async def create_conversion(request: Request) -> Response:
    """Say the uploaded speech again in another voice: the same words, another speaker."""
    state = server_state(request)
    limit = state.settings.server.max_upload_bytes
    async with request.form(max_files=2, max_fields=16) as form:
        source = await _upload(form.get("file"), "file", limit, required=True)
        reference = await _upload(form.get("reference"), "reference", limit, required=False)
        fields = {k: _text(form.get(k), k) for k in ("voice", "reference_text", "model", "response_format", "seed", "options", "stream_format")}
    stream = fields["stream_format"]
    if stream not in (None, "audio"):
        raise InvalidRequest(f"stream_format {stream!r}: give 'audio' (or leave it out for one file)", param="stream_format")
    convert = ConvertRequest(
        source=source,
        model=None,
        voice=fields["voice"],
        ref_audio=reference,
        ref_text=fields["reference_text"],
        seed=_seed(fields["seed"]),
        options=_options(fields["options"]),
        format=fields["response_format"],
        save=False,
    )

    def plan():
        convert.model = model_name(fields["model"] or "", state.home)
        return state.synthesizer.plan_conversion(convert)

    if stream is None:
        job = await run_in_threadpool(lambda: state.scheduler.submit(plan()))
        output = await wait_for_output(job, request, state.drain)
        return Response(output.audio, media_type=output.format.media_type, headers=output_headers(job.plan, output))
    job = await run_in_threadpool(lambda: state.scheduler.submit_stream(plan(), first_chunk_s=state.first_chunk_s, chunk_s=state.chunk_s))
    first = await first_chunk(job, request, state.drain)
    headers = {**plan_headers(job.plan), "Cache-Control": "no-cache"}
    return StreamingResponse(audio_bytes(job, first, state.drain), media_type=job.plan.format.media_type, headers=headers)


async def _upload(value: Any, field: str, limit: int, *, required: bool) -> bytes | None:
    """A file field's bytes: each at most server.max_upload_bytes (the body may hold two)."""
    if value is None and not required:
        return None
    if not isinstance(value, UploadFile):
        raise InvalidRequest(f"the form needs the {'speech to convert' if field == 'file' else 'voice clip'} as a file field {field!r}", param=field)
    data = await value.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(f"the uploaded {field!r} is larger than {limit} bytes (server.max_upload_bytes)", param=field)
    if not data:
        raise InvalidRequest(f"the uploaded {field!r} is empty", param=field)
    return data


def _text(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"{field!r} must be a text field, not a file", param=field)
    if first_bad_text(value) is not None:
        raise InvalidRequest(f"{field!r} holds text that is not valid Unicode", param=field)
    return value.strip() or None


def _seed(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(f"seed {value!r}: give a whole number", param="seed") from None


def _options(value: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        options = json.loads(value)
    except ValueError as e:
        raise InvalidRequest(f"options: not JSON ({e})", param="options") from None
    if not isinstance(options, dict):
        raise InvalidRequest("options: give a JSON object of the model's options", param="options")
    return options
