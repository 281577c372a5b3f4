"""The engine base: what every family's engine shares, written once.

A family's engine inherits `BaseEngine` and writes its loader, its core (`speak_segment`, and
`speak_segments` where it batches), `build_voice` and the checks that are truly its own; the base
owns the rest of the contract (`koe.engines.base.Engine`):

- `synthesize` is the generic pipeline over the family's segment speaker;
- `prepare_voice(reference, **prompt_options)`: the options a prompt takes are declared
  (`Capabilities.voice_options`) and checked here, then the family's `build_voice` makes it;
- `load_voice`: the family names its prompt class (`voice_type`) and that class's error
  (`voice_error`); a damaged or foreign prompt is a `VoicePromptMismatch`;
- `check_request`: the voice, language and instruction checks that `Capabilities` drive (voice
  modes, speakers, languages, `instruct`, `emotion_reference`), then the family's `check_options`
  for what is its own;
- `synthesize_batch` / `synthesize_streams` run requests in turn unless the family batches them
  (`Capabilities.batch` / `batch_stream` say which; `joins_rows`, rows joining a running batch);
- `close` frees what the family's `release` drops, and gives device memory back.

Capabilities are the only switch: callers never probe an engine for a method.
"""

from __future__ import annotations

import gc
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from koe.audio.decode import EncodedAudio, array_frames, decode
from koe.audio.errors import AudioError
from koe.engines import pipeline
from koe.engines.base import (
    CLONE,
    CLONE_WITHOUT_TRANSCRIPT,
    DESIGN,
    NO_VOICE,
    PRESET,
    AudioChunk,
    CancelToken,
    Capabilities,
    ConversionRequest,
    RequestError,
    SynthesisRequest,
    UnsupportedLanguage,
    UnsupportedVoice,
    VoicePromptMismatch,
    VoiceReference,
)
from koe.engines.pipeline import PipelineDefaults

__all__ = ["BaseEngine", "Checked", "in_turn", "reference_frames"]


@dataclass
class Checked:
    """A request after `check_request`: what each of its segments shares. A family extends it
    (a subclass with its own fields) where its core needs more.

    `voice`: the prompt (a preset's name where the model has presets); `settings`: the family's
    options in the form its core takes; `user_cap`: the request set its own `max_segment_s`;
    `emotion`: the emotion reference's prompt (None: none given), keyword-only so that a family's
    subclass keeps its positional fields."""

    voice: Any
    language: str | None
    instruct: str | None
    settings: Any
    cancel: CancelToken | None
    user_cap: bool
    emotion: Any = field(default=None, kw_only=True)


