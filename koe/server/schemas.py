"""Request and response bodies (pydantic): OpenAI's speech contract plus koe's extra fields.

A speech body carries the model family's own options in `options` (`GET /v1/models/{id}` lists
them); the same options are accepted as flat top-level fields too (e.g. `"temperature": 0.7`, as
OpenAI clients send them in `extra_body`). Those are checked against the model's schema when the
request is planned, so an unknown field is still a clear 400.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from koe.service.synthesis.encode import FORMATS


class VoiceId(BaseModel):
    """OpenAI's object form of a custom voice: `{"id": "NAME"}`."""

    id: str


class SpeechBody(BaseModel):
    """`POST /v1/audio/speech`. OpenAI's fields, then koe's (all optional)."""

    model_config = ConfigDict(extra="allow")  # flat family options; checked against the model's schema when planned

    model: str = Field(..., description="an installed model's name; tts-1, tts-1-hd and gpt-4o-mini-tts mean the default model")
    input: str = Field(..., description="the text to speak")
    voice: str | VoiceId = Field(..., description="a library voice, a preset speaker, or an OpenAI voice name (mapped)")
    response_format: str = Field("mp3", description=f"one of {', '.join(FORMATS)}")
    speed: float = Field(1.0, ge=0.25, le=4.0, description="tempo, pitch kept (0.25-4.0)")
    instructions: str | None = Field(None, description="style instruction; on VoiceDesign models, the voice description")
    stream_format: Literal["audio", "sse"] | None = Field(
        None, description="audio: bytes sent as they are made; sse: speech.audio.delta/done events; absent: one complete file"
    )
    # koe's extras
    language: str | None = Field(None, description="language of the text (auto, english, chinese, ...)")
    seed: int | None = Field(
        None,
        ge=0,
        json_schema_extra={"maximum": 2**63 - 1},
        description="random seed (0 <= seed < 2**63); a seeded request is reproducible (and never batched)",
    )
    options: dict[str, Any] | None = Field(None, description="the model family's options (GET /v1/models/{id} lists them with types, ranges, defaults)")
    emotion_voice: str | VoiceId | None = Field(
        None,
        description="a library voice whose clip gives the speech its emotion, on a model whose capabilities list emotion_reference "
        "(how strongly: the model's options); elsewhere a 400",
    )

    @field_validator("response_format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        name = v.strip().lower()
        if name not in FORMATS:
            raise ValueError(f"unsupported format {v!r}; choose one of {', '.join(FORMATS)}")
        return name

    @property
    def voice_name(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceId) else self.voice

    @property
    def emotion_voice_name(self) -> str | None:
        return self.emotion_voice.id if isinstance(self.emotion_voice, VoiceId) else self.emotion_voice

    @property
    def flat_options(self) -> dict[str, Any]:
        """Top-level fields that are not OpenAI's or koe's: family options given flat."""
        return dict(self.model_extra or {})


class DesignBody(BaseModel):
    """`POST /v1/audio/voices/design` (koe's): a library voice designed from a description.

    The model speaks `input` in the voice `description` describes; that clip becomes the voice's
    reference (and `input` its transcript), so every model that clones can then speak with it."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is a clear 400, not silently ignored

    name: str = Field(..., description="the new voice's name: letters, digits, '.', '_' and '-' (no paths)")
    description: str = Field(..., description="the voice in words (age, gender, tone, pace, ...); at most server.max_description_chars")
    model: str | None = Field(
        None, description="a model that designs voices (a store name or hub id); absent, tts-1, tts-1-hd and gpt-4o-mini-tts mean the default model"
    )
    input: str | None = Field(None, description="the sample text the voice speaks (its transcript); absent: a short standard passage")
    language: str | None = Field(None, description="language of the sample text (auto, english, chinese, ...)")
    seed: int | None = Field(
        None, ge=0, json_schema_extra={"maximum": 2**63 - 1}, description="random seed (0 <= seed < 2**63): the same seed designs the same voice"
    )
    options: dict[str, Any] | None = Field(None, description="the model family's options (GET /v1/models/{id} lists them)")
    overwrite: bool = Field(False, description="replace a voice of that name (otherwise 409)")


class ModelCard(BaseModel):
    """One model in `GET /v1/models` (OpenAI's fields, then koe's)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "koe"
    family: str
    family_title: str = Field("", description="the family's name for people: its spec's title (a plugin family's too)")
    variant: str
    size: str = Field(description="the size from the weights' parameter count: 11M, 0.9B, 2.4B (empty when they cannot be counted)")
    parameters: int = Field(0, description="the weights' parameter count (from the safetensors headers)")
    random_weights: bool = Field(False, description="a test model with random weights (koe's fixture writers made it): it speaks noise, not speech")
    speakers: list[str]
    languages: list[str]
    loaded: bool
    default: bool
    status: Literal["loaded", "ready", "failed"] = Field(
        "ready", description="loaded: resident in memory; ready: loads on first use; failed: cannot be used now (see error)"
    )
    error: str | None = Field(None, description="why the model failed: its last load's error, or its missing/unreadable files")
    failed_at: int | None = Field(None, description="when its last load failed (Unix seconds); it is tried again when its files change")
    uses: str = ""
    voice_modes: list[str] = Field(default_factory=list)
    options: list[dict[str, Any]] = Field(default_factory=list, description="the family's options: name, type, default, range, help")
    capabilities: dict[str, Any] | None = Field(
        None, description="everything the model can do: voice modes, instruct, sample rate, streaming step, stream_is_one_shot, options, ..."
    )
    license: dict[str, Any] | None = Field(
        None,
        description="the model's licence as its family declares it: id (SPDX, or LicenseRef-...), name, url, file (in the model folder), "
        "needs_acceptance, summary, and for one that needs acceptance accepted_at (Unix seconds, or null); null when none is declared",
    )


VOICE_OBJECT = "audio.voice"  # OpenAI's object type of a voice (its SDKs' `Voice`)


class VoiceCard(BaseModel):
    """One library voice (OpenAI's fields, then koe's)."""

    id: str
    object: Literal["audio.voice"] = VOICE_OBJECT
    name: str
    created_at: int
    type: Literal["audio_sample", "prompt"] = Field(
        "audio_sample", description="OpenAI's: how the voice was made (prompt: designed from a description, kept as a clip)"
    )
    kind: Literal["library"] = Field("library", description="library: a voice of koe's voice library (a reference clip it clones)")
    models: list[str] = Field(default_factory=list, description="the models (store names) it works with: those that clone from a clip")
    source: str
    transcript: str | None
    description: str | None
    language: str | None
    duration_s: float
    sample_rate: int


class PresetVoiceCard(BaseModel):
    """A voice a model brings: a preset speaker (`kind` speaker) or an OpenAI voice name that means
    something on some model (`kind` openai, with `means` saying what on each)."""

    id: str
    object: Literal["audio.voice"] = VOICE_OBJECT
    name: str
    created_at: int = Field(0, description="when the first of its models was installed (Unix seconds; 0: unknown)")
    type: Literal["preset"] = "preset"
    kind: Literal["speaker", "openai"]
    models: list[str] = Field(description="the models (store names) it works with")
    means: dict[str, str] | None = Field(None, description="openai: what the name means on each model (a speaker, a designed voice, the model's own)")


class VoiceList(BaseModel):
    """`GET /v1/audio/voices`: library voices, then preset speakers, then OpenAI voice names."""

    object: Literal["list"] = "list"
    data: list[VoiceCard | PresetVoiceCard]
    default_model: str | None = Field(None, description="the model tts-1 / tts-1-hd / gpt-4o-mini-tts mean (None: no default set)")


class ListOf(BaseModel):
    object: Literal["list"] = "list"
    data: list[Any]


class Deleted(BaseModel):
    id: str
    object: str
    deleted: bool = True


class Health(BaseModel):
    """Liveness (`status` is "ok" while the server answers, even with a failed model)."""

    status: Literal["ok"] = "ok"
    version: str
    models_loaded: list[str]
    models_failed: dict[str, str] = Field(default_factory=dict, description="models whose last load failed: name -> reason")
    queues: dict[str, dict[str, int | float]]
