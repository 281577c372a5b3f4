"""The upstream side of `koe bench --family voxcpm`: voxcpm 2.0.3 in its own virtualenv and process.

Started by `koe.bench.runner` with the VoxCPM oracle's Python (`KOE_ORACLE_VOXCPM_PYTHON` or
`.oracle-voxcpm/bin/python`, made by `make oracle-voxcpm`) as a script. It lives outside the `koe`
package because it imports voxcpm, which koe never does; it imports `koe/bench/wire.py` and `koe/engines/voxcpm/bench/cases.py` by path (`bench_side.py`;
stdlib, numpy and torch only) and the oracle's `tests/oracle_voxcpm/stubs` (a soundfile-backed
torchcodec: torchaudio's own cannot load here; VoxCPM 1.x reads its prompt with `torchaudio.load`),
nothing else of koe.

Upstream is built as koe's parity tests build it: `VoxCPM(voxcpm_model_path=folder,
zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")`. Its dtype is
the config's (`VoxCPMConfig.dtype`, which upstream keeps on a CPU): the releases say bfloat16, so
for the exact float32 comparison (`precision` "fp32") the model is read from a folder beside the
original whose files are links to the original's, except a `config.json` with `"dtype":
"float32"`; with `precision` "bf16" it reads the original folder as released (bfloat16).

Per request, upstream's public call: `torch.manual_seed(seed)` then `VoxCPM.generate(...)` (or
`generate_streaming`, chunks concatenated), with `min_len = max_len = patches` and
`retry_badcase=False`, so it makes exactly `patches` patches. Parts are timed by wrapping
upstream's own modules: `base_lm.forward_step`, `residual_lm.forward_step`, `feat_decoder`
(UnifiedCFM: all CFM steps of one patch), `feat_encoder` on one patch (LocEnc; its prompt-length
call is part of the prefill), `audio_vae.decode` and the streaming decoder's `decode_chunk`
(VAE), the prefill (`base_lm` and `residual_lm` forwards on the prompt, with the prompt's LocEnc)
and `build_prompt_cache` (the clone prompt's VAE encode).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from bench_side import family_cases, on_path, serve, wire

on_path("tests/oracle_voxcpm/stubs")  # torchcodec: soundfile-backed, for VoxCPM 1.x's torchaudio.load
cases = family_cases("voxcpm")


def float32_folder(folder: Path) -> Path:
    """A sibling of `folder` whose files link to its files, but whose config.json says float32."""
    raw = json.loads((folder / "config.json").read_text())
    if raw.get("dtype") == "float32":
        return folder
    out = folder.with_name(folder.name + ".float32-config")
    out.mkdir(exist_ok=True)
    for p in folder.iterdir():
        target = out / p.name
        if p.name == "config.json" or target.exists() or target.is_symlink():
            continue
        target.symlink_to(p.resolve())
    raw["dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(raw, indent=2))
    return out


class VoxUpstreamWorker:
    def __init__(self) -> None:
        self.m = None

    def load(self, cmd: dict) -> dict:
        import warnings

        warnings.filterwarnings("ignore")
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        from voxcpm import VoxCPM

        imported = time.perf_counter()
        folder = Path(cmd["model"])
        precision = cmd.get("precision") or "fp32"
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"upstream VoxCPM on the CPU runs fp32 (a float32 config) or bf16 (the release's), not {precision!r}")
        if precision == "fp32":
            folder = float32_folder(folder)
        elif json.loads((folder / "config.json").read_text()).get("dtype") != "bfloat16":
            raise ValueError("precision bf16: the folder's config.json must say bfloat16 (as the releases do)")
        self.m = VoxCPM(voxcpm_model_path=str(folder), zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")
        load_s = time.perf_counter() - imported
        dtype = str(next(self.m.tts_model.base_lm.parameters()).dtype).removeprefix("torch.")
        return {
            "load_s": load_s,
            "import_s": imported - started,
            "peak_rss": wire.peak_rss(),
            "rss": wire.current_rss(),
            "precision": dtype,
            "config_dtype": str(self.m.tts_model.config.dtype),
        }

    def run(self, cmd: dict) -> dict:
        return wire.run_case(cmd, lambda: self._run(*cases.request(cmd)))

    def _run(self, mode: str, text: str, reference: str, patches: int, timesteps: int, seed: int) -> dict:
        tts = self.m.tts_model
        one_token = lambda x, *a, **k: int(x.shape[1])  # noqa: E731
        t = {
            "base": wire.SpanTimer(tts.base_lm.forward_step),
            "residual": wire.SpanTimer(tts.residual_lm.forward_step),
            "dit": wire.SpanTimer(tts.feat_decoder.forward),
            "locenc": wire.SpanTimer(tts.feat_encoder.forward, one_token),
            "base_pre": wire.SpanTimer(tts.base_lm.forward),
            "residual_pre": wire.SpanTimer(tts.residual_lm.forward),
            "vae": wire.SpanTimer(tts.audio_vae.decode),
            "prompt": wire.SpanTimer(tts.build_prompt_cache),
        }
        chunk_timers: list = []
        streaming_decode = getattr(tts.audio_vae, "streaming_decode", None)

        @contextlib.contextmanager
        def timed_streaming_decode(*args, **kwargs):
            with streaming_decode(*args, **kwargs) as dec:
                dec.decode_chunk = wire.SpanTimer(dec.decode_chunk)
                chunk_timers.append(dec.decode_chunk)
                yield dec

        tts.base_lm.forward_step, tts.residual_lm.forward_step = t["base"], t["residual"]
        tts.feat_decoder.forward, tts.feat_encoder.forward = t["dit"], t["locenc"]
        tts.base_lm.forward, tts.residual_lm.forward, tts.audio_vae.decode, tts.build_prompt_cache = t["base_pre"], t["residual_pre"], t["vae"], t["prompt"]
        if streaming_decode is not None:
            tts.audio_vae.streaming_decode = timed_streaming_decode
        kwargs = {"text": text, "min_len": patches, "max_len": patches, "retry_badcase": False, "inference_timesteps": timesteps}
        if mode == "clone":
            kwargs.update(prompt_wav_path=reference, prompt_text=cases.REF_TEXT)
        first = None
        try:
            torch.manual_seed(seed)
            started = time.perf_counter()
            if mode == "stream":
                chunks = []
                for c in self.m.generate_streaming(**kwargs):
                    if first is None and len(c):
                        first = time.perf_counter() - started
                    chunks.append(np.asarray(c, dtype=np.float32))
                samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
            else:
                samples = np.asarray(self.m.generate(**kwargs), dtype=np.float32)
            total_s = time.perf_counter() - started
        finally:
            for mod, name in (
                (tts.base_lm, "forward_step"),
                (tts.residual_lm, "forward_step"),
                (tts.feat_decoder, "forward"),
                (tts.feat_encoder, "forward"),
                (tts.base_lm, "forward"),
                (tts.residual_lm, "forward"),
                (tts.audio_vae, "decode"),
                (tts, "build_prompt_cache"),
            ):
                delattr(mod, name)
            if streaming_decode is not None:
                del tts.audio_vae.streaming_decode
        made = t["dit"].count()
        prefill_s = t["base_pre"].total() + t["residual_pre"].total() + t["locenc"].total(lambda n: n != 1)
        vae_s = t["vae"].total() + sum(c.total() for c in chunk_timers)
        return cases.result(
            wire,
            total_s,
            samples,
            int(tts.sample_rate),
            made,
            prefill_s,
            t["base"].total(),
            t["residual"].total(),
            t["dit"].total(),
            t["locenc"].total(lambda n: n == 1),
            vae_s,
            prompt_s=t["prompt"].total(),
            first_chunk_s=first,
            mode=mode,
            threads=torch.get_num_threads(),
            dit_calls=made,
            base_calls=t["base"].count(),
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    serve(VoxUpstreamWorker())
