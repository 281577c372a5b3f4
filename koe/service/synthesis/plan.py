"""Request planning: everything a caller can get wrong is found here, before a model is loaded.

Empty, oversize or malformed text (lone surrogates, control characters, nothing to speak: see
`koe.text.checks`), over-long instructions and transcripts, a seed out of range, unknown model, voice, speaker or language, a voice that needs another kind
of model, bad speed, format or option values: all are checked against the model's description
(`koe.engines.registry.describe`: its capabilities, read from its files alone), so the server can
answer 4xx before it starts streaming. Nothing here knows a family: voice modes, speakers,
languages and the options schema come from the family's spec.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from koe.audio.errors import AudioError
from koe.audio.io import load_audio
from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, DESIGN, NO_VOICE, PRESET, Capabilities, RequestError, check_seed
from koe.runtime import precision
from koe.service.config.settings import Settings
from koe.service.errors import InvalidRequest, ModelFailed, NotFound, PayloadTooLarge
from koe.service.store.models import ModelDetails, ModelRef, ModelStore, inspect_model
from koe.service.store.resolve import downloads_for
from koe.service.synthesis.encode import AudioFormat, get_format
from koe.service.synthesis.requests import ConvertRequest, SpeechRequest
from koe.service.synthesis.tempo import check_speed
from koe.service.voices.library import VoiceLibrary
from koe.text.checks import text_problem

Mode = Literal["speaker", "design", "clone_voice", "clone_clip", "none"]
_NEEDS: dict[str, frozenset[str]] = {
    "speaker": frozenset({PRESET}),
    "design": frozenset({DESIGN}),
    "none": frozenset({NO_VOICE}),
    "clone_voice": frozenset({CLONE, CLONE_WITHOUT_TRANSCRIPT}),
    "clone_clip": frozenset({CLONE, CLONE_WITHOUT_TRANSCRIPT}),
}
_WHAT = {
    "speaker": "preset speakers need a model that ships them",
    "design": "designing a voice from a description needs a model that designs voices",
    "clone_voice": "library voices are cloned, which needs a model that clones voices",
    "clone_clip": "cloning from a reference clip needs a model that clones voices",
    "none": "speaking without a voice needs a model that picks its own",
}


@dataclass(frozen=True)
class SpeechPlan:
    """A validated request: which model, which way of choosing the voice, and every setting resolved.

    `options` are the family's options (validated against the model's schema); `instruct` is the
    style instruction or, in design mode, the voice's description. The emotion reference, where the
    model takes one: `emotion_name` (a library voice) or `emotion_audio` (a clip's samples and rate).
    """

    text: str
    model: ModelRef
    mode: Mode
    language: str
    speaker: str | None
    instruct: str | None
    voice_name: str | None
    ref_audio: tuple[np.ndarray, int] | None
    ref_text: str | None
    seed: int
    options: dict[str, Any]
    speed: float
    format: AudioFormat
    save: bool
    warnings: tuple[str, ...] = ()
    description: str | None = field(default=None)
    batchable: bool = True  # the model can batch one-shot requests
    stream_batchable: bool = False  # ... and streamed ones
    seed_given: bool = False  # the request fixed its seed: it runs alone, so that it stays reproducible
    source: tuple[np.ndarray, int] | None = None  # voice conversion: the speech said again in the plan's voice (`text` is empty)
    emotion_name: str | None = None  # the emotion reference: a library voice ...
    emotion_audio: tuple[np.ndarray, int] | None = None  # ... or a clip

    @property
    def emotion_label(self) -> str | None:
        """How the emotion reference is named in history: the library voice, 'clip', or None."""
        return self.emotion_name or ("clip" if self.emotion_audio is not None else None)

    @property
    def voice_label(self) -> str | None:
        """How the voice is named in history: library voice, speaker, or 'design'/'clip'/None."""
        return {"speaker": self.speaker, "clone_voice": self.voice_name, "design": "design", "clone_clip": "clip", "none": None}[self.mode]

    def batch_key(self) -> tuple:
        """Plans with equal keys differ only in text (and seed) and can share one batched generation."""
        return (
            self.model.key,
            self.mode,
            self.language,
            self.speaker,
            self.instruct,
            self.voice_name,
            tuple(sorted(self.options.items())),
            self.ref_audio is None,
            self.emotion_name,
            self.emotion_audio is None,
        )


class Planner:
    """Checks requests against settings, the model store and the voice library."""

    def __init__(
        self,
        settings: Settings,
        models: ModelStore,
        voices: VoiceLibrary,
        *,
        max_input_chars: int | None = None,
        on_model_failed: Callable[[ModelRef, ModelFailed], None] | None = None,
        allow_model_paths: bool = True,
    ) -> None:
        self.settings = settings
        self.allow_model_paths = allow_model_paths
        self.models = models
        self.voices = voices
        self.max_input_chars = max_input_chars
        self.on_model_failed = on_model_failed
        self._details: dict[str, ModelDetails] = {}

    def resolve_model(self, model: str | None) -> ModelRef:
        """The model a request's `model` means (store name, folder path unless this planner serves
        clients, hub id; None: the default), with the settings' download policy: `models.download`,
        and for clients' requests also `server.pull_models` (then only releases a family lists)."""
        downloads = downloads_for(self.settings, client=not self.allow_model_paths)
        return self.models.resolve(model, self.settings.models.default, allow_paths=self.allow_model_paths, download=downloads)

    def details(self, ref: ModelRef) -> ModelDetails:
        """What the model's files say (capabilities, speakers, languages), cached per model key.

        An installed model whose configs cannot be read raises `ModelFailed`, after telling
        `on_model_failed` (the synthesizer's model cache remembers it as a failed load)."""
        key = ref.key
        if key not in self._details:
            try:
                self._details[key] = inspect_model(ref)
            except ModelFailed as e:
                if self.on_model_failed is not None:
                    self.on_model_failed(ref, e)
                raise
        return self._details[key]

    def plan(self, request: SpeechRequest) -> SpeechPlan:
        """Validate `request`; raises a `KoeError` subclass naming what is wrong and what is valid."""
        s = self.settings.synthesis
        text = self._text(request.text)
        self._check_fields(request)
        ref, caps = self._model(request.model)
        self.check_precision(ref, caps)
        warnings: list[str] = []
        mode, speaker, voice_name, instruct = self._voice(request, ref, caps, warnings)
        emotion_name, emotion_audio = self._emotion(request, ref, caps)
        ref_audio, ref_text = None, None
        if mode == "clone_clip":
            ref_audio = self._clip(request.ref_audio, caps)
            ref_text = request.ref_text.strip() if request.ref_text and request.ref_text.strip() else None
            if ref_text is None and CLONE_WITHOUT_TRANSCRIPT not in caps.voice_modes:
                raise InvalidRequest(f"{ref.name} clones only from a clip with its transcript: give ref_text", param="ref_text")
        description = instruct if mode == "design" else None
        language = self._language(request.language or s.language, ref, caps)
        options = self._options(request.options, caps)
        seed = self._seed(request.seed)
        speed = check_speed(request.speed if request.speed is not None else s.speed)
        if speed != 1.0 and caps.native_speed and caps.options.get("speed") is not None and "speed" not in options:
            options["speed"], speed = caps.options.get("speed").check(speed), 1.0  # the model speaks at that rate itself
        return SpeechPlan(
            text=text,
            model=ref,
            mode=mode,
            language=language,
            speaker=speaker,
            instruct=instruct,
            voice_name=voice_name,
            ref_audio=ref_audio,
            ref_text=ref_text,
            seed=seed,
            options=options,
            speed=speed,
            format=get_format(request.format or s.format),
            save=s.save_outputs if request.save is None else bool(request.save),
            warnings=tuple(warnings),
            description=description,
            batchable=caps.batch,
            stream_batchable=caps.batch_stream,
            seed_given=request.seed is not None,
            emotion_name=emotion_name,
            emotion_audio=emotion_audio,
        )

    def _seed(self, asked: int | None) -> int:
        """The request's seed, else the settings' `synthesis.seed`, else a random one; checked."""
        seed = asked if asked is not None else self.settings.synthesis.seed
        try:
            return int(check_seed(secrets.randbelow(2**31) if seed is None else seed))
        except RequestError as e:
            raise InvalidRequest(str(e), param="seed") from e

    def plan_conversion(self, request: ConvertRequest) -> SpeechPlan:
        """Validate a voice conversion: a model that converts, a cloned voice (a library voice or a
        clip), the source speech (at most `server.max_source_seconds`), options, seed and format."""
        s = self.settings.synthesis
        as_speech = SpeechRequest(text="-", model=request.model, voice=request.voice, ref_audio=request.ref_audio, ref_text=request.ref_text)
        self._check_fields(as_speech)
        ref, caps = self._model(request.model)
        if not caps.conversion:
            others = [m.ref.name for m in self.models.list() if not m.missing and m.capabilities and m.capabilities.conversion]
            raise InvalidRequest(
                f"{ref.name!r} does not convert voices (a {ref.variant} model)",
                hint=f"installed models that can: {', '.join(others)}" if others else "a model whose `koe models info` lists conversion",
                param="model",
            )
        self.check_precision(ref, caps)
        if request.ref_audio is None and not request.voice:
            raise InvalidRequest(
                "voice conversion needs the voice to convert into: a library voice or a reference clip", hint="--voice NAME or --ref clip.wav", param="voice"
            )
        warnings: list[str] = []
        mode, _, voice_name, _ = self._voice(as_speech, ref, caps, warnings)
        if mode not in ("clone_voice", "clone_clip"):
            raise InvalidRequest(f"voice conversion needs a voice cloned from a clip, not the preset speaker {request.voice!r}", param="voice")
        ref_audio = self._clip(request.ref_audio, caps) if mode == "clone_clip" else None
        ref_text = request.ref_text.strip() if ref_audio is not None and request.ref_text and request.ref_text.strip() else None
        seed = self._seed(request.seed)
        return SpeechPlan(
            text="",
            model=ref,
            mode=mode,
            language="auto",
            speaker=None,
            instruct=None,
            voice_name=voice_name,
            ref_audio=ref_audio,
            ref_text=ref_text,
            seed=seed,
            options=self._options(request.options, caps),
            speed=1.0,
            format=get_format(request.format or s.format),
            save=s.save_outputs if request.save is None else bool(request.save),
            warnings=tuple(warnings),
            batchable=False,
            stream_batchable=False,
            seed_given=request.seed is not None,
            source=self._source(request.source),
        )

    def _model(self, model: str | None) -> tuple[ModelRef, Capabilities]:
        """The model a request names and its capabilities; an incomplete one is refused."""
        ref = self.resolve_model(model)
        details = self.details(ref)
        if details.missing:
            raise InvalidRequest(f"model {ref.name!r} is incomplete: missing {', '.join(details.missing)}", param="model")
        return ref, details.capabilities

    def _source(self, source) -> tuple[np.ndarray, int]:
        """The speech a conversion says again: readable audio of at least 0.1 s, at most `server.max_source_seconds`."""
        if source is None:
            raise InvalidRequest("voice conversion needs the speech to convert (the source audio)", param="source")
        limit = self.settings.server.max_source_seconds
        try:
            samples, sr = load_audio(source, max_seconds=limit)
        except AudioError as e:
            raise InvalidRequest(f"source audio: {e}", param="source") from e
        seconds = len(samples) / sr
        if seconds < 0.1:
            raise InvalidRequest(f"source audio is {seconds:.2f} s; give at least 0.1 s of speech", param="source")
        if seconds > limit:
            raise InvalidRequest(f"source audio is {seconds:.1f} s; at most {limit:g} s is allowed (server.max_source_seconds)", param="source")
        return samples, sr

    def check_precision(self, ref: ModelRef, caps: Capabilities | None) -> None:
        """The settings' `models.precision` must be one the model runs (`Capabilities.precisions`):
        refused here, before loading, naming the ones it can (a load would fail as a broken model)."""
        wanted = self.settings.models.precision
        if wanted is None or caps is None or precision.parse(wanted) in caps.precisions:
            return
        raise InvalidRequest(
            f"model {ref.name!r} cannot run precision {wanted!r} (models.precision, --precision); it runs {', '.join(caps.precisions)}", param="model"
        )

    # -- parts ----------------------------------------------------------------------------------
    def _text(self, text: str) -> str:
        """The text to speak, stripped; refused when empty, malformed or over `max_input_chars`."""
        if isinstance(text, str) and not text.strip():
            raise InvalidRequest("input text is empty: give at least one word to speak", param="input")
        problem = text_problem(text, "input text", controls=True, speech=True)
        if problem is not None:
            raise InvalidRequest(problem.message, param="input")
        text = text.strip()
        if self.max_input_chars and len(text) > self.max_input_chars:
            raise PayloadTooLarge(f"input text is {len(text)} characters; at most {self.max_input_chars} are allowed", param="input")
        return text

    def _check_fields(self, r: SpeechRequest) -> None:
        """The request's other texts: no lone surrogates anywhere; instructions, the voice
        description and the transcript also without control characters and within their caps."""
        limits = self.settings.server
        long_texts = (
            ("instructions", r.instruct, limits.max_instructions_chars, "server.max_instructions_chars"),
            ("design", r.design, limits.max_instructions_chars, "server.max_instructions_chars"),
            ("ref_text", r.ref_text, limits.max_transcript_chars, "server.max_transcript_chars"),
        )
        for param, value, cap, setting in long_texts:
            if value is None:
                continue
            problem = text_problem(value, param, controls=True)
            if problem is not None:
                raise InvalidRequest(problem.message, param=param)
            if len(value.strip()) > cap:
                raise InvalidRequest(f"{param}: {len(value.strip())} characters; at most {cap} are allowed ({setting})", param=param)
        named = (("voice", r.voice), ("speaker", r.speaker), ("language", r.language), ("model", r.model), ("emotion_voice", r.emotion_voice))
        for param, value in named:
            if isinstance(value, str) and (problem := text_problem(value, param)) is not None:
                raise InvalidRequest(problem.message, param=param)

    def _voice(self, r: SpeechRequest, ref: ModelRef, caps: Capabilities, warnings: list[str]) -> tuple[Mode, str | None, str | None, str | None]:
        modes = caps.voice_modes
        presets = caps.speakers if PRESET in modes else ()
        instruct = r.instruct.strip() if r.instruct and r.instruct.strip() else None
        speaker = voice_name = None
        if r.ref_audio is None and r.ref_text and r.ref_text.strip():
            raise InvalidRequest(
                "a transcript (ref_text) was given without its reference clip: give the clip too, or leave the transcript out",
                hint="--ref clip.wav --ref-text ...",
                param="ref_text",
            )
        if r.ref_audio is not None:
            mode: Mode = "clone_clip"
        elif r.voice:
            if self.voices.exists(r.voice):
                mode, voice_name = "clone_voice", self.voices.get(r.voice).name
                if r.voice.lower() in presets:
                    mode, voice_name, speaker = "speaker", None, r.voice.lower()
            elif r.voice.lower() in presets:
                mode, speaker = "speaker", r.voice.lower()
            else:
                voices = [v.name for v in self.voices.list()]
                raise NotFound(
                    f"unknown voice {r.voice!r}: not in the voice library ({', '.join(voices) or 'empty'})"
                    + (f" nor a speaker of {ref.name} ({', '.join(presets)})" if presets else ""),
                    param="voice",
                )
        elif r.design:
            mode = "design"
            if instruct and instruct != r.design.strip():
                warnings.append("both a design description and an instruction were given; the description was used")
            instruct = r.design.strip()
        elif r.speaker:
            mode, speaker = "speaker", r.speaker.strip().lower()
        elif PRESET in modes:
            mode = "speaker"
            default = (self.settings.synthesis.speaker or "").lower()
            speaker = default if default in presets else (presets[0] if presets else None)
        elif DESIGN in modes and (instruct or NO_VOICE not in modes):
            mode = "design"  # the instruction describes the voice
        elif NO_VOICE in modes:
            mode = "none"
        else:
            raise InvalidRequest(
                f"model {ref.name!r} speaks only in a cloned voice: give a library voice or a reference clip",
                hint="--voice NAME or --ref clip.wav [--ref-text ...]",
                param="voice",
            )
        if not modes & _NEEDS[mode]:
            others = [m.ref.name for m in self.models.list() if not m.missing and m.capabilities and m.capabilities.voice_modes & _NEEDS[mode]]
            raise InvalidRequest(
                f"{_WHAT[mode]}, but {ref.name!r} is a {ref.variant} model",
                hint=f"installed models that can: {', '.join(others)}" if others else None,
                param="model",
            )
        if mode == "speaker" and speaker not in presets:
            raise NotFound(f"unknown speaker {speaker!r}; {ref.name} has: {', '.join(presets)}", param="voice")
        if mode == "clone_voice":
            self.voices.check_reference(voice_name, caps.min_reference_s, ref.name)  # the model's own floor, as for a clip
        if instruct and mode != "design" and not caps.instruct:
            warnings.append(f"{ref.name} ignores instructions; the instruction was dropped")
            instruct = None
        return mode, speaker, voice_name, instruct

    def _emotion(self, r: SpeechRequest, ref: ModelRef, caps: Capabilities) -> tuple[str | None, tuple[np.ndarray, int] | None]:
        """The emotion reference (library voice name, clip): none, or one of the two on a model whose
        capabilities take one (`emotion_reference`), resolved and checked as the voice is."""
        name, clip = r.emotion_voice, r.emotion_audio
        if name is None and clip is None:
            return None, None
        param = "emotion_voice" if name is not None else "emotion_audio"
        if name is not None and clip is not None:
            raise InvalidRequest("give the emotion reference once: a library voice (emotion_voice) or a clip, not both", param=param)
        if not caps.emotion_reference:
            others = [m.ref.name for m in self.models.list() if not m.missing and m.capabilities and m.capabilities.emotion_reference]
            raise InvalidRequest(
                f"{ref.name!r} takes no emotion reference (a {ref.variant} model): leave the emotion clip or voice out",
                hint=f"installed models that take one: {', '.join(others)}" if others else "a model whose `koe models info` lists emotion_reference",
                param=param,
            )
        if clip is not None:
            return None, self._clip(clip, caps, param="emotion_audio", what="emotion reference audio")
        if not name.strip():
            raise InvalidRequest("emotion_voice is empty: name a library voice, or leave it out", param="emotion_voice")
        if not self.voices.exists(name):
            voices = [v.name for v in self.voices.list()]
            raise NotFound(f"unknown emotion voice {name!r}: not in the voice library ({', '.join(voices) or 'empty'})", param="emotion_voice")
        try:
            return self.voices.check_reference(name, caps.min_reference_s, ref.name).name, None  # the model's own floor, as for a voice
        except InvalidRequest as e:
            e.param = "emotion_voice"
            raise

    def _clip(self, source, caps: Capabilities, *, param: str = "ref_audio", what: str = "reference audio") -> tuple[np.ndarray, int]:
        limit = self.settings.server.max_reference_seconds
        try:
            samples, sr = load_audio(source, max_seconds=limit)
        except AudioError as e:
            raise InvalidRequest(f"{what}: {e}", param=param) from e
        seconds = len(samples) / sr
        if seconds < caps.min_reference_s:
            raise InvalidRequest(f"{what} is {seconds:.2f} s; give at least {caps.min_reference_s} s", param=param)
        if limit and seconds > limit:
            raise InvalidRequest(f"{what} is {seconds:.1f} s; at most {limit:g} s is allowed", param=param)
        return samples, sr

    def _language(self, language: str, ref: ModelRef, caps: Capabilities) -> str:
        lang = str(language).strip().lower()
        valid = list(caps.languages)
        if lang not in valid:
            raise InvalidRequest(f"unsupported language {language!r}; {ref.name} supports: {', '.join(valid)}", param="language")
        return lang

    def _options(self, given: dict[str, Any] | None, caps: Capabilities) -> dict[str, Any]:
        """The request's family options over the settings' defaults, checked against the schema."""
        schema = caps.options
        defaults = {k: v for k, v in self.settings.synthesis.options.items() if schema.get(k) is not None}
        limit = self.settings.synthesis.max_new_tokens
        if limit and schema.get("max_new_tokens") is not None:
            defaults.setdefault("max_new_tokens", limit)
        try:
            return {**schema.validate(defaults), **schema.validate(given)}
        except RequestError as e:
            raise InvalidRequest(str(e), param=e.param) from e
