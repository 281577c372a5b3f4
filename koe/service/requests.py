"""What a caller asks the synthesizer for, and what it gets back (plain dataclasses, torch-free)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from koe.audio.io import AudioSource
from koe.service.encode import AudioFormat
from koe.service.errors import InvalidRequest


@dataclass(frozen=True)
class SamplingOptions:
    """Decoding options; None keeps the model's `generation_config.json` value.

    The talker samples the first codebook of each frame; the "subtalker" (code predictor) the other 15.
    """

    do_sample: bool | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    max_new_tokens: int | None = None
    subtalker_dosample: bool | None = None
    subtalker_temperature: float | None = None
    subtalker_top_k: int | None = None
    subtalker_top_p: float | None = None

    def __post_init__(self) -> None:
        for name in ("temperature", "subtalker_temperature"):
            _check(name, getattr(self, name), lambda v: v > 0, "must be > 0")
        for name in ("top_p", "subtalker_top_p"):
            _check(name, getattr(self, name), lambda v: 0 < v <= 1, "must be in (0, 1]")
        for name in ("top_k", "subtalker_top_k"):
            _check(name, getattr(self, name), lambda v: v >= 0 and float(v).is_integer(), "must be a whole number >= 0")
        _check("repetition_penalty", self.repetition_penalty, lambda v: v > 0, "must be > 0")
        _check("max_new_tokens", self.max_new_tokens, lambda v: v >= 1 and float(v).is_integer(), "must be a whole number >= 1")

    def as_kwargs(self) -> dict[str, Any]:
        """The options that are set, as keyword arguments for an engine."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SamplingOptions:
        """Build from a mapping; unknown keys are an `InvalidRequest` naming the valid ones."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise InvalidRequest(f"unknown sampling option(s) {unknown}; valid: {sorted(names)}")
        return cls(**d)


def _check(name: str, value: Any, ok, rule: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)) or not ok(value):
        raise InvalidRequest(f"{name}={value!r}: {rule}", param=name)


@dataclass
class SpeechRequest:
    """One thing to say, and how.

    Voice, in order of precedence: `ref_audio` (+ `ref_text`) clones an ad-hoc clip; `voice` names a
    library voice (cloned; needs a Base model) or, failing that, a preset speaker; `speaker` names a
    preset speaker (CustomVoice); `design` describes a new voice in words (VoiceDesign). `instruct`
    is a style instruction (CustomVoice 1.7B) or, on VoiceDesign models, the voice description.
    None values fall back to the settings' `synthesis` defaults.
    """

    text: str
    model: str | None = None
    voice: str | None = None
    speaker: str | None = None
    instruct: str | None = None
    design: str | None = None
    ref_audio: AudioSource | None = None
    ref_text: str | None = None
    language: str | None = None
    seed: int | None = None
    sampling: SamplingOptions = field(default_factory=SamplingOptions)
    speed: float | None = None
    format: str | None = None
    save: bool | None = None  # keep the output under KOE_HOME/outputs (None: settings.synthesis.save_outputs)


@dataclass
class SpeechOutput:
    """A finished utterance: the encoded file plus what made it.

    `samples` are the engine's float32 mono samples at `engine_sample_rate` (before the speed
    change); `audio` is the file in `format` at `sample_rate`, `duration` seconds long.
    """

    audio: bytes
    format: AudioFormat
    sample_rate: int
    duration: float
    samples: np.ndarray
    engine_sample_rate: int
    model: str
    voice: str | None
    seed: int
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    output_id: int | None = None
    path: Path | None = None


@dataclass
class StreamChunk:
    """A piece of a streamed utterance: encoded bytes ready now and the (speed-changed) samples in them.

    The last chunk has `final=True` and carries the utterance's `warnings`, `metadata` and `output_id`.
    """

    data: bytes
    samples: np.ndarray
    sample_rate: int
    final: bool = False
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    output_id: int | None = None
    path: Path | None = None
