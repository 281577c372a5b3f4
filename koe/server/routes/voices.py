"""Voices over HTTP: the list of every voice a request may name (library voices, preset speakers,
OpenAI's names, each with the models it works with), and the library's show, create from an
uploaded clip (+ transcript) and delete.

koe's extensions beside OpenAI's routes, for clients such as the web page: a voice's reference clip
(to play it), its archive (`koe voices export`) and the import of one, and voice design (a voice
described in words, spoken by a model that designs voices and kept as a library voice). Design is
model work, so it runs on the scheduler's threads like speech: the model's queue limit (429 +
Retry-After), cancellation when the client hangs up, the shutdown's drain.

Routes with a suffix (`{name}/reference`, `{name}/export`) are declared before `{name:path}`,
which would otherwise take `x/reference` for a voice name (and refuse it: names hold no '/').
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO, Literal

import anyio
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from koe.server.openai_compat import CatalogEntry, catalog_models, first_bad_text, library_voice_models, model_name, voice_catalog
from koe.server.schemas import Deleted, DesignBody, PresetVoiceCard, VoiceCard, VoiceList
from koe.server.state import ServerState, server_state
from koe.server.streams import wait_for_output
from koe.service.errors import InvalidRequest, KoeError
from koe.service.names import check_name
from koe.service.synthesis.requests import SpeechRequest
from koe.service.synthesis.scheduler import SpeechJob
from koe.service.voices.library import Voice
from koe.text.checks import text_problem

router = APIRouter(tags=["voices"])


def _form_schema(required: list[str], properties: dict) -> dict:
    """The OpenAPI `requestBody` of a multipart form (FastAPI cannot infer it: the routes read the form themselves)."""
    schema = {"type": "object", "required": required, "properties": properties}
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}


_OVERWRITE = {"type": "boolean", "default": False}
_UPLOAD_SCHEMA = _form_schema(
    ["name", "file"],
    {
        "name": {"type": "string", "description": "letters, digits, '.', '_' and '-' (no paths)"},
        "file": {"type": "string", "format": "binary", "description": "the reference clip (wav, flac, mp3, ogg, ...); also accepted as audio_sample"},
        "transcript": {"type": "string", "description": "what the clip says (better cloning); also accepted as ref_text; at most server.max_transcript_chars"},
        "language": {"type": "string", "maxLength": 64},
        "description": {"type": "string", "description": "a note about the voice; at most server.max_description_chars"},
        "overwrite": _OVERWRITE,
    },
)
_IMPORT_SCHEMA = _form_schema(
    ["file"],
    {
        "file": {"type": "string", "format": "binary", "description": "a voice archive as koe voices export (or GET .../export) writes it: .zip or .tar.gz"},
        "name": {"type": "string", "description": "the name to keep it under (default: the name it was exported with)"},
        "overwrite": _OVERWRITE,
    },
)
_ARCHIVES = {"zip": "application/zip", "tar.gz": "application/gzip"}
_EXPORT_CHUNK = 64 * 1024
# the library's and the planner's names for a design's texts -> the body's fields
_DESIGN_PARAMS = {"ref_text": "input", "design": "description"}


def voice_card(v: Voice, models: list[str]) -> VoiceCard:
    return VoiceCard(
        id=v.name,
        name=v.name,
        created_at=int(v.created_at),
        type="prompt" if v.source == "design" else "audio_sample",
        models=models,
        source=v.source,
        transcript=v.ref_text,
        description=v.description,
        language=v.language,
        duration_s=v.duration_s,
        sample_rate=v.sample_rate,
    )


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


@router.get(
    "/v1/audio/voices/{name}/reference",
    response_class=Response,
    responses={200: {"description": "the voice's reference clip, as stored (WAV)", "content": {"audio/wav": {}}}, 404: {"description": "no such voice"}},
)
async def get_reference(name: str, request: Request) -> Response:
    """The library voice's reference clip as the library keeps it (WAV, float32 mono at its own
    rate), e.g. to play it. Never cached: an overwritten voice has a new clip under the same name."""
    voice, data = await run_in_threadpool(_reference, server_state(request), name)
    headers = {"Content-Disposition": f'inline; filename="{voice.name}.wav"', "Cache-Control": "no-store"}
    return Response(data, media_type="audio/wav", headers=headers)


@router.get(
    "/v1/audio/voices/{name}/export",
    response_class=StreamingResponse,
    responses={200: {"description": "the voice's archive", "content": {t: {} for t in _ARCHIVES.values()}}, 404: {"description": "no such voice"}},
)
async def export_voice(
    name: str,
    request: Request,
    format: Literal["zip", "tar.gz"] = Query("zip", description="the archive's kind"),  # noqa: A002 - the query's name
) -> StreamingResponse:
    """The voice as `koe voices export` writes it (reference clip, transcript, voice.json; prepared
    prompts are rebuilt where it is used), as a download. `POST /v1/audio/voices/import` takes it back."""
    voice_name, f, folder, size = await run_in_threadpool(_export, server_state(request), name, format)
    headers = {"Content-Disposition": f'attachment; filename="{voice_name}.{format}"', "Content-Length": str(size), "Cache-Control": "no-store"}
    return StreamingResponse(_file_chunks(f, folder), media_type=_ARCHIVES[format], headers=headers)


@router.post("/v1/audio/voices/import", response_model=VoiceCard, status_code=201, openapi_extra=_IMPORT_SCHEMA)
async def import_voice(request: Request) -> VoiceCard:
    """Add the voice in an uploaded archive (multipart form, field `file`; size limited by
    server.max_upload_bytes), as `name` or the name it was exported with. Everything in it is
    checked as `koe voices import` checks it; a refused archive leaves nothing behind."""
    state = server_state(request)
    async with request.form(max_files=1, max_fields=8) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("the form needs the voice archive as a file field 'file'", param="file")
        data = await upload.read()
        name = _text(form.get("name"))
        overwrite = _flag(form.get("overwrite"))
    if name is not None:
        check_name(name, "voice")
    if not data:
        raise InvalidRequest("the uploaded archive is empty", param="file")
    voice = await run_in_threadpool(lambda: state.home.voices.import_archive(data, name, overwrite=overwrite))
    return await run_in_threadpool(_library_card, state, voice)


@router.post("/v1/audio/voices/design", response_model=VoiceCard, status_code=201)
async def design_voice(body: DesignBody, request: Request) -> VoiceCard:
    """Design a voice from a description and keep it in the library (`source` design): a model that
    designs voices (voice mode `design` in `GET /v1/models`) speaks `input` in the described voice,
    and that clip becomes the voice's reference, so every model that clones can speak with it.

    Queued on the model's lane like speech: a full queue is a 429 with Retry-After; a client that
    hangs up cancels it. The same `seed` (and body) designs the same voice."""
    state = server_state(request)
    speech, job = await run_in_threadpool(_submit_design, state, body)
    output = await wait_for_output(job, request, state.drain)
    voice = await run_in_threadpool(lambda: state.synthesizer.keep_design(body.name, speech, output, overwrite=body.overwrite))
    return await run_in_threadpool(_library_card, state, voice)


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
        overwrite = _flag(form.get("overwrite"))
    if not data:
        raise InvalidRequest("the uploaded clip is empty", param="file")
    try:
        voice = await run_in_threadpool(lambda: state.home.voices.add(name, data, transcript, description=description, language=language, overwrite=overwrite))
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


def _flag(value: object) -> bool:
    """A form's boolean field: 1, true, yes or on (any case) is true."""
    return (_text(value) or "").lower() in ("1", "true", "yes", "on")


