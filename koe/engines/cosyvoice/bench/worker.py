"""The koe side of CosyVoice's benchmark (`koe.bench.wire`'s protocol). Run by `python -m koe.bench.koe_worker cosyvoice`.

It drives the registered engine through koe's engine contract (`load_engine` at the precision asked,
`prepare_voice` with the prompt clip and its transcript, `synthesize` with `seed`, whole or
streamed), as a user's request runs: one upstream `inference_zero_shot` call. Phases are timed by
wrapping the engine's `CosyVoiceModel`'s own methods (`wire.SpanTimer`); the LM's time is the time
spent inside its token generator.

A run command may carry `embedding` (upstream's CAM++ vector of the same clip, from onnxruntime):
koe still computes its own (timed), then uses upstream's, so the flow sees the same bits on both
sides (the two CAM++ differ by float rounding: the waveforms would differ in their last bits).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from koe.engines.base import SynthesisRequest, VoiceReference
from koe.engines.benchmark import KoeWorker as Base
from koe.engines.cosyvoice.bench import cases


class _TimedTokens:
    """A token generator whose `next` calls are timed (the LM's decode, as the consumer pulls it)."""

    def __init__(self, made) -> None:
        self.made, self.seconds, self.count = made, 0.0, 0

    def __iter__(self):
        return self

    def __next__(self) -> int:
        t = time.perf_counter()
        try:
            token = next(self.made)
        finally:
            self.seconds += time.perf_counter() - t
        self.count += 1
        return token

    def close(self) -> None:
        self.made.close()


class KoeWorker(Base):
    """CosyVoice through koe's engine contract, the precision asked the LM's (`Base.load`)."""

    def case(self, cmd: dict) -> dict:
        variant, stream, reference, seed = cases.request(cmd)
        eng = self.engine
        model = eng.model
        inputs, flow, hift = model.inputs, model.token2wav.flow, model.token2wav.hift
        wire = self.wire
        timers = {
            "campplus_s": wire.SpanTimer(inputs.embedding),
            "tokenizer_s": wire.SpanTimer(inputs.speech_token),
            "mel_s": wire.SpanTimer(inputs.speech_feat),
            "flow_s": wire.SpanTimer(flow.inference),
            "vocoder_s": wire.SpanTimer(hift.inference),
        }
        step = wire.SpanTimer(model.lm.step, lambda x, cache: x.shape[1])  # the LM's steps, by the positions each reads
        text_timers = [wire.SpanTimer(model.text.normalize), wire.SpanTimer(inputs.text_token)]
        upstream_embedding = cmd.get("embedding")
        embed = timers["campplus_s"]
        if upstream_embedding is not None:
            given = torch.tensor([upstream_embedding], dtype=torch.float32)

            def embed(samples, rate):  # koe's CAM++ runs (and is timed); upstream's vector is used
                timers["campplus_s"](samples, rate)
                return given

        generators: list[_TimedTokens] = []
        tokens = model.tokens

        def timed_tokens(*args, **kwargs):
            generators.append(_TimedTokens(tokens(*args, **kwargs)))
            return generators[-1]

        inputs.embedding, inputs.speech_token, inputs.speech_feat = embed, timers["tokenizer_s"], timers["mel_s"]
        flow.inference, hift.inference = timers["flow_s"], timers["vocoder_s"]
        model.text.normalize, inputs.text_token = text_timers
        model.tokens, model.lm.step = timed_tokens, step
        chunks, first = [], None
        try:
            t = time.perf_counter()
            voice = eng.prepare_voice(VoiceReference(reference, cases.prompt_text(variant)))
            for chunk in eng.synthesize(SynthesisRequest(cases.TEXT, voice=voice, seed=seed, stream=stream)):
                if first is None and len(chunk.samples):
                    first = time.perf_counter() - t
                chunks.append(np.asarray(chunk.samples, dtype=np.float32))
            total_s = time.perf_counter() - t
        finally:
            del inputs.embedding, inputs.speech_token, inputs.speech_feat, flow.inference, hift.inference
            del model.text.normalize, inputs.text_token, model.tokens, model.lm.step
        parts = {key: timer.total() for key, timer in timers.items()}
        parts["text_s"] = sum(timer.total() for timer in text_timers)
        parts["lm_s"] = sum(g.seconds for g in generators)
        return cases.result(
            wire,
            total_s,
            np.concatenate(chunks),
            first if stream else None,
            parts,
            sum(g.count for g in generators),
            step.total(lambda positions: positions > 1),
            stream,
            chunks=sum(1 for c in chunks if len(c)),
            flow_calls=len(timers["flow_s"].calls),
            threads=torch.get_num_threads(),
        )
