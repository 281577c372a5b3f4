"""What a caller asks the synthesizer for, and what it gets back (plain dataclasses, torch-free)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from koe.audio.io import AudioSource
from koe.service.synthesis.encode import AudioFormat


@dataclass
class SpeechRequest:
    """One thing to say, and how.

    Voice, in order of precedence: `ref_audio` (+ `ref_text`) clones an ad-hoc clip; `voice` names a
    library voice (cloned; needs a model that clones) or, failing that, a preset speaker; `speaker`
    names a preset speaker; `design` describes a new voice in words (a model that designs voices).
    `instruct` is a style instruction or, on design models, the voice description. `options` are
    the model family's own settings (`koe models info NAME` lists them), checked against its schema.
    The emotion reference (a model whose capabilities list `emotion_reference`): a
    second voice whose clip gives the speech its emotion, `emotion_voice` (a library voice) or
    `emotion_audio` (a clip), resolved as the voice is. None values fall back to the settings'
    `synthesis` defaults.
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
    options: dict[str, Any] = field(default_factory=dict)
    speed: float | None = None
    format: str | None = None
    save: bool | None = None  # keep the output under KOE_HOME/outputs (None: settings.synthesis.save_outputs)
    emotion_voice: str | None = None
    emotion_audio: AudioSource | None = None


@dataclass
class ConvertRequest:
    """Speech to say again in another voice (voice conversion: the same words, another speaker).

    `source`: the speech (a path, bytes, or (samples, rate)). The voice is cloned: `ref_audio` (+
    `ref_text`, which conversion does not need) or `voice`, a library voice. `options`, `seed`,
    `format` and `save` as in `SpeechRequest`; the model must convert (`Capabilities.conversion`).
    """

    source: AudioSource
    model: str | None = None
    voice: str | None = None
    ref_audio: AudioSource | None = None
    ref_text: str | None = None
    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    format: str | None = None
    save: bool | None = None


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
