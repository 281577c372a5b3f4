"""OpenAI's names on koe's models: model aliases, voice names, and a speech body as a `SpeechRequest`.

Voices are looked up in this order: a library voice of that name, a preset speaker of the model,
then OpenAI's voice names (alloy, echo, ...), which mean what the model's family says
(`FamilySpec.openai_voice`): a preset speaker, or a voice description on design models. Where
the family gives them no meaning, on a model with a voice of its own (voice mode `none`) they mean
that voice (with `instructions` on a model that designs voices: the described voice); on a model
that only clones they mean nothing: cloning needs a library voice (POST /v1/audio/voices).

`voice_catalog` answers the other way round, for `GET /v1/audio/voices`: every voice a client may
name (library voices, preset speakers, OpenAI's names) with the models it works with there, by the
same rules (and the planner's: a library voice clones, so it works on models that clone from a clip,
with its transcript or without one where the voice has none; a preset speaker of the model wins
over a library voice of the same name). Torch-free: model capabilities come from their files.

Every text in a body is checked for lone surrogates first (`koe.text.checks`): JSON can carry
them ("\\ud800"), and they would fail deep inside a tokenizer, SQLite or the error encoder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, NO_VOICE, PRESET
from koe.engines.registry import spec
from koe.engines.spec import VoiceAlias
from koe.server.schemas import SpeechBody
from koe.service.errors import InvalidRequest, KoeError
from koe.service.home import KoeHome
from koe.service.store.models import ModelDetails
from koe.service.synthesis.plan import Planner
from koe.service.synthesis.requests import SpeechRequest
from koe.service.voices.library import Voice
from koe.text.checks import lone_surrogate, text_problem

# OpenAI's model names; each means the configured default model.
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
# OpenAI's voice names.
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar")


def model_name(requested: str, home: KoeHome) -> str | None:
    """The store name or hub id a request's `model` means (None: the default). Installed names and
    hub ids only (the resolver applies the server's download policy to a hub id), so a client can
    never make the server load an arbitrary folder."""
    from koe.service.store.resolve import is_hub_id

    name = requested.strip()
    if name.lower() in OPENAI_MODELS or not name:
        return None
    if is_hub_id(name):
        return name
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
    details = planner.details(planner.resolve_model(model))
    request = SpeechRequest(
        text=body.input,
        model=model,
        instruct=body.instructions,
        language=body.language,
        seed=body.seed,
        options=_options(body, details),
        speed=body.speed,
        format=body.response_format,
        save=False,
        emotion_voice=body.emotion_voice_name,  # a library voice, resolved by the planner as `voice` is
    )
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
    fields: dict[str, Any] = {
        "model": body.model,
        "input": body.input,
        "voice": body.voice_name,
        "instructions": body.instructions,
        "language": body.language,
        "emotion_voice": body.emotion_voice_name,
        **(body.options or {}),
        **body.flat_options,
    }
    for param, value in fields.items():
        bad = first_bad_text(value)
        if bad is not None:
            raise InvalidRequest(text_problem(bad, param).message, param=param)


def first_bad_text(value: Any) -> str | None:
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


def alias_meaning(alias: str, details: ModelDetails) -> VoiceAlias | None:
    """What OpenAI voice `alias` means on the model: its family's answer (a speaker or a design), an
    empty `VoiceAlias` for the model's own voice (voice mode `none`), or None (it means nothing there)."""
    caps = details.capabilities
    if caps is None:
        return None
    meaning = spec(details.ref.family).openai_voice(alias, caps)
    if meaning is None and NO_VOICE in caps.voice_modes:
        return VoiceAlias()  # a model with a voice of its own: that voice (or, with instructions on a design model, the described one)
    return meaning


def _apply_alias(request: SpeechRequest, alias: str, details: ModelDetails) -> None:
    meaning = alias_meaning(alias, details)
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


# -- the voice list ----------------------------------------------------------------------------
@dataclass
class CatalogEntry:
    """One voice of `GET /v1/audio/voices`: `kind` library (`voice` set), speaker (a preset of
    `models`) or openai (an OpenAI name; `means` says what on each model). `created_at`: the
    library voice's, else when the first of its models was installed (0 if unknown)."""

    name: str
    kind: str
    models: list[str]
    created_at: int = 0
    voice: Voice | None = None
    means: dict[str, str] = field(default_factory=dict)


def catalog_models(home: KoeHome, planner: Planner) -> list[ModelDetails]:
    """The models a voice list covers: the complete installed ones (by name), then the default model
    when it is not installed (an operator's folder, which clients reach as tts-1). Read from their
    files (no model is loaded)."""
    models = [d for d in home.models.list() if d.ok and d.capabilities is not None]
    default = home.settings.models.default
    if default and default not in {d.ref.name for d in models}:
        try:
            d = planner.details(home.models.resolve(default, download=False))  # a GET never downloads
        except KoeError:
            d = None  # a broken default is reported where it is used (the lifespan log, speech requests)
        if d is not None and d.ok and d.capabilities is not None and d.ref.name not in {m.ref.name for m in models}:
            models.append(d)
    return models


def library_voice_models(voice: Voice, models: list[ModelDetails]) -> list[str]:
    """The models library voice `voice` works on: those that clone from a clip (from the clip alone
    when the voice has no transcript), or that it already has a prepared prompt for; not those with
    a preset speaker of its name (the preset wins there)."""
    prepared = set(voice.prepared_for)
    out = []
    for d in models:
        modes = d.capabilities.voice_modes
        if PRESET in modes and voice.name.lower() in d.capabilities.speakers:
            continue
        clones = CLONE_WITHOUT_TRANSCRIPT in modes or (CLONE in modes and voice.ref_text is not None)
        if clones or (modes & {CLONE, CLONE_WITHOUT_TRANSCRIPT} and d.ref.key in prepared):
            out.append(d.ref.name)
    return out


def voice_catalog(home: KoeHome, planner: Planner, voices: list[Voice] | None = None) -> list[CatalogEntry]:
    """Every voice a speech request may name, with the models it works on: the library's voices (all
    of them, `voices` or the library's list), then each preset speaker (once, with every model that
    has it), then OpenAI's voice names that mean something on at least one model (not those a
    library voice or a preset speaker of the same name takes over)."""
    models = catalog_models(home, planner)
    voices = home.voices.list() if voices is None else voices
    added = {d.ref.name: int(d.added_at or 0) for d in models}

    def created(names: list[str]) -> int:
        return min((added[n] for n in names if added[n]), default=0)

    out = [CatalogEntry(v.name, "library", library_voice_models(v, models), int(v.created_at), voice=v) for v in voices]
    speakers: dict[str, list[str]] = {}
    for d in models:
        if PRESET in d.capabilities.voice_modes:
            for s in d.capabilities.speakers:
                speakers.setdefault(s, []).append(d.ref.name)
    out += [CatalogEntry(s, "speaker", names, created(names)) for s, names in speakers.items()]
    library = {v.name.lower() for v in voices}
    for alias in OPENAI_VOICES:
        if alias in library:
            continue  # the library voice of that name is what a request gets
        means = {}
        for d in models:
            meaning = alias_meaning(alias, d) if alias not in d.capabilities.speakers else None
            if meaning is not None:
                means[d.ref.name] = describe_alias(meaning)
        if means:
            out.append(CatalogEntry(alias, "openai", list(means), created(list(means)), means=means))
    return out


def describe_alias(meaning: VoiceAlias) -> str:
    """`VoiceAlias` in words, for the voice list."""
    if meaning.speaker:
        return f"speaker {meaning.speaker}"
    if meaning.design:
        return f"designed voice: {meaning.design}"
    return "the model's own voice (with instructions on a model that designs voices: the voice they describe)"
