"""The upstream side of `koe bench --family indextts`: IndexTTS 1.5 from upstream's source
(index-tts@ee40fa7) in the oracle's virtualenv and its own process.

Started by `koe.bench.runner` with the IndexTTS oracle's Python (`KOE_ORACLE_INDEXTTS_PYTHON` or
`.oracle-indextts/bin/python`, made by `make oracle-indextts`, whose `.pth` puts upstream's source on
the path) as a script (`koe_indextts.bench`'s `Side`). It imports upstream's `indextts`, which koe
never does, `scripts/bench_side.py` (and through it `koe/bench/wire.py`) and
`koe_indextts/bench/cases.py`, by path; nothing else of koe.

It drives upstream's public inference path: `IndexTTS(cfg_path, model_dir, device="cpu")` once
(float32: upstream's only precision on the CPU; its GPT then generates without a KV cache), then per
request `torch.manual_seed(seed)` and `infer(clip, text, output_path=None, max_mel_tokens=codes)`.
Upstream keeps the last clip's mel for the next call with the same path: it is dropped before each
request, so every request computes its reference as koe's does. Parts are timed by wrapping
upstream's own methods on the instance, each part's seconds without the wrapped calls inside it:
the tokenizer's `tokenize`, `split_segments` and `convert_tokens_to_ids` (text), the reference mel
(from the call to its first `tokenize`), `gpt.get_conditioning` and BigVGAN's `speaker_encoder`
(reference; upstream runs both per segment, inside the search, the latent pass and the vocoder),
`gpt.inference_speech` (the search), `gpt.forward` (the latent pass) and `bigvgan.forward` (the
vocoder, whose float output the hashes read).

A release 2 folder (its `s2mel.pth`) is run by `bench_worker2.IndexTTS2UpstreamWorker` instead, a
release 2.5 folder (its `codec.pth`) by `bench_worker25.IndexTTS25UpstreamWorker`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the source checkout


def _by_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench_side = _by_path("bench_side", ROOT / "scripts" / "bench_side.py")
wire = bench_side.wire
cases = bench_side.by_path("bench_cases", ROOT / "families" / "indextts" / "koe_indextts" / "bench" / "cases.py")

import torch  # noqa: E402


class Parts:
    """Seconds per part of wrapped calls, each call's own: the wrapped calls inside it count for their own parts."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.stack: list[list[float]] = []  # per open call: [its start, the seconds of wrapped calls inside it]
        self.wrapped: list[tuple[object, str]] = []

    def wrap(self, owner, name: str, part, after=None, before=None) -> None:
        """`owner.name` timed into `part` (a name, or a function naming the part at each call; None:
        not timed, that call counts where it runs); `before()` called first, `after(result)` after."""
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            if before is not None:
                before()
            into = part() if callable(part) else part
            if into is None:
                result = original(*args, **kwargs)
                if after is not None:
                    after(result)
                return result
            self.stack.append([time.perf_counter(), 0.0])
            try:
                result = original(*args, **kwargs)
            finally:
                start, inner = self.stack.pop()
                spent = time.perf_counter() - start
                self.seconds[into] = self.seconds.get(into, 0.0) + spent - inner
                if self.stack:
                    self.stack[-1][1] += spent
            if after is not None:
                after(result)
            return result

        setattr(owner, name, timed)
        self.wrapped.append((owner, name))

    def unwrap(self) -> None:
        for owner, name in self.wrapped:
            delattr(owner, name)


class IndexTTSUpstreamWorker:
    def __init__(self) -> None:
        self.tts = None

    def load(self, cmd: dict) -> dict:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        from indextts.infer import IndexTTS

        imported = time.perf_counter()
        precision = cmd.get("precision") or "fp32"
        if precision != "fp32":
            raise ValueError(f"upstream IndexTTS on the CPU runs float32 only (its fp16 is for CUDA), not {precision!r}")
        folder = Path(cmd["model"])
        self.tts = IndexTTS(cfg_path=str(folder / "config.yaml"), model_dir=str(folder), device="cpu")
        load_s = time.perf_counter() - imported
        dtype = str(next(self.tts.gpt.parameters()).dtype).removeprefix("torch.")
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": dtype}

    def run(self, cmd: dict) -> dict:
        text, reference, codes, seed = cases.request(cmd)
        return wire.run_case(cmd, lambda: self._run(text, reference, codes, seed))

    def _run(self, text: str, reference: str, codes_cap: int, seed: int) -> dict:
        tts = self.tts
        parts = Parts()
        waves, made, first_text = [], [], []

        def text_begins() -> None:
            if not first_text:
                first_text.append(time.perf_counter())

        parts.wrap(tts.tokenizer, "tokenize", "text_s", before=text_begins)
        for owner, name, part, after in (
            (tts.tokenizer, "split_segments", "text_s", None),
            (tts.tokenizer, "convert_tokens_to_ids", "text_s", None),
            (tts.gpt, "get_conditioning", "reference_s", None),
            (tts.bigvgan.speaker_encoder, "forward", "reference_s", None),
            (tts.gpt, "inference_speech", "search_s", lambda codes: made.append(codes[0].tolist())),
            (tts.gpt, "forward", "latent_s", None),
            (tts.bigvgan, "forward", "vocoder_s", lambda out: waves.append(out[0].detach().clone())),
        ):
            parts.wrap(owner, name, part, after)
        try:
            tts.cache_audio_prompt = tts.cache_cond_mel = None  # the clip's mel computed in the request, as koe's is
            torch.manual_seed(seed)
            t = time.perf_counter()
            rate, _pcm = tts.infer(reference, text, output_path=None, max_mel_tokens=codes_cap)
            total_s = time.perf_counter() - t
        finally:
            parts.unwrap()
        assert rate == cases.SAMPLE_RATE
        seconds = {part: parts.seconds.get(part, 0.0) for part in cases.PARTS}
        seconds["reference_s"] += first_text[0] - t  # the clip read, resampled and its log-mel, before the text
        wave = torch.cat([w.reshape(-1) for w in waves]).numpy()
        return cases.result(wire, total_s, wave, seconds, sum(len(c) for c in made), len(made), cases.codes_sha1(made), threads=torch.get_num_threads())


class Dispatcher:
    """The worker the benchmark talks to: 1.5's, release 2.5's for a folder with `codec.pth`, or release
    2's for one with `s2mel.pth`."""

    def __init__(self) -> None:
        self.worker = None

    def load(self, cmd: dict) -> dict:
        here = Path(__file__).resolve().parent
        if (Path(cmd["model"]) / "s2mel.pth").exists():
            bench_worker2 = _by_path("bench_worker2", here / "bench_worker2.py")
            if (Path(cmd["model"]) / "codec.pth").exists():
                self.worker = _by_path("bench_worker25", here / "bench_worker25.py").IndexTTS25UpstreamWorker(wire, cases, Parts)
            else:
                self.worker = bench_worker2.IndexTTS2UpstreamWorker(wire, cases, Parts)
            import logging
            import warnings

            warnings.filterwarnings("ignore")
            logging.disable(logging.WARNING)
            wire.set_threads(cmd["threads"])
        else:
            self.worker = IndexTTSUpstreamWorker()
        return self.worker.load(cmd)

    def run(self, cmd: dict) -> dict:
        return self.worker.run(cmd)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    worker = Dispatcher()
    wire.serve({"load": worker.load, "run": worker.run})
