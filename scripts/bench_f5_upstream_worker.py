"""The upstream side of `koe bench --family f5_tts`: f5-tts 1.1.22 in its own virtualenv and process.

Started by `koe.bench.runner` with the F5 oracle's Python (`KOE_ORACLE_F5_PYTHON` or
`.oracle-f5/bin/python`, made by `make oracle-f5`) as a script. It lives outside the `koe` package
because it imports f5-tts, which koe never does; it imports `koe/bench/wire.py` and `koe/engines/f5_tts/bench/cases.py` by path (`bench_side.py`; stdlib,
numpy and torch only) and `tests/oracle_f5/common.py`, nothing else of koe.

It drives upstream's public inference path, as `F5TTS.infer(seed=N)` does:
`load_model(DiT, arch, ckpt, "vocos", vocab, "euler", True, "cpu")` and
`load_vocoder("vocos", True, folder/"vocos", "cpu")` once; per request
`preprocess_ref_audio_text` (its per-file cache cleared, so every request pays for it, as koe's
`prepare_voice` does), `seed_everything(seed)`, `infer_process(...)`. Phases are timed by wrapping
upstream's own functions: `convert_char_to_pinyin` (text), `CFM.sample` less its reference mel
(DiT), the DiT's `forward` (steps), `Vocos.decode` (vocoder).

Two substitutions, both leaving upstream's numbers as they are: `torchaudio.load` reads WAV through
soundfile (`common.use_soundfile_loader`: torchaudio's torchcodec backend cannot load here), and
upstream's `ThreadPoolExecutor` over text batches is replaced by an inline executor: batches run
one after the other in order, like the one-worker pool of the parity tests (`common.one_worker_pool`),
but in the calling thread, so the thread count set here and cProfile see the work.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future
from pathlib import Path

import torch
from bench_side import family_cases, on_path, serve, wire

# wandb, datasets, cached_path (imported by f5_tts, unused here), common.py, and oracle_io.py, which common.py imports
on_path("tests/oracle_f5/stubs", "tests/oracle_f5", "tests/oracle_shared")
cases = family_cases("f5_tts")


class InlineExecutor:
    """`ThreadPoolExecutor`'s interface, running each task at `submit`, in order, in this thread."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def submit(self, fn, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # raised again by future.result(), where upstream reads it
            future.set_exception(e)
        return future


def quiet(*args, **kwargs) -> None:
    return None


class F5UpstreamWorker:
    def __init__(self) -> None:
        self.model = self.vocoder = None

    def load(self, cmd: dict) -> dict:
        import warnings

        warnings.filterwarnings("ignore")
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        import yaml
        from common import use_soundfile_loader
        from f5_tts.infer import utils_infer
        from f5_tts.model import DiT

        use_soundfile_loader()
        utils_infer.ThreadPoolExecutor = InlineExecutor
        imported = time.perf_counter()
        folder = Path(cmd["model"])
        arch = yaml.safe_load((folder / "config.yaml").read_text())["model"]["arch"]
        ckpt = next(p for p in sorted(folder.iterdir()) if p.name.startswith("model_"))
        self.model = utils_infer.load_model(DiT, arch, str(ckpt), "vocos", str(folder / "vocab.txt"), "euler", True, "cpu")
        self.vocoder = utils_infer.load_vocoder("vocos", True, str(folder / "vocos"), "cpu")
        load_s = time.perf_counter() - imported
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": "float32"}

    def run(self, cmd: dict) -> dict:
        text, nfe = cases.request(cmd)
        return wire.run_case(cmd, lambda: self._run(cmd["reference"], text, nfe, int(cmd.get("seed", 0))))

    def _run(self, reference: str, text: str, nfe: int, seed: int) -> dict:
        from f5_tts.infer import utils_infer
        from f5_tts.model.utils import seed_everything

        model, vocoder = self.model, self.vocoder
        utils_infer._ref_audio_cache.clear()  # upstream caches the processed clip by file hash: measure it every request
        pinyin = wire.CallTimer(utils_infer.convert_char_to_pinyin)
        sample = wire.CallTimer(model.sample)
        ref_mel = wire.CallTimer(model.mel_spec.forward)
        steps = wire.CallTimer(model.transformer.forward, shape=lambda *args, **kwargs: int(kwargs["x"].shape[1]))
        decode = wire.CallTimer(vocoder.decode)
        utils_infer.convert_char_to_pinyin = pinyin
        model.sample, model.mel_spec.forward, model.transformer.forward, vocoder.decode = sample, ref_mel, steps, decode
        ref_file = None
        try:
            t = time.perf_counter()
            ref_file, ref_text = utils_infer.preprocess_ref_audio_text(reference, wire.REF_TEXT, show_info=quiet)
            prompt_s = time.perf_counter() - t
            seed_everything(seed)
            faults = wire.minor_faults()
            t = time.perf_counter()
            wav, sr, _ = utils_infer.infer_process(ref_file, ref_text, text, model, vocoder, show_info=quiet, progress=None, nfe_step=nfe)
            total_s = time.perf_counter() - t
            faults = wire.minor_faults() - faults
        finally:
            utils_infer.convert_char_to_pinyin = pinyin.fn
            del model.sample, model.mel_spec.forward, model.transformer.forward, vocoder.decode
            if ref_file:
                Path(ref_file).unlink(missing_ok=True)
        assert sr == cases.SAMPLE_RATE
        return cases.result(
            wire,
            total_s,
            prompt_s,
            wav,
            pinyin.seconds,
            sample.seconds - ref_mel.seconds,
            decode.seconds,
            steps,
            nfe=nfe,
            batches=pinyin.calls,
            ref_mel_s=ref_mel.seconds,
            threads=torch.get_num_threads(),
            dtype=str(wav.dtype),
            minor_faults=faults,
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    serve(F5UpstreamWorker())
