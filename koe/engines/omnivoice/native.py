"""OmniVoice's native API: `generate` (one text or a batch -> SpeechResult) and `stream`, with
upstream's names: `language`, `instruct` (a voice design), `voice` (a prepared clone prompt, one
per text or one for all), `duration` and `speed` (one for all or one per text) and the sampler's
and post-processing's options (`num_step`, `guidance_scale`, ...). What `koe.load` returns for an
OmniVoice model (the spec's `native`).

One text goes through the engine's contract (the generic pipeline: one upstream call). A list is
one upstream `generate(text=[...])` call, as upstream batches it: the short texts in one batch,
then the long ones in chunks (`koe.engines.omnivoice.engine.speak_texts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from koe.engines.base import AudioChunk, CancelToken, EmptyText, RequestError, SpeechResult, SynthesisRequest, check_seed, collect
from koe.engines.native import TTS
from koe.engines.omnivoice.engine import OmniVoiceEngine, speak_texts

__all__ = ["OmniVoiceTTS"]


def _per_text(name: str, value: Any, n: int) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise RequestError(f"{name}: {len(value)} values for {n} texts", param=name)
        return list(value)
    return [value] * n


class OmniVoiceTTS(TTS):
    """A loaded OmniVoice model's native API over its engine (`engine`)."""

    engine: OmniVoiceEngine

    def generate(
        self,
        text: str | list[str],
        *,
        voice: Any = None,
        instruct: str | None = None,
        language: str | None = None,
        seed: int | None = None,
        duration: float | list[float | None] | None = None,
        speed: float | list[float | None] | None = None,
        cancel: CancelToken | None = None,
        **options: Any,
    ) -> SpeechResult | list[SpeechResult]:
        """Speak one text (-> SpeechResult) or a list (-> a list, one upstream batch).

        `voice`: a prompt from `prepare_voice(clip, ref_text)` (one, or one per text), or None: the
        model's own voice, or the voice `instruct` designs ("female, low pitch, british accent").
        `language`: a name or ISO 639 code (None: none). `options` are upstream's (`num_step`,
        `guidance_scale`, `t_shift`, `class_temperature`, `position_temperature`,
        `layer_penalty_factor`, `denoise`, `postprocess_output`, ...). `seed=N` gives upstream's
        samples after `torch.manual_seed(N)`."""
        check_seed(seed)
        if isinstance(text, str):
            if isinstance(voice, (list, tuple)) or isinstance(duration, (list, tuple)) or isinstance(speed, (list, tuple)):
                raise RequestError("one text takes one voice, duration and speed (lists go with a list of texts)", param="input")
            extra = {k: v for k, v in (("duration", duration), ("speed", speed)) if v is not None}
            request = SynthesisRequest(text=text, language=language, voice=voice, instruct=instruct, seed=seed, cancel=cancel, options={**options, **extra})
            out = collect(self.engine.synthesize(request))
            return SpeechResult(out.samples, out.sample_rate, out.metadata)
        if not isinstance(text, (list, tuple)):
            raise RequestError(f"text must be a string or a list of strings, got {type(text).__name__}", param="input")
        texts = list(text)
        if not texts:
            raise EmptyText("no text given")
        for t in texts:
            if not isinstance(t, str):
                raise RequestError(f"text must be a string or a list of strings, got {type(t).__name__}", param="input")
        n = len(texts)
        waves = speak_texts(
            self.engine,
            texts,
            voices=_per_text("voice", voice, n),
            language=language,
            instruct=instruct,
            seed=seed,
            durations=_per_text("duration", duration, n),
            speeds=_per_text("speed", speed, n),
            options=options,
            cancel=cancel,
        )
        meta = {**self.engine.result_metadata(), "seed": seed, "batch_size": n}
        return [SpeechResult(w, self.sample_rate, dict(meta)) for w in waves]

    def stream(
        self,
        text: str,
        *,
        voice: Any = None,
        instruct: str | None = None,
        language: str | None = None,
        seed: int | None = None,
        cancel: CancelToken | None = None,
        **options: Any,
    ) -> Iterator[AudioChunk]:
        """`generate` of one text as chunks: each of upstream's text chunks as soon as it is made (a
        text under `audio_chunk_threshold` seconds is one chunk), post-processed on its own."""
        request = SynthesisRequest(text=text, language=language, voice=voice, instruct=instruct, seed=seed, cancel=cancel, options=options, stream=True)
        return self.engine.synthesize(request)