def _reference(state: ServerState, name: str) -> tuple[Voice, bytes]:
    """The voice and its reference clip's bytes (blocking; see VoiceLibrary.reference_bytes)."""
    return state.home.voices.reference_bytes(name)


def _export(state: ServerState, name: str, kind: str) -> tuple[str, BinaryIO, Path, int]:
    """Export voice `name` to an archive in a temporary folder (blocking): (the voice's name, the
    archive opened for reading, the folder, its size). The folder is removed before this returns
    (the open file stays readable), or, where an open file cannot be removed, by `_file_chunks`."""
    tmp = Path(tempfile.mkdtemp(prefix="koe-export-"))
    try:
        voice = state.home.voices.get(name)
        path = state.home.voices.export(voice.name, tmp / f"{voice.name}.{kind}")
        f = open(path, "rb")  # noqa: SIM115 - closed by _file_chunks once sent
        size = os.fstat(f.fileno()).st_size
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return voice.name, f, tmp, size


async def _file_chunks(f: BinaryIO, folder: Path) -> AsyncIterator[bytes]:
    """`f`'s bytes a chunk at a time (read off the event loop); then closes it and removes what is
    left of its temporary folder, also when the client went away mid-download."""
    try:
        while chunk := await anyio.to_thread.run_sync(f.read, _EXPORT_CHUNK):
            yield chunk
    finally:
        f.close()
        shutil.rmtree(folder, ignore_errors=True)


def _submit_design(state: ServerState, body: DesignBody) -> tuple[SpeechRequest, SpeechJob]:
    """Check a design body, plan its sample and queue it on the model's lane (blocking: reads model
    and voice files): every bad input is a 4xx before anything is queued, a full queue a 429."""
    fields = {"name": body.name, "description": body.description, "model": body.model, "input": body.input, "language": body.language, **(body.options or {})}
    for param, value in fields.items():
        bad = first_bad_text(value)
        if bad is not None:
            raise InvalidRequest(text_problem(bad, param).message, param=param)
    synth = state.synthesizer
    try:
        speech = synth.design_request(
            body.name,
            body.description,
            model=model_name(body.model, state.home) if body.model is not None else None,
            text=body.input,
            language=body.language,
            seed=body.seed,
            options=body.options,
            overwrite=body.overwrite,
        )
        plan = synth.plan(speech)
    except KoeError as e:
        e.param = _DESIGN_PARAMS.get(e.param or "", e.param)
        raise
    return speech, state.scheduler.submit(plan)
