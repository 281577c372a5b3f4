"""The voice library over HTTP: list, show, create from an uploaded clip (+ transcript), delete."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from koe.service.errors import InvalidRequest
from koe.service.names import check_name
from koe.service.voices import Voice
from koe.server.schemas import Deleted, ListOf, VoiceCard
from koe.server.state import server_state

router = APIRouter(tags=["voices"])

_UPLOAD_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["name", "file"],
                    "properties": {
                        "name": {"type": "string", "description": "letters, digits, '.', '_' and '-' (no paths)"},
                        "file": {"type": "string", "format": "binary", "description": "the reference clip (wav, flac, mp3, ogg, ...); also accepted as audio_sample"},
                        "transcript": {"type": "string", "description": "what the clip says (better cloning); also accepted as ref_text; at most server.max_transcript_chars"},
                        "language": {"type": "string", "maxLength": 64},
                        "description": {"type": "string", "description": "a note about the voice; at most server.max_description_chars"},
                        "overwrite": {"type": "boolean", "default": False},
                    },
                }
            }
        },
    }
}


def voice_card(v: Voice) -> VoiceCard:
    return VoiceCard(
        id=v.name, name=v.name, created_at=int(v.created_at), source=v.source, transcript=v.ref_text,
        description=v.description, language=v.language, duration_s=v.duration_s, sample_rate=v.sample_rate,
    )  # fmt: skip


@router.get("/v1/audio/voices", response_model=ListOf)
async def list_voices(request: Request) -> ListOf:
    """The voices in the library."""
    voices = await run_in_threadpool(server_state(request).home.voices.list)
    return ListOf(data=[voice_card(v) for v in voices])


@router.get("/v1/audio/voices/{name:path}", response_model=VoiceCard)
async def get_voice(name: str, request: Request) -> VoiceCard:
    """One library voice."""
    return voice_card(await run_in_threadpool(server_state(request).home.voices.get, name))


@router.post("/v1/audio/voices", response_model=VoiceCard, status_code=201, openapi_extra=_UPLOAD_SCHEMA)
async def create_voice(request: Request) -> VoiceCard:
    """Add a voice from an uploaded reference clip (multipart form; size limited by server.max_upload_bytes,
    length by server.max_reference_seconds). With a transcript the clone is closer."""
    state = server_state(request)
    async with request.form(max_files=1, max_fields=16) as form:
        name = _text(form.get("name"))
        if name is None:
            raise InvalidRequest("the form needs a 'name' for the voice", param="name")
        check_name(name, "voice")
        upload = form.get("file") or form.get("audio_sample")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("the form needs the reference clip as a file field 'file'", param="file")
        data = await upload.read()
        transcript_field = "transcript" if _text(form.get("transcript")) else "ref_text"
        transcript = _text(form.get(transcript_field))
        language = _text(form.get("language"))
        description = _text(form.get("description"))
        overwrite = (_text(form.get("overwrite")) or "").lower() in ("1", "true", "yes", "on")
    if not data:
        raise InvalidRequest("the uploaded clip is empty", param="file")
    try:
        voice = await run_in_threadpool(
            lambda: state.home.voices.add(name, data, transcript, description=description, language=language, overwrite=overwrite)
        )
    except InvalidRequest as e:
        if e.param == "ref_text":  # the library's name for it; say the field the form used
            e.param = transcript_field
        raise
    return voice_card(voice)


@router.delete("/v1/audio/voices/{name:path}", response_model=Deleted)
async def delete_voice(name: str, request: Request) -> Deleted:
    """Remove a voice and its prepared prompts."""
    voices = server_state(request).home.voices
    voice = await run_in_threadpool(voices.get, name)
    await run_in_threadpool(voices.remove, voice.name)
    return Deleted(id=voice.name, object="voice")


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None
