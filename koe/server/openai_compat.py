"""OpenAI's names on koe's models: model aliases, voice names, and a speech body as a `SpeechRequest`.

Voices are looked up in this order: a library voice of that name, a preset speaker of the model,
then OpenAI's voice names (alloy, echo, ...), which mean what the model's family says
(`FamilySpec.openai_voice`): a preset speaker, or a voice description on design models. Where
the family gives them no meaning, on a model with a voice of its own (voice mode `none`) they mean
that voice (with `instructions` on a model that designs voices: the described voice); on a model
that only clones they mean nothing: cloning needs a library voice (POST /v1/audio/voices).

Every text in a body is checked for lone surrogates first (`koe.text.checks`): JSON can carry
them ("\\ud800"), and they would fail deep inside a tokenizer, SQLite or the error encoder.
"""

from __future__ import annotations

from typing import Any

from koe.engines.base import NO_VOICE
from koe.engines.registry import spec
from koe.service.errors import InvalidRequest, KoeError
from koe.service.home import KoeHome
from koe.service.models import ModelDetails
from koe.service.plan import Planner
from koe.service.requests import SpeechRequest
from koe.server.schemas import SpeechBody
from koe.text.checks import lone_surrogate, text_problem

# OpenAI's model names; each means the configured default model.
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
# OpenAI's voice names.
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar")


def model_name(requested: str, home: KoeHome) -> str | None:
    """The store name a request's `model` means (None: the default); only installed names are
    accepted, so a client can never make the server load an arbitrary folder."""
    name = requested.strip()
    if name.lower() in OPENAI_MODELS or not name:
        return None
    if "/" in name or "\\" in name or name.startswith((".", "~")):
        raise InvalidRequest(f"model {requested!r}: give an installed model's name, not a path", param="model")
    try:
        return home.models.get(name).ref.name  # NotFound lists the installed models
    except KoeError as e:
        e.param = "model"  # the store names its argument "name"; here it is the body's `model`
        raise


def speech_request(body: SpeechBody, home: KoeHome, planner: Planner) -> SpeechRequest:
    """The service request for an OpenAI speech body, with the voice resolved as described above."""
    check_body_texts(body)
    model = model_name(body.model, home)
    details = planner.details(home.models.resolve(model, home.settings.models.default, allow_paths=False))
    request = SpeechRequest(
        text=body.input, model=model, instruct=body.instructions, language=body.language, seed=body.seed,
        options=_options(body, details), speed=body.speed, format=body.response_format, save=False,
    )  # fmt: skip
    voice = body.voice_name.strip()
    if not voice:
        raise InvalidRequest("voice is empty: name a library voice, a preset speaker or an OpenAI voice", param="voice")
    alias = voice.lower()
    if home.voices.exists(voice) or alias in details.speakers or alias not in OPENAI_VOICES:
        request.voice = voice  # the planner reports unknown voices with what there is
        return request
    _apply_alias(request, alias, details)
    return request


def check_body_texts(body: SpeechBody) -> None:
    """`InvalidRequest` naming the first field whose text (options and flat fields included, at
    any depth) holds a lone surrogate."""
    fields: dict[str, Any] = {"model": body.model, "input": body.input, "voice": body.voice_name, "instructions": body.instructions,
                              "language": body.language, **(body.options or {}), **body.flat_options}  # fmt: skip
    for param, value in fields.items():
        bad = _first_bad_text(value)
        if bad is not None:
            raise InvalidRequest(text_problem(bad, param).message, param=param)


def _first_bad_text(value: Any) -> str | None:
    """The first string (a dict's keys and values, a list's items, at any depth) holding a lone
    surrogate, or None. Iterative, so no nesting depth can exhaust the stack."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if lone_surrogate(item) is not None:
                return item
        elif isinstance(item, dict):
            pending.extend([*item.keys(), *item.values()])
        elif isinstance(item, list):
            pending.extend(item)
    return None


def _options(body: SpeechBody, details: ModelDetails) -> dict:
    """`options` plus the flat family options; a flat field the model has no option for is an error."""
    names = details.capabilities.options.names if details.capabilities else []
    flat = body.flat_options
    for key in flat:
        if key not in names:
            raise InvalidRequest(
                f"{key}: unknown field (not one of OpenAI's or koe's fields, nor an option of {details.ref.name}: {', '.join(names) or 'none'})",
                param=key,
            )
    both = sorted(set(flat) & set(body.options or {}))
    if both:
        raise InvalidRequest(f"{', '.join(both)}: given both flat and in options; give each once", param=both[0])
    return {**flat, **(body.options or {})}


def _apply_alias(request: SpeechRequest, alias: str, details: ModelDetails) -> None:
    caps = details.capabilities
    meaning = spec(details.ref.family).openai_voice(alias, caps) if caps else None
    if meaning is None and caps is not None and NO_VOICE in caps.voice_modes:
        return  # a model with a voice of its own: that voice (or, with instructions on a design model, the described one)
    if meaning is None:
        raise InvalidRequest(
            f"OpenAI voice {alias!r} has no meaning on {details.ref.name!r} ({details.ref.variant} model, {details.uses}): "
            "use a library voice (POST /v1/audio/voices creates one)",
            param="voice",
        )
    if meaning.speaker:
        request.speaker = meaning.speaker
    elif meaning.design and not request.instruct:
        request.design = meaning.design
