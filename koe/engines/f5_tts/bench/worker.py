"""The koe side of F5-TTS's benchmark (`koe.bench.wire`'s protocol), through koe's public API.

`koe.load`, `prepare_voice`, `generate(seed=N, nfe_step=...)`; the split text / DiT / vocoder comes
from the result's `metadata["timings"]`, the DiT step count and time from a wrapper around the DiT's
`forward`. Run by `python -m koe.bench.koe_worker f5_tts`.
"""

from __future__ import annotations

import time

import torch

from koe.engines.f5_tts.bench import cases


class F5KoeWorker:
    """F5-TTS through koe's public API, on the reference WAV and texts of `cases.CASES`; `wire` is
    `koe.bench.wire` (handed in by `koe.bench.koe_worker`)."""

    def __init__(self, wire) -> None:
        self.wire = wire
        self.engine = None

    def load(self, cmd: dict) -> dict:
        self.wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        import koe
        from koe.engines.f5_tts import engine as _  # noqa: F401  (imports apart from the load)

        imported = time.perf_counter()
        self.engine = koe.load(cmd["model"], device="cpu", precision=cmd.get("precision") or "fp32")
        load_s = time.perf_counter() - imported
        return {
            "load_s": load_s,
            "import_s": imported - started,
            "peak_rss": self.wire.peak_rss(),
            "rss": self.wire.current_rss(),
            "precision": self.engine.precision,
        }

    def run(self, cmd: dict) -> dict:
        text, nfe = cases.request(cmd)
        return self.wire.run_case(cmd, lambda: self._run(cmd["reference"], text, nfe, int(cmd.get("seed", 0))))

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
            result = eng.generate(text, voice=voice, seed=seed, nfe_step=nfe)
            total_s = time.perf_counter() - t
            faults = self.wire.minor_faults() - faults
        finally:
            del dit.forward
        timings = result.metadata["timings"]
        return cases.result(
            self.wire,
            total_s,
            prompt_s,
            result.audio,
            timings["text_s"],
            timings["dit_s"],
            timings["vocoder_s"],
            steps,
            nfe=nfe,
            batches=result.metadata["segments"][0]["batches"],
            threads=torch.get_num_threads(),
            minor_faults=faults,
        )
