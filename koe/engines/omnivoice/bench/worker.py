"""The koe side of OmniVoice's benchmark (`koe.bench.wire`'s protocol). Run by `python -m koe.bench.koe_worker omnivoice`."""

from __future__ import annotations

import time

import torch

from koe.engines.base import SynthesisRequest, VoiceReference, collect
from koe.engines.benchmark import KoeWorker as Base
from koe.engines.omnivoice.bench import cases


class KoeWorker(Base):
    """OmniVoice through koe's engine contract (`prepare_voice`, `synthesize` with `seed`), the
    parts timed by wrapping the model's methods: the prompt ids (text), the LM's forward (one per
    step), the tokenizer's decode."""

    def case(self, cmd: dict) -> dict:
        mode, steps, reference, seed = cases.request(cmd)
        eng = self.engine
        model = eng.model
        text = self.wire.SpanTimer(model.items)
        backbone = self.wire.SpanTimer(model.lm.forward)
        decode = self.wire.SpanTimer(model.decode)
        model.items, model.lm.forward, model.decode = text, backbone, decode
        try:
            t = time.perf_counter()
            voice = eng.prepare_voice(VoiceReference(reference, cases.REF_TEXT)) if mode == "clone" else None
            prompt_s = time.perf_counter() - t
            out = collect(eng.synthesize(SynthesisRequest(cases.TEXT, voice=voice, seed=seed, options={"num_step": steps})))
            total_s = time.perf_counter() - t
        finally:
            del model.items, model.lm.forward, model.decode
        return cases.result(
            self.wire,
            total_s,
            out.samples,
            prompt_s,
            text.total(),
            backbone.total(),
            backbone.count(),
            decode.total(),
            mode=mode,
            num_step=steps,
            threads=torch.get_num_threads(),
        )
