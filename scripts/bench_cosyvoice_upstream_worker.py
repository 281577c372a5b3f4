"""The upstream side of `koe bench --family cosyvoice`: CosyVoice's source (ace7c47) in its own virtualenv and process.

Started by `koe.bench.runner` with the CosyVoice oracle's Python (`KOE_ORACLE_COSYVOICE_PYTHON` or
`.oracle-cosyvoice/bin/python`, made by `make oracle-cosyvoice`) as a script. It lives outside the
`koe` package because it imports upstream's `cosyvoice`, which koe never does; it imports
`koe/bench/wire.py` and `koe/engines/cosyvoice/bench/cases.py` by path (`bench_side.py`), nothing
else of koe, and the oracle's stand-ins (`tests/oracle_cosyvoice/stubs`: torchcodec for
`torchaudio.load`).

It drives upstream's public inference path: `AutoModel(model_dir=folder)` once (CosyVoice2 or
CosyVoice3 by the folder's yaml; float32 on the CPU, upstream's only precision there); per request
the model's stream hop reset to 25 (upstream keeps the hop a stream grew to for the next request),
`torch.manual_seed(seed)` and `inference_zero_shot(text, prompt_text, prompt_wav, stream=...)`, its
chunks joined. Phases are timed by wrapping upstream's own methods: the front end's
`text_normalize` and `_extract_text_token`, `_extract_spk_embedding` (CAM++ in onnxruntime),
`_extract_speech_token` (the S3 tokenizer in onnxruntime), `_extract_speech_feat` (the mel), the
model's `llm_job` (the LM's decode, in upstream's own thread; streamed, it overlaps the rest),
`flow.inference` and `hift.inference`, and the LM's steps (`llm.llm.forward_one_step`; those over
several positions are the prompt's prefill).

Besides `load` and `run` it answers `embedding` (the speaker vector its CAM++ gives a clip), which
the parent hands koe's side so that both flows see the same vector.
"""

from __future__ import annotations

import os
import time

import torch
from bench_side import family_cases, on_path, wire

on_path("tests/oracle_cosyvoice/stubs")  # torchcodec: soundfile-backed, for torchaudio.load (upstream's load_wav)

cases = family_cases("cosyvoice")


class CosyVoiceUpstreamWorker:
    def __init__(self) -> None:
        self.model = None

    def load(self, cmd: dict) -> dict:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        from cosyvoice.cli.cosyvoice import AutoModel

        imported = time.perf_counter()
        precision = cmd.get("precision") or "fp32"
        if precision != "fp32":
            raise ValueError(f"upstream CosyVoice on the CPU runs float32 only (its fp16 is CUDA autocast), not {precision!r}")
        self.model = AutoModel(model_dir=cmd["model"])
        load_s = time.perf_counter() - imported
        dtype = str(next(self.model.model.llm.parameters()).dtype).removeprefix("torch.")
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": dtype}

    def embedding(self, cmd: dict) -> dict:
        """Upstream's speaker vector of `cmd["reference"]` (a list of 192 floats)."""
        vector = self.model.frontend._extract_spk_embedding(cmd["reference"])
        return {"embedding": vector.flatten().tolist()}

    def run(self, cmd: dict) -> dict:
        variant, stream, reference, seed = cases.request(cmd)
        return wire.run_case(cmd, lambda: self._run(variant, stream, reference, seed))

    def _run(self, variant: str, stream: bool, reference: str, seed: int) -> dict:
        top, frontend, model = self.model, self.model.frontend, self.model.model
        names = {
            "campplus_s": (frontend, "_extract_spk_embedding"),
            "tokenizer_s": (frontend, "_extract_speech_token"),
            "mel_s": (frontend, "_extract_speech_feat"),
            "text_normalize": (frontend, "text_normalize"),
            "text_token": (frontend, "_extract_text_token"),
            "flow_s": (model.flow, "inference"),
            "vocoder_s": (model.hift, "inference"),
            "step": (model.llm.llm, "forward_one_step"),
        }
        timers = {key: wire.CallTimer(getattr(owner, name)) for key, (owner, name) in names.items()}
        timers["step"] = wire.SpanTimer(model.llm.llm.forward_one_step, lambda xs, *rest, **kw: xs.shape[1])  # by the positions each reads
        llm_job, tokens = model.llm_job, []

        def counted_job(*args):  # (text, prompt_text, prompt tokens, embedding, uuid): the tokens it queued
            llm_job(*args)
            tokens.append(len(model.tts_speech_token_dict[args[-1]]))

        lm = wire.CallTimer(counted_job)
        for key, (owner, name) in names.items():
            setattr(owner, name, timers[key])
        model.llm_job = lm
        chunks, first = [], None
        try:
            model.token_hop_len = 25  # a fresh model's hop (upstream keeps the one the last stream grew to)
            torch.manual_seed(seed)
            t = time.perf_counter()
            for out in top.inference_zero_shot(cases.TEXT, cases.prompt_text(variant), reference, stream=stream):
                speech = out["tts_speech"]
                if first is None and speech.shape[1]:
                    first = time.perf_counter() - t
                chunks.append(speech)
            total_s = time.perf_counter() - t
        finally:
            for owner, name in names.values():
                delattr(owner, name)
            del model.llm_job
        parts = {key: timers[key].seconds for key in ("campplus_s", "tokenizer_s", "mel_s", "flow_s", "vocoder_s")}
        parts["text_s"] = timers["text_normalize"].seconds + timers["text_token"].seconds
        parts["lm_s"] = lm.seconds
        samples = torch.cat(chunks, dim=1)[0].numpy()
        return cases.result(
            wire,
            total_s,
            samples,
            first if stream else None,
            parts,
            sum(tokens),
            timers["step"].total(lambda positions: positions > 1),
            stream,
            overlapped=stream,
            chunks=sum(1 for c in chunks if c.shape[1]),
            flow_calls=timers["flow_s"].calls,
            threads=torch.get_num_threads(),
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    worker = CosyVoiceUpstreamWorker()
    wire.serve({"load": worker.load, "run": worker.run, "embedding": worker.embedding})
