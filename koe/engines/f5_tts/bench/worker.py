"""The koe side of F5-TTS's benchmark (`koe.bench.wire`'s protocol), through the engine contract.

The engine (`koe.engines.benchmark.KoeWorker.load`), `prepare_voice`, then the request through
`synthesize` (`seed=N`, `nfe_step`), collected: what the native `generate` does. The split text /
DiT / vocoder comes from the result's `metadata["timings"]`, the DiT step count and time from a
wrapper around the DiT's `forward`. Run by `python -m koe.bench.koe_worker f5_tts`.
"""

from __future__ import annotations

import time

import torch

from koe.engines.base import SynthesisRequest, collect
from koe.engines.benchmark import KoeWorker as Base
from koe.engines.f5_tts.bench import cases


class KoeWorker(Base):
    """F5-TTS through koe's engine, on the reference WAV and texts of `cases.CASES`."""

    def case(self, cmd: dict) -> dict:
        text, nfe = cases.request(cmd)
        return self._run(cmd["reference"], text, nfe, int(cmd.get("seed", 0)))

    def _run(self, reference: str, text: str, nfe: int, seed: int) -> dict:
        eng = self.engine
        dit = eng.model.transformer
        steps = self.wire.CallTimer(dit.forward, shape=lambda x, *args, **kwargs: int(x.shape[1]))
        dit.forward = steps
        try:
            t = time.perf_counter()
            voice = eng.prepare_voice(reference, ref_text=self.wire.REF_TEXT)
            prompt_s = time.perf_counter() - t
            faults = self.wire.minor_faults()
            t = time.perf_counter()
            result = collect(eng.synthesize(SynthesisRequest(text=text, voice=voice, seed=seed, options={"nfe_step": nfe})))
            total_s = time.perf_counter() - t
            faults = self.wire.minor_faults() - faults
        finally:
            del dit.forward
        timings = result.metadata["timings"]
        return cases.result(
            self.wire,
            total_s,
            prompt_s,
            result.samples,
            timings["text_s"],
            timings["dit_s"],
            timings["vocoder_s"],
            steps,
            nfe=nfe,
            batches=result.metadata["segments"][0]["batches"],
            threads=torch.get_num_threads(),
            minor_faults=faults,
        )
