"""The upstream side of `koe bench --family fish_speech`: Fish Speech S2 from upstream's source
(fish-speech@3dd1f85) in the oracle's virtualenv and its own process.

Started by `koe.bench.runner` with the Fish Speech oracle's Python (`KOE_ORACLE_FISH_SPEECH_PYTHON`
or `.oracle-fish_speech/bin/python`) as a script (`koe_fish_speech.bench`'s `Side`). It imports
upstream's `fish_speech`, which koe never does, `scripts/bench_side.py` (and through it
`koe/bench/wire.py`) and `koe_fish_speech/bench/cases.py`, by path; nothing else of koe.

It runs upstream as its server engine does: `TTSInferenceEngine(llama_queue, decoder_model,
precision, compile=False)` with the transformer of `init_model(folder, "cpu", precision)` (its
caches set up for the whole context, as `launch_thread_safe_queue`'s worker does) and the codec of
`load_codec_model(folder/codec.pth, "cpu", precision)` (a tiny folder's `sizes.json` set on the
packaged YAML by `golden_codec.load_codec`, as the goldens do), in float32 (or bfloat16 when asked).
The LM's requests run in turn in the caller's thread (`InTurn`, as the `infer` golden: upstream's
worker thread would generate batch i + 1 while the engine decodes batch i, giving a dialogue other
codes from run to run). Per request: `inference(ServeTTSRequest(text, references=[ServeReferenceAudio(
wav bytes, transcript)...], seed, max_new_tokens=frames))`. Parts are timed by wrapping upstream's
own callables: `encode_reference` (the clip read, mono, resampled, `DAC.encode`), the module's
`decode_one_token_ar` as `generate` calls it for a batch's prompt (the prefill), the
`decode_one_token` `init_model` returned as `decode_n_tokens` calls it per frame (the steps) and
`get_audio_segment` (the codec's decode; its codes are the batches'). `use_memory_cache` is off
(upstream's default): each request encodes its clips, as koe's does.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
ROOT = Path(__file__).resolve().parents[2]  # the source checkout
sys.path.insert(0, str(ROOT / "scripts"))

import bench_side  # noqa: E402

wire = bench_side.wire
cases = bench_side.by_path("bench_cases", ROOT / "families" / "fish_speech" / "koe_fish_speech" / "bench" / "cases.py")
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


class Steps:
    """A decode function, timed per call: (positions read, seconds)."""

    def __init__(self, fn) -> None:
        self.fn, self.calls = fn, []

    def __call__(self, model, x, *args, **kwargs):
        t = time.perf_counter()
        try:
            return self.fn(model, x, *args, **kwargs)
        finally:
            self.calls.append((x.shape[-1], time.perf_counter() - t))


class InTurn:
    """What `launch_thread_safe_queue`'s worker does with a request (`generate_long` on the model
    `init_model` built, its caches set up), run in the caller's thread to the end."""

    def __init__(self, folder: Path, dtype) -> None:
        import torch
        from fish_speech.models.text2semantic.inference import init_model

        self.model, self.decode_one_token = init_model(str(folder), "cpu", dtype, compile=False)
        with torch.device("cpu"):
            self.model.setup_caches(max_batch_size=1, max_seq_len=self.model.config.max_seq_len, dtype=next(self.model.parameters()).dtype)
        self.steps: Steps | None = None

    def put(self, item) -> None:
        from fish_speech.models.text2semantic.inference import WrappedGenerateResponse, generate_long

        decode = self.steps or self.decode_one_token
        for chunk in generate_long(model=self.model, decode_one_token=decode, **item.request):
            item.response_queue.put(WrappedGenerateResponse(status="success", response=chunk))


class FishSpeechUpstreamWorker:
    def __init__(self) -> None:
        self.engine = self.lm = None

    def load(self, cmd: dict) -> dict:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        import torch
        from fish_speech.inference_engine import TTSInferenceEngine
        from fish_speech.models.text2semantic import inference
        from loguru import logger

        logger.remove()  # upstream logs every request at INFO
        imported = time.perf_counter()
        precision = cmd.get("precision") or "fp32"
        if precision not in DTYPES:
            raise ValueError(f"upstream Fish Speech runs on the CPU in fp32 or bf16, not {precision!r}")
        dtype = getattr(torch, DTYPES[precision])
        folder = Path(cmd["model"])
        self.lm = InTurn(folder, dtype)
        if (folder / "sizes.json").exists():
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from golden_codec import load_codec

            codec = load_codec(folder, dtype)
        else:
            codec = inference.load_codec_model(folder / "codec.pth", "cpu", dtype)
        self.engine = TTSInferenceEngine(llama_queue=self.lm, decoder_model=codec, precision=dtype, compile=False)
        load_s = time.perf_counter() - imported
        dtype_name = str(next(self.lm.model.parameters()).dtype).removeprefix("torch.")
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": dtype_name}

    def run(self, cmd: dict) -> dict:
        return wire.run_case(cmd, lambda: self._run(*cases.request(cmd)))

    def _run(self, text: str, references: list[tuple[str, str]], frames: int, seed: int) -> dict:
        import numpy as np
        import torch
        from fish_speech.models.text2semantic import inference
        from fish_speech.utils.schema import ServeReferenceAudio, ServeTTSRequest

        engine = self.engine
        encoded, batches = [], []
        encode, segment = engine.encode_reference, engine.get_audio_segment
        timed_encode, timed_segment = wire.SpanTimer(encode), wire.SpanTimer(segment)
        prefill = Steps(inference.decode_one_token_ar)  # `generate` calls the module's function for the prompt
        self.lm.steps = Steps(self.lm.decode_one_token)  # `decode_n_tokens` calls the one it is given per frame

        def encoded_reference(**kwargs):
            codes = timed_encode(**kwargs)
            encoded.append(codes.tolist())
            return codes

        def decoded(result):
            batches.append(result.codes.tolist())
            return timed_segment(result)

        engine.encode_reference, engine.get_audio_segment = encoded_reference, decoded
        inference.decode_one_token_ar = prefill
        try:
            refs = [ServeReferenceAudio(audio=Path(path).read_bytes(), text=transcript) for path, transcript in references]
            request = ServeTTSRequest(text=text, references=refs, seed=seed, max_new_tokens=frames)
            t = time.perf_counter()
            results = list(engine.inference(request))
            total_s = time.perf_counter() - t
        finally:
            inference.decode_one_token_ar = prefill.fn
            del engine.encode_reference, engine.get_audio_segment
            steps, self.lm.steps = self.lm.steps, None
        final = [r for r in results if r.code == "final"]
        if len(final) != 1:
            raise RuntimeError(f"upstream gave no audio: {[(r.code, r.error) for r in results]}")
        wave = np.asarray(final[0].audio[1], dtype=np.float32)
        parts = {
            "reference_s": timed_encode.total(),
            "prefill_s": sum(s for _, s in prefill.calls),
            "steps_s": sum(s for _, s in steps.calls),
            "codec_s": timed_segment.total(),
        }
        return cases.result(wire, total_s, wave, parts, len(steps.calls), batches, encoded, threads=torch.get_num_threads())


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    worker = FishSpeechUpstreamWorker()
    bench_side.serve(worker)
