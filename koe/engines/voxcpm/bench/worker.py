"""The koe side of VoxCPM's benchmark (`koe.bench.wire`'s protocol). Run by `python -m koe.bench.koe_worker voxcpm`."""

from __future__ import annotations

import time

import numpy as np
import torch

from koe.engines.benchmark import KoeWorker as Base
from koe.engines.voxcpm.bench import cases


class KoeWorker(Base):
    """VoxCPM through koe's engine (`make_voice`, and the engine's own one-shot and streaming paths,
    `generate.one_shot` / `generate.stream`, which `speak_segment` runs), with min_len = max_len =
    `patches` and no retries; parts timed by wrapping the model's methods."""

    def case(self, cmd: dict) -> dict:
        return self._run(*cases.request(cmd))

    def _run(self, mode: str, text: str, reference: str, patches: int, timesteps: int, seed: int) -> dict:
        from koe.engines.voxcpm import generate as core
        from koe.engines.voxcpm import model as model_mod

        eng = self.engine
        m, vae = eng.model, eng.vae
        settings = eng.settings({"min_len": patches, "max_len": patches, "retry_badcase": False, "inference_timesteps": timesteps})
        one_token = lambda x, *a, **k: int(x.shape[1])  # noqa: E731  (the LocEnc's patches per call: 1 in the loop)
        timers = {
            "prefill": self.wire.SpanTimer(m.prefill),
            "base": self.wire.SpanTimer(m.base_lm.step),
            "residual": self.wire.SpanTimer(m.residual_lm.step),
            "locenc": self.wire.SpanTimer(m.feat_encoder.forward, one_token),
            "vae": self.wire.SpanTimer(vae.decode),
        }
        dit = self.wire.SpanTimer(model_mod.sample_patch)
        stream_decoder = vae.stream_decoder

        def timed_stream_decoder(*args, **kwargs):
            dec = stream_decoder(*args, **kwargs)
            dec.decode = self.wire.SpanTimer(dec.decode)
            timers.setdefault("stream_dec", []).append(dec.decode)
            return dec

        m.prefill, m.base_lm.step, m.residual_lm.step, m.feat_encoder.forward = timers["prefill"], timers["base"], timers["residual"], timers["locenc"]
        vae.decode, vae.stream_decoder, model_mod.sample_patch = timers["vae"], timed_stream_decoder, dit
        first = None
        prompt_s = 0.0
        try:
            t = time.perf_counter()
            voice = None
            if mode == "clone":
                voice = eng.make_voice(reference, cases.REF_TEXT)
                eng.features(voice)  # the prompt's VAE encode (upstream's build_prompt_cache), inside the request on both sides
                prompt_s = time.perf_counter() - t
            seq = eng.sequence(text, voice)
            generator = torch.Generator(device=eng.device).manual_seed(seed)
            if mode == "stream":
                chunks = []
                for c in core.stream(m, vae, seq, settings, generator=generator):
                    if first is None and len(c):
                        first = time.perf_counter() - t
                    chunks.append(c)
                samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
                made = len(chunks)
            else:
                out = core.one_shot(m, vae, seq, settings, generator=generator)
                samples, made = out.samples, out.patches
            total_s = time.perf_counter() - t
        finally:
            del m.prefill, m.base_lm.step, m.residual_lm.step, m.feat_encoder.forward, vae.decode, vae.stream_decoder
            model_mod.sample_patch = dit.fn
        vae_s = timers["vae"].total() + sum(d.total() for d in timers.get("stream_dec", []))
        return cases.result(
            self.wire,
            total_s,
            samples,
            eng.sample_rate,
            made,
            timers["prefill"].total(),
            timers["base"].total(),
            timers["residual"].total(),
            dit.total(),
            timers["locenc"].total(lambda n: n == 1),
            vae_s,
            prompt_s=prompt_s,
            first_chunk_s=first,
            mode=mode,
            seq_len=int(seq.length),
            threads=torch.get_num_threads(),
            dit_calls=dit.count(),
            base_calls=timers["base"].count(),
        )