class BaseEngine:
    """A loaded model of one family (see the module doc). Not re-entrant: one call at a time.

    A family sets `family`, `title` (its name in messages), `voice_type` / `voice_error` (its prompt
    class and the error that class's `load` raises), `pipeline_defaults`, and defines `load`,
    `capabilities`, `sample_rate`, `precision`, `build_voice`, `speak_segment`, `result_metadata` and
    `release`. Its native API (`koe.engines.native.TTS`, what `koe.load` returns) holds it.
    """

    family: ClassVar[str]
    title: ClassVar[str]
    voice_type: ClassVar[type]
    voice_error: ClassVar[type[Exception]] = ValueError
    pipeline_defaults: ClassVar[PipelineDefaults] = PipelineDefaults()
    kernel: str | None = None  # what runs the backbone's products where not torch's own (`koe.runtime.precision.apply`)

    @property
    def capabilities(self) -> Capabilities:
        raise NotImplementedError

    # -- speaking ---------------------------------------------------------------------------------
    def synthesize(self, request: SynthesisRequest) -> Iterator[AudioChunk]:
        """Speak one request as audio chunks (the generic pipeline, `koe.engines.pipeline.run`)."""
        return pipeline.run(self, request)

    def synthesize_text(self, pieces: Iterable[str], request: SynthesisRequest) -> Iterator[AudioChunk]:
        """Text that arrives in pieces (as an LLM writes it), spoken as it comes: here each sentence
        as soon as it is complete (`koe.engines.pipeline.run_text_stream`; a family that takes text
        in pieces itself overrides this and sets `Capabilities.text_stream`). `request` gives
        everything but the text; the final chunk, after the last audio, carries the metadata."""
        return pipeline.run_text_stream(self, pieces, request)

    def synthesize_batch(self, requests: list[SynthesisRequest]) -> list[list[AudioChunk]]:
        """One-shot requests that share voice and options; here in turn (a family whose
        `Capabilities.batch` is true decodes them as one batch)."""
        return [list(self.synthesize(r)) for r in requests]

    def synthesize_streams(
        self, requests: list[SynthesisRequest], admit: Callable[[], list[SynthesisRequest]] | None = None
    ) -> Iterator[tuple[int, AudioChunk | RequestError]]:
        """Streamed requests as `(request index, chunk)` pairs; here in turn, a cancelled one skipped
        (`admit` is never asked: rows join a running batch only where `Capabilities.joins_rows`)."""
        return in_turn(self, requests)

    def convert(self, request: ConversionRequest) -> Iterator[AudioChunk]:
        """Voice conversion, for a family whose `Capabilities.conversion` is true (it overrides this);
        here a `RequestError` saying the model does not convert."""
        raise RequestError(f"{self.title} does not convert voices: give a model whose capabilities list conversion", param="model")

    # -- voices -----------------------------------------------------------------------------------
    def prepare_voice(self, reference: Any, ref_text: str | None = None, *, trim: bool = False, **prompt_options: Any) -> Any:
        """A reusable prompt from a reference: a `VoiceReference` (the contract's form), or a clip
        (path, bytes, or (samples, sample_rate)) and its transcript. `prompt_options` are the ones
        the model declares (`Capabilities.voice_options`), checked, defaults filled in."""
        if isinstance(reference, VoiceReference):
            if ref_text is not None or trim:
                reference = replace(reference, text=reference.text if ref_text is None else ref_text, trim=reference.trim or trim)
        else:
            reference = VoiceReference(reference, ref_text, trim=trim)
        schema = self.capabilities.voice_options
        values = schema.validate(prompt_options)
        return self.build_voice(reference, **{o.name: values.get(o.name, o.default) for o in schema.options})

    def build_voice(self, reference: VoiceReference, **prompt_options: Any) -> Any:
        """The family's prompt from a reference, with its checked prompt options."""
        raise NotImplementedError

    def load_voice(self, folder: str | Path) -> Any:
        """A prompt saved by its `save`; one that is damaged or made for another model is a `VoicePromptMismatch`."""
        try:
            voice = self.voice_type.load(folder)
        except self.voice_error as e:
            raise VoicePromptMismatch(str(e), param="voice") from e
        return self.check_saved(voice, folder)

    def check_saved(self, voice: Any, folder: str | Path) -> Any:
        """A loaded prompt, checked against this model (the family's hook; by default `check_prompt`)."""
        return self.check_prompt(voice)

    def check_prompt(self, voice: Any) -> Any:
        """A prompt of this family's class, checked against this model before use (the family's
        hook: a prompt made for another variant is a `VoicePromptMismatch`)."""
        return voice

    # -- checks -----------------------------------------------------------------------------------
    def check_request(self, request: SynthesisRequest) -> Checked:
        """Validate a request once (the pipeline's first step): voice, language, instruction and
        emotion reference as `Capabilities` say, then the family's own (`check_options`)."""
        checked = Checked(
            self.check_voice(request.voice),
            self.check_language(request.language),
            self.check_instruct(request.instruct),
            None,
            request.cancel,
            request.max_segment_s is not None,
            emotion=self.check_emotion(request.emotion),
        )
        return self.check_options(request, checked)

    def check_options(self, request: SynthesisRequest, checked: Checked) -> Checked:
        """The family's options (and any check truly its own); by default the options schema's values."""
        return replace(checked, settings=self.capabilities.options.validate(request.options))

    def check_voice(self, voice: Any) -> Any:
        """The voice as the model's voice modes allow it: a preset's name, a prompt of this family's
        class (`check_prompt`), or None where the model speaks without one (its own voice, or one
        described in the instruction)."""
        caps = self.capabilities
        modes = caps.voice_modes
        if isinstance(voice, str):
            if PRESET not in modes:
                raise UnsupportedVoice(f"{self.title} has no preset speakers (voice={voice!r}); {_ways(modes)}")
            if voice.lower() not in {s.lower() for s in caps.speakers}:
                raise UnsupportedVoice(f"unknown speaker {voice!r}; supported: {list(caps.speakers)}")
            return voice
        if voice is None:
            if NO_VOICE in modes or DESIGN in modes:
                return None
            if PRESET in modes:
                raise UnsupportedVoice(f"this {self.title} model needs a speaker; choose one of {list(caps.speakers)}")
            raise UnsupportedVoice(
                f"{self.title} speaks in a cloned voice: pass a voice prepared from a reference clip "
                "(engine.prepare_voice(clip, ref_text=...), or --ref clip.wav --ref-text ...)"
            )
        if not modes & {CLONE, CLONE_WITHOUT_TRANSCRIPT}:
            raise UnsupportedVoice(f"this {self.title} model cannot clone a voice ({type(voice).__name__} given); {_ways(modes)}")
        if not isinstance(voice, self.voice_type):
            raise VoicePromptMismatch(
                f"this voice prompt was made for another model family ({type(voice).__name__}); prepare the voice again with this {self.title} model"
            )
        return self.check_prompt(voice)

    def check_emotion(self, emotion: Any) -> Any:
        """The emotion reference (None: none) where the model takes one (`Capabilities.emotion_reference`):
        a prompt of this family's class, checked as a voice is (`check_prompt`). Elsewhere, or given
        as anything but a prepared prompt, an `UnsupportedVoice` naming `emotion`."""
        if emotion is None:
            return None
        caps = self.capabilities
        if not caps.emotion_reference:
            raise UnsupportedVoice(
                f"{self.title} ({caps.variant}) takes no emotion reference: leave the emotion clip out, "
                "or use a model whose capabilities list emotion_reference",
                param="emotion",
            )
        if isinstance(emotion, (str, bytes)):
            raise UnsupportedVoice(
                f"the emotion reference must be a voice prompt prepared from a clip (engine.prepare_voice(clip)), not a {type(emotion).__name__}",
                param="emotion",
            )
        if not isinstance(emotion, self.voice_type):
            raise VoicePromptMismatch(
                f"the emotion reference was prepared by another model family ({type(emotion).__name__}); prepare it with this {self.title} model",
                param="emotion",
            )
        try:
            return self.check_prompt(emotion)
        except RequestError as e:
            kind = VoicePromptMismatch if isinstance(e, VoicePromptMismatch) else UnsupportedVoice
            raise kind(f"the emotion reference: {e}", param="emotion") from e

    def check_language(self, language: str | None) -> str | None:
        """`language` if the model takes it (None: the model's default)."""
        languages = self.capabilities.languages
        if language is None or str(language).lower() in languages:
            return language
        if tuple(languages) == ("auto",):
            raise UnsupportedLanguage(f"unsupported language {language!r}: {self.title} reads the language from the text; leave it unset (auto)")
        raise UnsupportedLanguage(f"unsupported language {language!r}; {self.title} takes: {', '.join(languages)}")

    def check_instruct(self, instruct: str | None) -> str | None:
        """The instruction where the model takes one (`instruct`, or a voice description on design
        models); elsewhere it is ignored, with a warning."""
        caps = self.capabilities
        if not instruct or not instruct.strip():
            return None
        if caps.instruct or DESIGN in caps.voice_modes:
            return instruct
        warnings.warn(f"{self.title} takes no style instruction; it was ignored", stacklevel=4)
        return None

    # -- the end ------------------------------------------------------------------------------------
    def release(self) -> None:
        """Drop the weights, caches and graphs (the family's hook; `close` calls it)."""

    def close(self) -> None:
        """Free everything the engine holds (weights, caches, graphs, device memory); it is unusable after."""
        self.release()
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()


