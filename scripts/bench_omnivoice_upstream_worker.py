"""The upstream side of `koe bench --family omnivoice`: omnivoice 0.2.1 in its own virtualenv and process.

Started by `koe.bench.runner` with the OmniVoice oracle's Python (`KOE_ORACLE_OMNIVOICE_PYTHON` or
`.oracle-omnivoice/bin/python`, made by `make oracle-omnivoice`) as a script. It lives outside the
`koe` package because it imports omnivoice, which koe never does; it imports `koe/bench/wire.py`
and `koe/engines/omnivoice/bench/cases.py` by path (`bench_side.py`), nothing else of koe.

It drives upstream's public inference path: `OmniVoice.from_pretrained(folder, dtype=float32,
device_map="cpu")` once (`dtype=bfloat16` with precision bf16, upstream's own bf16 run); per request `torch.manual_seed(seed)` and `generate(text, ref_audio=...,
ref_text=..., num_step=...)` (the clone's prompt made inside the call, as koe's request makes it).
Phases are timed by wrapping upstream's own methods: `_prepare_inference_inputs` (the text and
prompt ids), the LM's `forward` (one per step), `audio_tokenizer.decode`, and
`create_voice_clone_prompt`.
"""

from __future__ import annotations

import os
import time

import torch
from bench_side import family_cases, serve, wire

cases = family_cases("omnivoice")


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class OmniVoiceUpstreamWorker:
    def __init__(self) -> None:
        self.model = None

    def load(self, cmd: dict) -> dict:
        import warnings

        warnings.filterwarnings("ignore")
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        from omnivoice import OmniVoice

        imported = time.perf_counter()
        precision = cmd.get("precision") or "fp32"
        if precision not in DTYPES:
            raise ValueError(f"upstream OmniVoice on the CPU runs fp32 or bf16 (from_pretrained's dtype), not {precision!r}")
        self.model = OmniVoice.from_pretrained(cmd["model"], dtype=DTYPES[precision], device_map="cpu")
        load_s = time.perf_counter() - imported
        dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": dtype}

    def run(self, cmd: dict) -> dict:
        mode, steps, reference, seed = cases.request(cmd)
        return wire.run_case(cmd, lambda: self._run(mode, steps, reference, seed))

    def _run(self, mode: str, steps: int, reference: str, seed: int) -> dict:
        model = self.model
        names = [n for n in ("_prepare_inference_inputs",) if hasattr(model, n)]
        text = {n: wire.CallTimer(getattr(model, n)) for n in names}
        forward = wire.CallTimer(model.forward)
        decode = wire.CallTimer(model.audio_tokenizer.decode)
        prompt = wire.CallTimer(model.create_voice_clone_prompt)
        for n, timer in text.items():
            setattr(model, n, timer)
        model.forward, model.audio_tokenizer.decode, model.create_voice_clone_prompt = forward, decode, prompt
        try:
            kwargs = {"ref_audio": reference, "ref_text": cases.REF_TEXT} if mode == "clone" else {}
            torch.manual_seed(seed)
            t = time.perf_counter()
            (wav,) = model.generate(cases.TEXT, num_step=steps, **kwargs)
            total_s = time.perf_counter() - t
        finally:
            for n in text:
                delattr(model, n)
            del model.forward, model.audio_tokenizer.decode, model.create_voice_clone_prompt
        return cases.result(
            wire,
            total_s,
            wav,
            prompt.seconds,
            sum(t.seconds for t in text.values()),
            forward.seconds,
            forward.calls,
            decode.seconds,
            mode=mode,
            num_step=steps,
            threads=torch.get_num_threads(),
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    serve(OmniVoiceUpstreamWorker())
