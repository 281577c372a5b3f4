"""VoxCPM's native convenience API: `generate` (text -> SpeechResult) and `stream`, with
upstream's option names as keyword arguments; thin layers over the contract path."""

from __future__ import annotations

from collections.abc import Iterator

from koe.engines.base import AudioChunk, CancelToken, SpeechResult, SynthesisRequest, collect

__all__ = ["NativeAPI", "SpeechResult"]


class NativeAPI:
    """The native methods of `VoxCPMEngine` (a mixin over its contract path)."""

    def _native_request(self, text, voice, instruct, seed, cancel, options, **kw) -> SynthesisRequest:
        return SynthesisRequest(text=text, voice=voice, instruct=instruct, seed=seed, cancel=cancel, options=options, **kw)

    def generate(self, text: str, *, voice=None, instruct: str | None = None, seed: int | None = None, cancel: CancelToken | None = None,
                 **options) -> SpeechResult:
        """Speak `text`: in the model's own voice, a designed one (`instruct`, VoxCPM2) or `voice`
        (from `prepare_voice` / `make_voice`). Options are upstream's `generate` arguments:
        cfg_value, inference_timesteps, min_len, max_len, retry_badcase, retry_badcase_max_times,
        retry_badcase_ratio_threshold; None means what it means upstream (`retry_badcase=None`: no retries;
        for the others, the default). `seed=N` gives upstream's samples after `torch.manual_seed(N)`."""
        out = collect(self.synthesize(self._native_request(text, voice, instruct, seed, cancel, options)))
        return SpeechResult(out.samples, out.sample_rate, out.metadata)

    def stream(self, text: str, *, voice=None, instruct: str | None = None, seed: int | None = None, cancel: CancelToken | None = None,
               first_chunk_s: float | None = None, chunk_s: float | None = None, **options) -> Iterator[AudioChunk]:
        """`generate` as chunks: upstream's `generate_streaming` samples (one latent patch at a
        time, gathered into `chunk_s` pieces); they differ from one-shot's, as upstream's do."""
        return self.synthesize(self._native_request(text, voice, instruct, seed, cancel, options, stream=True, first_chunk_s=first_chunk_s,
                                                    chunk_s=chunk_s))  # fmt: skip
