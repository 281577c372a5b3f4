"""The koe side of GPT-SoVITS's benchmark (`koe.bench.wire`'s protocol). Run by `python -m koe.bench.koe_worker gpt_sovits`.

It drives the registered engine through koe's engine contract, as a user's request runs: the voice
prepared from the reference clip and its transcript (`prepare_voice`), then `synthesize` with the
case's text, language and seed, whole (one upstream `TTS.run` call on a reference it has not seen).
Phases are timed by wrapping the engine's own parts for the run (`wire.SpanTimer`): the voice's
preparation (reference_s), each batch's AR decode (`synthesis._semantic`: ar_s, and the tokens it
keeps) and each batch's audio (`synthesis._audio`, SoVITS's decode; v4: the CFM and its vocoder:
sovits_s). The runaway guard is lifted (`max_segment_s`): random
weights may speak far longer than the text asks, and a cut would make koe's audio differ.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from koe.engines.base import SynthesisRequest, VoiceReference
from koe.engines.benchmark import KoeWorker as Base
from koe.engines.gpt_sovits import synthesis
from koe.engines.gpt_sovits.bench import cases

LONGEST_S = 3600.0  # the runaway guard's cap, lifted


class KoeWorker(Base):
    """GPT-SoVITS through koe's engine contract, at the precision the bench asks (float32: upstream's bits)."""

    def case(self, cmd: dict) -> dict:
        variant, inputs = cases.inputs(cmd)
        eng, wire = self.engine, self.wire
        semantic, audio = wire.SpanTimer(synthesis._semantic), wire.SpanTimer(synthesis._audio)
        tokens: list[int] = []

        def counted(*args, **kwargs):
            rows = semantic(*args, **kwargs)
            tokens.append(sum(int(r.shape[0]) for r in rows))
            return rows

        synthesis._semantic, synthesis._audio = counted, audio
        try:
            t = time.perf_counter()
            voice = eng.prepare_voice(VoiceReference(inputs["ref_audio_path"], inputs["prompt_text"]), prompt_lang=inputs["prompt_lang"])
            reference_s = time.perf_counter() - t
            options = {"sample_steps": inputs["sample_steps"]} if "sample_steps" in inputs else {}
            request = SynthesisRequest(inputs["text"], language=inputs["text_lang"], voice=voice, seed=inputs["seed"], max_segment_s=LONGEST_S, options=options)
            chunks = [np.asarray(c.samples, dtype=np.float32) for c in eng.synthesize(request)]
            total_s = time.perf_counter() - t
        finally:
            synthesis._semantic, synthesis._audio = semantic.fn, audio.fn
        samples = np.concatenate(chunks)
        assert eng.sample_rate == cases.SAMPLE_RATES[variant], (eng.sample_rate, variant)
        parts = {"reference_s": reference_s, "ar_s": semantic.total(), "sovits_s": audio.total()}
        return cases.result(
            wire, eng.sample_rate, total_s, samples, synthesis.to_int16(samples), parts, sum(tokens), batches=len(tokens), threads=torch.get_num_threads()
        )
