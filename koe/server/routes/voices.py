"""Voices over HTTP: the list of every voice a request may name (library voices, preset speakers,
OpenAI's names, each with the models it works with), and the library's show, create from an
uploaded clip (+ transcript) and delete."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from koe.service.errors import InvalidRequest, KoeError
from koe.service.names import check_name
from koe.service.voices import Voice
from koe.server.openai_compat import CatalogEntry, catalog_models, library_voice_models, model_name, voice_catalog
from koe.server.schemas import Deleted, PresetVoiceCard, VoiceCard, VoiceList
from koe.server.state import ServerState, server_state

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


def voice_card(v: Voice, models: list[str]) -> VoiceCard:
    return VoiceCard(
        id=v.name, name=v.name, created_at=int(v.created_at), type="prompt" if v.source == "design" else "audio_sample",
        models=models, source=v.source, transcript=v.ref_text, description=v.description, language=v.language,
        duration_s=v.duration_s, sample_rate=v.sample_rate,
    )  # fmt: skip


def entry_card(e: CatalogEntry) -> VoiceCard | PresetVoiceCard:
    if e.voice is not None:
        return voice_card(e.voice, e.models)
    return PresetVoiceCard(id=e.name, name=e.name, created_at=e.created_at, kind=e.kind, models=e.models, means=e.means or None)


def _library_card(state: ServerState, v: Voice) -> VoiceCard:
    """`v`'s card with the models it works with (blocking: reads the models' files)."""
    return voice_card(v, library_voice_models(v, catalog_models(state.home, state.synthesizer.planner)))


def _default_model(state: ServerState) -> str | None:
    try:
        return state.home.models.resolve(None, state.settings.models.default, download=False).name
    except KoeError:
        return None


def _voice_list(state: ServerState, model: str | None, kind: str | None) -> VoiceList:
    """The list (blocking: reads the library and the models' files); `model` / `kind` filter it."""
    entries = voice_catalog(state.home, state.synthesizer.planner)
    default = _default_model(state)
    if model is not None:
        wanted = model_name(model, state.home) or default  # tts-1 & co. mean the default model
        entries = [e for e in entries if wanted in e.models]
    if kind is not None:
        entries = [e for e in entries if e.kind == kind]
    return VoiceList(data=[entry_card(e) for e in entries], default_model=default)


@router.get("/v1/audio/voices", response_model=VoiceList)
async def list_voices(
    request: Request,
    model: str | None = Query(None, description="only the voices that work with this model (a store name; tts-1 & co.: the default)"),
    kind: Literal["library", "speaker", "openai"] | None = Query(None, description="only library voices, preset speakers or OpenAI names"),
) -> VoiceList:
    """Every voice a speech request may name, each with `models`, the models it works with:
    the library's voices (`kind` library; all of them, even one no installed model can clone),
    the installed models' preset speakers (`speaker`), and OpenAI's voice names that mean something
    on an installed model (`openai`, with `means`: what on each). Read from the models' files; no
    model is loaded."""
    return await run_in_threadpool(_voice_list, server_state(request), model, kind)


@router.get("/v1/audio/voices/{name:path}", response_model=VoiceCard)
async def get_voice(name: str, request: Request) -> VoiceCard:
    """One library voice."""
    state = server_state(request)
    voice = await run_in_threadpool(state.home.voices.get, name)
    return await run_in_threadpool(_library_card, state, voice)


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
    return await run_in_threadpool(_library_card, state, voice)


@router.delete("/v1/audio/voices/{name:path}", response_model=Deleted)
async def delete_voice(name: str, request: Request) -> Deleted:
    """Remove a voice and its prepared prompts."""
    voices = server_state(request).home.voices
    voice = await run_in_threadpool(voices.get, name)
    await run_in_threadpool(voices.remove, voice.name)
    return Deleted(id=voice.name, object="audio.voice.deleted")


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None
