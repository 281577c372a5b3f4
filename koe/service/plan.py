"""Turning a `SpeechRequest` into a checked plan, before any model is loaded.

Everything a request can get wrong (empty or oversize text, unknown model, voice, speaker or
language, a voice that needs another kind of model, bad speed, format or sampling values) is found
here from the model's files alone, so the server can answer 4xx before it starts streaming.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from koe.audio.errors import AudioError
from koe.audio.io import load_audio
from koe.service.encode import AudioFormat, get_format
from koe.service.errors import InvalidRequest, NotFound, PayloadTooLarge
from koe.service.models import ModelDetails, ModelRef, ModelStore, inspect_model
from koe.service.requests import SpeechRequest
from koe.service.settings import Settings
from koe.service.tempo import check_speed
from koe.service.voices import MIN_REFERENCE_SECONDS, VoiceLibrary

Mode = Literal["speaker", "design", "clone_voice", "clone_clip"]
_NEEDS = {"speaker": "custom_voice", "design": "voice_design", "clone_voice": "base", "clone_clip": "base"}
_WHAT = {
    "speaker": "preset speakers need a CustomVoice model",
    "design": "designing a voice from a description needs a VoiceDesign model",
    "clone_voice": "library voices are cloned, which needs a Base model",
    "clone_clip": "cloning from a reference clip needs a Base model",
}


@dataclass(frozen=True)
class SpeechPlan:
    """A validated request: which model, which way of choosing the voice, and every setting resolved."""

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
    sampling: dict[str, Any]
    speed: float
    format: AudioFormat
    save: bool
    warnings: tuple[str, ...] = ()
    description: str | None = field(default=None)

    @property
    def voice_label(self) -> str | None:
        """How the voice is named in history: library voice, speaker, or 'design'/'clip'."""
        return {"speaker": self.speaker, "clone_voice": self.voice_name, "design": "design", "clone_clip": "clip"}[self.mode]

    def batch_key(self) -> tuple:
        """Plans with equal keys differ only in text (and seed) and can share one batched generation."""
        return (self.model.key, self.mode, self.language, self.speaker, self.instruct, self.voice_name,
                tuple(sorted(self.sampling.items())), self.ref_audio is None)  # fmt: skip


class Planner:
    """Checks requests against settings, the model store and the voice library."""

    def __init__(self, settings: Settings, models: ModelStore, voices: VoiceLibrary, *, max_input_chars: int | None = None) -> None:
        self.settings = settings
        self.models = models
        self.voices = voices
        self.max_input_chars = max_input_chars
        self._details: dict[str, ModelDetails] = {}

    def details(self, ref: ModelRef) -> ModelDetails:
        """What the model's files say (speakers, languages), cached per model key."""
        key = ref.key
        if key not in self._details:
            self._details[key] = inspect_model(ref)
        return self._details[key]

    def plan(self, request: SpeechRequest) -> SpeechPlan:
        """Validate `request`; raises a `KoeError` subclass naming what is wrong and what is valid."""
        s = self.settings.synthesis
        text = self._text(request.text)
        ref = self.models.resolve(request.model, self.settings.models.default)
        details = self.details(ref)
        if details.missing:
            raise InvalidRequest(f"model {ref.name!r} is incomplete: missing {', '.join(details.missing)}", param="model")
        warnings: list[str] = []
        mode, speaker, voice_name, instruct = self._voice(request, ref, details, warnings)
        ref_audio, ref_text = None, None
        if mode == "clone_clip":
            ref_audio = self._clip(request.ref_audio)
            ref_text = request.ref_text.strip() if request.ref_text and request.ref_text.strip() else None
        description = instruct if mode == "design" else None
        language = self._language(request.language or s.language, ref, details)
        sampling = request.sampling.as_kwargs()
        if "max_new_tokens" not in sampling and s.max_new_tokens:
            sampling["max_new_tokens"] = s.max_new_tokens
        seed = request.seed if request.seed is not None else s.seed
        if seed is None:
            seed = secrets.randbelow(2**31)
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
            raise InvalidRequest(f"seed must be a whole number >= 0, got {seed!r}", param="seed")
        return SpeechPlan(
            text=text, model=ref, mode=mode, language=language, speaker=speaker, instruct=instruct,
            voice_name=voice_name, ref_audio=ref_audio, ref_text=ref_text, seed=int(seed), sampling=sampling,
            speed=check_speed(request.speed if request.speed is not None else s.speed),
            format=get_format(request.format or s.format),
            save=s.save_outputs if request.save is None else bool(request.save),
            warnings=tuple(warnings), description=description,
        )  # fmt: skip

    # -- parts ----------------------------------------------------------------------------------
    def _text(self, text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequest("input text is empty: give at least one word to speak", param="input")
        text = text.strip()
        if self.max_input_chars and len(text) > self.max_input_chars:
            raise PayloadTooLarge(f"input text is {len(text)} characters; at most {self.max_input_chars} are allowed", param="input")
        return text

    def _voice(self, r: SpeechRequest, ref: ModelRef, d: ModelDetails, warnings: list[str]) -> tuple[Mode, str | None, str | None, str | None]:
        variant = ref.variant
        instruct = r.instruct.strip() if r.instruct and r.instruct.strip() else None
        speaker = voice_name = None
        if r.ref_audio is not None:
            mode: Mode = "clone_clip"
        elif r.voice:
            if self.voices.exists(r.voice):
                mode, voice_name = "clone_voice", self.voices.get(r.voice).name
                if variant == "custom_voice" and r.voice.lower() in d.speakers:
                    mode, voice_name, speaker = "speaker", None, r.voice.lower()
            elif variant == "custom_voice" and r.voice.lower() in d.speakers:
                mode, speaker = "speaker", r.voice.lower()
            else:
                voices = [v.name for v in self.voices.list()]
                raise NotFound(
                    f"unknown voice {r.voice!r}: not in the voice library ({', '.join(voices) or 'empty'})"
                    + (f" nor a speaker of {ref.name} ({', '.join(d.speakers)})" if d.speakers else ""),
                    param="voice",
                )
        elif r.design:
            mode = "design"
            if instruct and instruct != r.design.strip():
                warnings.append("both a design description and an instruction were given; the description was used")
            instruct = r.design.strip()
        elif r.speaker:
            mode, speaker = "speaker", r.speaker.strip().lower()
        elif variant == "custom_voice":
            mode = "speaker"
            default = (self.settings.synthesis.speaker or "").lower()
            speaker = default if default in d.speakers else (d.speakers[0] if d.speakers else None)
        elif variant == "voice_design":
            mode = "design"
        else:
            raise InvalidRequest(
                f"model {ref.name!r} is a Base (voice cloning) model: give a library voice or a reference clip",
                hint="--voice NAME or --ref clip.wav [--ref-text ...]",
                param="voice",
            )
        if variant != _NEEDS[mode]:
            others = [m.ref.name for m in self.models.list() if m.ref.variant == _NEEDS[mode]]
            raise InvalidRequest(
                f"{_WHAT[mode]}, but {ref.name!r} is a {variant} model",
                hint=f"installed {_NEEDS[mode]} models: {', '.join(others)}" if others else None,
                param="model",
            )
        if mode == "speaker":
            if speaker not in d.speakers:
                raise NotFound(f"unknown speaker {speaker!r}; {ref.name} has: {', '.join(d.speakers)}", param="voice")
            if instruct and ref.size in "0b6":  # as upstream tests it
                warnings.append("the 0.6B CustomVoice model ignores instructions; the instruction was dropped")
                instruct = None
        elif mode in ("clone_voice", "clone_clip") and instruct:
            warnings.append("Base (voice cloning) models take no instruction; it was ignored")
            instruct = None
        return mode, speaker, voice_name, instruct

    def _clip(self, source) -> tuple[np.ndarray, int]:
        try:
            samples, sr = load_audio(source)
        except AudioError as e:
            raise InvalidRequest(f"reference audio: {e}", param="ref_audio") from e
        seconds = len(samples) / sr
        limit = self.settings.server.max_reference_seconds
        if seconds < MIN_REFERENCE_SECONDS:
            raise InvalidRequest(f"reference audio is {seconds:.2f} s; give at least {MIN_REFERENCE_SECONDS} s", param="ref_audio")
        if limit and seconds > limit:
            raise InvalidRequest(f"reference audio is {seconds:.1f} s; at most {limit:g} s is allowed", param="ref_audio")
        return samples, sr

    def _language(self, language: str, ref: ModelRef, d: ModelDetails) -> str:
        lang = str(language).strip().lower()
        valid = ["auto", *d.languages] if "auto" not in d.languages else list(d.languages)
        if lang not in valid:
            raise InvalidRequest(f"unsupported language {language!r}; {ref.name} supports: {', '.join(valid)}", param="language")
        return lang