def reference_frames(audio: Any, *, title: str, min_s: float, max_s: float, trim: bool = False, what: str = "voice clip") -> tuple[Any, int]:
    """A reference clip (path, bytes, file object, or (samples, rate)) as float32 frames, `(n,)` or
    `(n, channels)`, and its rate; `trim` keeps its first `max_s` seconds, else a longer clip is an
    `UnsupportedVoice` naming `title`'s limit, as is one shorter than `min_s`."""
    try:
        if isinstance(audio, tuple) and len(audio) == 2:
            samples, rate = audio
            if hasattr(samples, "detach"):  # a torch tensor
                samples = samples.detach().cpu().numpy()
            frames, rate = array_frames(np.asarray(samples)), int(rate)
            if trim:
                frames = frames[: int(max_s * rate)]
        else:
            frames, rate = decode(EncodedAudio.read(audio, what), max_seconds=max_s, trim=trim)
    except AudioError as e:
        raise UnsupportedVoice(f"the {what} cannot be used: {e}") from e
    seconds = frames.shape[0] / rate if rate > 0 else 0.0
    if seconds > max_s:
        raise UnsupportedVoice(f"the {what} is {seconds:.1f} s long; {title} clones from at most {max_s:g} s (trim it, or pass trim=True)")
    if seconds < min_s:
        raise UnsupportedVoice(f"the {what} is {seconds:.2f} s long; {title} clones from at least {min_s:g} s")
    return frames, rate


def _ways(modes: frozenset[str]) -> str:
    """What a model offers instead of what was asked, in words."""
    ways = []
    if NO_VOICE in modes:
        ways.append("leave the voice out for the model's own voice")
    if DESIGN in modes:
        ways.append("describe the voice in the instructions")
    if modes & {CLONE, CLONE_WITHOUT_TRANSCRIPT}:
        ways.append("clone one from a clip")
    if PRESET in modes:
        ways.append("choose a preset speaker")
    return ", or ".join(ways) or "this model takes no voice"


def in_turn(engine: BaseEngine, requests: list[SynthesisRequest]) -> Iterator[tuple[int, AudioChunk]]:
    """Streams one after another (a cancelled one is skipped); closing stops the one speaking."""
    for i, request in enumerate(requests):
        if request.cancel is not None and request.cancel.cancelled:
            continue
        chunks = engine.synthesize(request)
        try:
            for chunk in chunks:
                yield i, chunk
        finally:
            chunks.close()
