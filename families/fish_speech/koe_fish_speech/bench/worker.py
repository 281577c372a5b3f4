"""The koe side of Fish Speech's benchmark (`koe.bench.wire`'s protocol). Run by `python -m koe.bench.koe_worker fish_speech`.

It drives the registered engine through koe's engine contract (`load_engine`, `prepare_voice` with
each clip and its transcript, several clips joined as speakers 0, 1, ..., `synthesize` with `seed`
and `max_new_tokens`), as a user's request runs: one call of upstream's server engine. Parts are
timed in place for the one request: the voices (`prepare_voice`: the clip read, resampled, encoded),
the frame loop's steps (`generate._Decoder.step`, told apart by the positions they read: a batch's
prompt is its prefill, one position a decode step) and the codec's decode (`FishCodec.decode`);
the codes come from `FishSpeechEngine.batch_codes`, the audio is the request's.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from koe.engines.base import SynthesisRequest, VoiceReference
from koe.engines.benchmark import KoeWorker as Base
from koe_fish_speech import generate
from koe_fish_speech.bench import cases
from koe_fish_speech.voice import FishSpeechVoice


class KoeWorker(Base):
    """Fish Speech S2 through koe's engine contract, at the precision asked (`Base.load`)."""

    def case(self, cmd: dict) -> dict:
        text, references, frames, seed = cases.request(cmd)
        eng = self.engine
        steps: list[tuple[int, float]] = []  # (positions read, seconds) per step
        batches: list[list[list[int]]] = []
        step, decode, batch_codes = generate._Decoder.step, eng.codec.decode, eng.batch_codes
        timed_decode = self.wire.SpanTimer(decode)

        def timed_step(decoder, columns, start):
            t = time.perf_counter()
            try:
                return step(decoder, columns, start)
            finally:
                steps.append((columns.shape[-1], time.perf_counter() - t))

        def tapped_batch_codes(*args, **kwargs):
            for codes in batch_codes(*args, **kwargs):
                batches.append(codes.tolist())
                yield codes

        generate._Decoder.step, eng.codec.decode, eng.batch_codes = timed_step, timed_decode, tapped_batch_codes
        try:
            t = time.perf_counter()
            voices = [eng.prepare_voice(VoiceReference(path, transcript)) for path, transcript in references]
            reference_s = time.perf_counter() - t if references else 0.0
            voice = FishSpeechVoice.joined(*voices) if voices else None
            chunks = list(eng.synthesize(SynthesisRequest(text, voice=voice, seed=seed, options={"max_new_tokens": frames})))
            total_s = time.perf_counter() - t
        finally:
            generate._Decoder.step = step
            del eng.codec.decode, eng.batch_codes
        wave = np.concatenate([np.asarray(c.samples, dtype=np.float32) for c in chunks])
        parts = {
            "reference_s": reference_s,
            "prefill_s": sum(s for n, s in steps if n > 1),
            "steps_s": sum(s for n, s in steps if n == 1),
            "codec_s": timed_decode.total(),
        }
        references_codes = [c.codes.tolist() for v in voices for c in v.clips]
        return cases.result(self.wire, total_s, wave, parts, sum(1 for n, _ in steps if n == 1), batches, references_codes, threads=torch.get_num_threads())
