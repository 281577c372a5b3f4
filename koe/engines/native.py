"""The native convenience API a family keeps where it has nothing of its own to add: `generate`
(text -> `SpeechResult`) and `stream` (text -> chunks), with the model's option names
(`capabilities.options`, upstream's) as keyword arguments; thin layers over the contract path.

F5-TTS and VoxCPM use it as it is; Qwen3-TTS's own (`qwen3_tts/native.py`) also takes batches
of texts and speakers, as upstream's wrapper does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from koe.engines.base import AudioChunk, CancelToken, SpeechResult, SynthesisRequest, collect

__all__ = ["NativeAPI", "SpeechResult"]


class NativeAPI:
    """`generate` and `stream` over an engine's `synthesize` (a mixin of the family's engine)."""

    def generate(
        self, text: str, *, voice: Any = None, instruct: str | None = None, seed: int | None = None, cancel: CancelToken | None = None, **options: Any
    ) -> SpeechResult:
        """Speak `text` in `voice` (from `prepare_voice`; None: the model's own voice, or one described by
        `instruct`, where the model has them). `options` are the model's (`capabilities.options`, upstream's
        names: F5-TTS's `nfe_step`, VoxCPM's `cfg_value`, ...); None means what it means upstream (F5-TTS's
        `sway_sampling_coef=None`: no sway; VoxCPM's `retry_badcase=None`: no retries; for the others, the
        default). `seed=N` gives upstream's samples after it seeds with N."""
        out = collect(self.synthesize(SynthesisRequest(text=text, voice=voice, instruct=instruct, seed=seed, cancel=cancel, options=options)))
        return SpeechResult(out.samples, out.sample_rate, out.metadata)

    def stream(
        self,
        text: str,
        *,
        voice: Any = None,
        instruct: str | None = None,
        seed: int | None = None,
        cancel: CancelToken | None = None,
        first_chunk_s: float | None = None,
        chunk_s: float | None = None,
        **options: Any,
    ) -> Iterator[AudioChunk]:
        """`generate` as chunks of about `first_chunk_s`, then `chunk_s` seconds (the model's defaults where
        None). F5-TTS sends each text batch as it is made (the same samples as `generate`); VoxCPM decodes
        as upstream's `generate_streaming` does, one latent patch at a time (other samples, as upstream's)."""
        request = SynthesisRequest(
            text=text, voice=voice, instruct=instruct, seed=seed, cancel=cancel, options=options, stream=True, first_chunk_s=first_chunk_s, chunk_s=chunk_s
        )
        return self.synthesize(request)
