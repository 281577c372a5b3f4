"""Request and response bodies (pydantic): OpenAI's speech contract plus koe's extra fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from koe.service.encode import FORMATS
from koe.service.requests import SamplingOptions

SAMPLING_FIELDS = tuple(SamplingOptions.__dataclass_fields__)


class VoiceId(BaseModel):
    """OpenAI's object form of a custom voice: `{"id": "NAME"}`."""

    id: str


class SpeechBody(BaseModel):
    """`POST /v1/audio/speech`. OpenAI's fields, then koe's (all optional)."""

    model_config = ConfigDict(extra="forbid")

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
    seed: int | None = Field(None, ge=0, description="random seed; a seeded request is reproducible (and never batched)")
    do_sample: bool | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    max_new_tokens: int | None = Field(None, description="cap on codec frames (12.5 a second)")
    subtalker_dosample: bool | None = None
    subtalker_temperature: float | None = None
    subtalker_top_k: int | None = None
    subtalker_top_p: float | None = None

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

    def sampling(self) -> SamplingOptions:
        """The sampling options that were set (validated by `SamplingOptions`)."""
        return SamplingOptions(**{k: getattr(self, k) for k in SAMPLING_FIELDS})


class ModelCard(BaseModel):
    """One model in `GET /v1/models` (OpenAI's fields, then koe's)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "koe"
    family: str
    variant: str
    size: str
    speakers: list[str]
    languages: list[str]
    loaded: bool
    default: bool


class VoiceCard(BaseModel):
    """One library voice."""

    id: str
    object: Literal["voice"] = "voice"
    name: str
    created_at: int
    source: str
    transcript: str | None
    description: str | None
    language: str | None
    duration_s: float
    sample_rate: int


class ListOf(BaseModel):
    object: Literal["list"] = "list"
    data: list[Any]


class Deleted(BaseModel):
    id: str
    object: str
    deleted: bool = True


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    models_loaded: list[str]
    queues: dict[str, dict[str, int | float]]
