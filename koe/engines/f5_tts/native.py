"""F5-TTS's native convenience API: `generate` (text -> SpeechResult) and `stream`, with
upstream's option names as keyword arguments; thin layers over the contract path."""

from __future__ import annotations

from collections.abc import Iterator

from koe.engines.base import AudioChunk, CancelToken, SpeechResult, SynthesisRequest, collect

__all__ = ["NativeAPI", "SpeechResult"]


class NativeAPI:
    """The native methods of `F5TTSEngine` (a mixin over its contract path)."""

    def _native_request(self, text, voice, seed, cancel, options, **kw) -> SynthesisRequest:
        return SynthesisRequest(text=text, voice=voice, seed=seed, cancel=cancel, options=options, **kw)

    def generate(self, text: str, *, voice, seed: int | None = None, cancel: CancelToken | None = None, **options) -> SpeechResult:
        """Speak `text` in `voice` (from `prepare_voice`). Options are upstream's `infer` arguments:
        nfe_step, cfg_strength, sway_sampling_coef, speed, fix_duration, target_rms,
        cross_fade_duration; None means what it means upstream (`sway_sampling_coef=None`: no sway; for the
        others, the default). `seed=N` gives upstream's samples after `seed_everything(N)`."""
        out = collect(self.synthesize(self._native_request(text, voice, seed, cancel, options)))
        return SpeechResult(out.samples, out.sample_rate, out.metadata)

    def stream(self, text: str, *, voice, seed: int | None = None, cancel: CancelToken | None = None,
               first_chunk_s: float | None = None, chunk_s: float | None = None, **options) -> Iterator[AudioChunk]:
        """`generate` as chunks: each text batch as soon as it is made, in `chunk_s` pieces (the same samples)."""
        return self.synthesize(self._native_request(text, voice, seed, cancel, options, stream=True, first_chunk_s=first_chunk_s, chunk_s=chunk_s))
