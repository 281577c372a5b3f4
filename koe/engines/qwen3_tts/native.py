"""Qwen3-TTS's native API: `generate` (one text or a batch -> SpeechResult) and `stream`, as users
know them; what `koe.load` returns for a Qwen3-TTS model (the spec's `native`).

It holds the engine (`engine`, `koe.engines.native.TTS`) and speaks through its contract path
(`Qwen3TTSEngine.synthesize`, the generic pipeline), except that a batch of short texts is decoded
as one batch (`Qwen3TTSEngine.decode_batch`), as upstream does.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from koe.engines.base import AudioChunk, CancelToken, EmptyText, RequestError, SpeechResult, SynthesisRequest, UnsupportedVoice, check_seed
from koe.engines.native import TTS
from koe.engines.qwen3_tts.engine import Qwen3TTSEngine, seeded
from koe.engines.qwen3_tts.limits import FRAME_RATE, MAX_SEGMENT_CHARS, SEGMENT_PAUSE_S
from koe.engines.qwen3_tts.voice import VoicePrompt
from koe.text.segment import segment_text

__all__ = ["Qwen3TTS"]


class Qwen3TTS(TTS):
    """A loaded Qwen3-TTS model's native API over its engine (`engine`)."""

    engine: Qwen3TTSEngine

    @property
    def speakers(self) -> list[str]:
        """The preset speakers (CustomVoice models; none elsewhere)."""
        return self.engine.speakers

    @property
    def languages(self) -> list[str]:
        return self.engine.languages

    def generate(
        self,
        text: str | list[str],
        *,
        language: str | list[str] | None = None,
        speaker: str | list[str] | None = None,
        instruct: str | list[str] | None = None,
        voice: VoicePrompt | list[VoicePrompt] | None = None,
        seed: int | None = None,
        max_segment_chars: int = MAX_SEGMENT_CHARS,
        pause_s: float = SEGMENT_PAUSE_S,
        max_frames: int | None = None,
        cancel: CancelToken | None = None,
        generator: torch.Generator | None = None,
        **sampling,
    ) -> SpeechResult | list[SpeechResult]:
        """Speak one text (-> SpeechResult) or a batch (-> list).

        `sampling` holds the model's options (`capabilities.options`: temperature, top_k, ...,
        `non_streaming_mode`); one not given takes its default, and `non_streaming_mode=None` means
        false, as it does upstream.

        `seed=N` equals upstream run right after `torch.manual_seed(N)`. A text longer than
        `max_segment_chars` is spoken in segments (segment i uses seed + i) joined by `pause_s` of
        silence. Each segment is capped by the runaway guard (`frame_budget`, or `max_frames`);
        hitting it ends the segment and marks the result `truncated`, with a warning.
        """
        single = not isinstance(text, (list, tuple))
        texts = [text] if single else list(text)
        for t in texts:  # checked before the batch path uses them, so a bad one is a RequestError naming it
            if not isinstance(t, str):
                raise RequestError(f"text must be a string or a list of strings, got {type(t).__name__}", param="input")
        check_seed(seed)
        if not texts:
            raise EmptyText("no text given")
        engine = self.engine
        nsm = engine.non_streaming(sampling)
        segmented = [segment_text(t, max_segment_chars) if isinstance(t, str) else [t] for t in texts]
        if not single and all(len(s) <= 1 for s in segmented):
            results = engine.decode_batch(
                texts,
                language,
                speaker,
                instruct,
                voice,
                seed,
                nsm,
                seeded(seed, generator),
                None if max_frames is None else max_frames / FRAME_RATE,
                cancel,
                sampling,
            )
            for r in results:
                for w in r.metadata["warnings"]:
                    warnings.warn(w, stacklevel=2)
            return results
        one = lambda v, i: v[i] if isinstance(v, (list, tuple)) else v  # noqa: E731
        results = []
        for i, t in enumerate(texts):
            request = _NativeRequest(
                t,
                one(language, i),
                one(voice, i) if one(voice, i) is not None else one(speaker, i),
                one(instruct, i),
                seed,
                cancel,
                options={**sampling, "non_streaming_mode": nsm},
                max_segment_chars=max_segment_chars,
                pause_s=pause_s,
                max_segment_s=None if max_frames is None else max_frames / FRAME_RATE,
                generator=generator,
            )
            results.append(_result(engine.synthesize(_both(request, one(speaker, i), one(voice, i)))))
        return results[0] if single else results

    def stream(
        self,
        text: str,
        *,
        language: str | None = None,
        speaker: str | None = None,
        instruct: str | None = None,
        voice: VoicePrompt | None = None,
        seed: int | None = None,
        first_chunk_frames: int = 4,
        chunk_frames: int = 12,
        max_segment_chars: int = MAX_SEGMENT_CHARS,
        pause_s: float = SEGMENT_PAUSE_S,
        max_frames: int | None = None,
        cancel: CancelToken | None = None,
        generator: torch.Generator | None = None,
        **sampling,
    ) -> Iterator[AudioChunk]:
        """Speak `text` as audio chunks while the talker is still producing frames.

        The first chunk comes after `first_chunk_frames` frames (4 = 0.32 s of audio), then one every
        `chunk_frames`. Frames come from the same decode core as `generate`, so the codes are the
        same; samples equal the one-shot result up to float32 rounding. Long texts stream on across
        segments. Closing the iterator or setting `cancel` stops decoding within one frame.
        """
        if not isinstance(text, str):
            raise RequestError("stream() speaks one text at a time; use generate() for a batch")
        if first_chunk_frames < 1 or chunk_frames < 1:
            raise RequestError(f"first_chunk_frames and chunk_frames must be >= 1 (got {first_chunk_frames}, {chunk_frames})")
        request = _NativeRequest(
            text,
            language,
            voice if voice is not None else speaker,
            instruct,
            seed,
            cancel,
            first_chunk_s=first_chunk_frames / FRAME_RATE,
            chunk_s=chunk_frames / FRAME_RATE,
            options=sampling,
            max_segment_chars=max_segment_chars,
            pause_s=pause_s,
            max_segment_s=None if max_frames is None else max_frames / FRAME_RATE,
            generator=generator,
        )
        return self.engine.synthesize(_both(request, speaker, voice))


@dataclass
class _NativeRequest(SynthesisRequest):
    """The native API's request: a caller's generator (draws when no seed is given)."""

    generator: torch.Generator | None = None


def _both(request: _NativeRequest, speaker, voice) -> _NativeRequest:
    """Native calls may pass a speaker and a cloned voice together; the check names the conflict."""
    if speaker and voice is not None:
        raise UnsupportedVoice(f"speaker={speaker!r} cannot be combined with a cloned voice; pass one or the other")
    return request


def _result(chunks: Iterator[AudioChunk]) -> SpeechResult:
    """A collected stream as the native result: samples and codes joined, the final chunk's metadata."""
    audio, codes, last = [], [], None
    for chunk in chunks:
        audio.append(chunk.samples)
        codes.append(torch.as_tensor(chunk.metadata["codes"]))
        last = chunk
    meta = {k: v for k, v in last.metadata.items() if k != "codes"}
    meta["frame_budget"] = sum(s["frame_budget"] for s in meta["segments"])
    return SpeechResult(np.concatenate(audio), last.sample_rate, meta, codes=torch.cat(codes))
