"""The native API: what `koe.load` returns. It holds the family's engine (as kokoro's `KPipeline`
holds a `KModel`) and speaks through the engine's contract:

- `generate` (text -> `SpeechResult`) and `stream` (text -> chunks), with the model's option names
  (`capabilities.options`, upstream's) as keyword arguments, and `emotion=` (a second clip or
  prompt for the emotion, where `capabilities.emotion_reference`);
- `prepare_voice` / `load_voice` (a reusable prompt), `capabilities`, `sample_rate`, `close`;
- `engine`: the contract itself (`koe.engines.base.Engine`: `synthesize`, `prepare_voice`,
  `capabilities`, `close`), the one the CLI and the server drive, with the family's internals.

A family whose native calls take more than this (Qwen3-TTS's batches of texts and speakers, as
upstream's wrapper takes them) subclasses `TTS` and names its class in its spec's `native`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from koe.engines.base import AudioChunk, CancelToken, Capabilities, SpeechResult, SynthesisRequest, VoiceReference, collect

__all__ = ["TTS", "SpeechResult"]


class TTS:
    """A loaded model's native API over its engine (see the module doc). Not re-entrant: one call at a time."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def __repr__(self) -> str:
        return f"<koe {self.engine.title} model, {self.precision}>"

    # -- what the model is ----------------------------------------------------------------------
    @property
    def family(self) -> str:
        return self.engine.family

    @property
    def capabilities(self) -> Capabilities:
        """Voice modes, speakers, languages and the options schema (`koe.engines.base.Capabilities`)."""
        return self.engine.capabilities

    @property
    def sample_rate(self) -> int:
        return self.engine.sample_rate

    @property
    def precision(self) -> str:
        """The numeric mode the model runs in ("float32": upstream's bits on the CPU; "bfloat16", "int8", "int4" opt-in)."""
        return self.engine.precision

    # -- voices ---------------------------------------------------------------------------------
    def prepare_voice(self, reference: Any, ref_text: str | None = None, *, trim: bool = False, **prompt_options: Any) -> Any:
        """A reusable voice prompt from a clip (path, bytes, or (samples, sample_rate)) and its
        transcript, or a `VoiceReference`; `prompt_options` are the model's (`capabilities.voice_options`).
        `.save(folder)` keeps it; `load_voice(folder)` reads it back."""
        return self.engine.prepare_voice(reference, ref_text, trim=trim, **prompt_options)

    def load_voice(self, folder: str | Path) -> Any:
        """A prompt saved by its `save`, checked against this model."""
        return self.engine.load_voice(folder)

    def emotion_prompt(self, emotion: Any) -> Any:
        """An emotion reference as a request takes it: a clip (path, bytes, (samples, sample_rate) or a
        `VoiceReference`) prepared as a voice is, or a prompt from `prepare_voice` as it is. On a model
        whose capabilities take none, it is passed on as given, for the engine to refuse."""
        if emotion is not None and self.capabilities.emotion_reference and isinstance(emotion, (str, Path, bytes, tuple, VoiceReference)):
            return self.engine.prepare_voice(emotion)
        return emotion

    # -- speaking -------------------------------------------------------------------------------
    def generate(
        self,
        text: str,
        *,
        voice: Any = None,
        instruct: str | None = None,
        seed: int | None = None,
        cancel: CancelToken | None = None,
        emotion: Any = None,
        **options: Any,
    ) -> SpeechResult:
        """Speak `text` in `voice` (from `prepare_voice`; None: the model's own voice, or one described by
        `instruct`, where the model has them). `emotion`: where the model takes an emotion reference
        (`capabilities.emotion_reference`, IndexTTS 2), a second clip or prepared prompt whose emotion
        the speech takes (how strongly: the model's option, e.g. `emo_alpha`). `options` are the model's
        (`capabilities.options`, upstream's names: F5-TTS's `nfe_step`, VoxCPM's `cfg_value`, ...); None
        means what it means upstream (F5-TTS's `sway_sampling_coef=None`: no sway; VoxCPM's
        `retry_badcase=None`: no retries; for the others, the default). `seed=N` gives upstream's samples
        after it seeds with N."""
        request = SynthesisRequest(text=text, voice=voice, instruct=instruct, seed=seed, cancel=cancel, options=options, emotion=self.emotion_prompt(emotion))
        out = collect(self.engine.synthesize(request))
        return SpeechResult(out.samples, out.sample_rate, out.metadata)

    def stream(
        self,
        text: str | Iterable[str],
        *,
        voice: Any = None,
        instruct: str | None = None,
        seed: int | None = None,
        cancel: CancelToken | None = None,
        first_chunk_s: float | None = None,
        chunk_s: float | None = None,
        emotion: Any = None,
        **options: Any,
    ) -> Iterator[AudioChunk]:
        """`generate` as chunks of about `first_chunk_s`, then `chunk_s` seconds (the model's defaults where
        None). F5-TTS sends each text batch as it is made (the same samples as `generate`); VoxCPM decodes
        as upstream's `generate_streaming` does, one latent patch at a time (other samples, as upstream's).

        `text` may also arrive in pieces (any iterable of strings, e.g. an LLM's tokens as they come):
        then each sentence is spoken as soon as it is complete (where the model takes text in pieces
        itself, `capabilities.text_stream`, it does so), and the final chunk, after the last audio,
        carries the metadata."""
        request = SynthesisRequest(
            text=text if isinstance(text, str) else "",
            voice=voice,
            instruct=instruct,
            seed=seed,
            cancel=cancel,
            options=options,
            stream=True,
            first_chunk_s=first_chunk_s,
            chunk_s=chunk_s,
            emotion=self.emotion_prompt(emotion),
        )
        return self.engine.synthesize(request) if isinstance(text, str) else self.engine.synthesize_text(text, request)

    # -- the end --------------------------------------------------------------------------------
    def close(self) -> None:
        """Free the model (weights, caches, device memory); it is unusable after."""
        self.engine.close()

    def __enter__(self) -> TTS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
