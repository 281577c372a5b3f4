"""GPU check for koe's CUDA decode path: tests + benchmark -> one JSON file; every other family's
tiny model through the engine contract on the GPU (fp32 and bf16, timed, fp32 against the CPU).

Run through scripts/gpu_check.sh on a machine with one NVIDIA GPU, PyTorch installed, no network.
Random-weight 0.6B and 1.7B CustomVoice models are built here (in a background process while the
GPU tests run). Every part is timed against a total budget; a part that fails or would overrun is
recorded in the JSON (error + traceback, or "skipped") and the script goes on. The JSON is
rewritten after every part, so a kill leaves the parts done so far.

Measured the gpt-fast way: warm-up excluded, prefill split out, ms per frame over the decode loop.
Paths: `decode_frames` (today's eager core), `eager_static` (the graphed path's code, uncaptured),
`cuda_graphs` (captured). RTF = audio seconds / compute seconds (> 1 is faster than real time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FRAME_S = 0.08
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green forest near the river."
PEAK_GBPS = {"H200": 4800, "H100 SXM": 3350, "H100 PCIe": 2000, "H100": 3350, "A100": 2039, "L40S": 864, "4090": 1008, "A10G": 600, "L4": 300}
DEV = "cuda"  # "cpu" only for --dry-run (checks the script itself on a machine without a GPU)
SIZES = {"0.6b": "0.6b", "1.7b": "1.7b"}  # label -> fixture size; --dry-run maps them to tiny models
TARGETS = {"0.6b_ms_per_frame": 8.0, "0.6b_ttfa_ms": 60.0, "1.7b_ms_per_frame": 12.0, "batch16_over_batch1": 8.0}


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


class Report:
    def __init__(self, path: Path, budget_s: float) -> None:
        self.path = path
        self.started = time.perf_counter()
        self.budget_s = budget_s
        self.data: dict = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "budget_s": budget_s, "parts": {}}

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.started)

    def part(self, name: str, fn, *, needs_s: float = 0.0):
        """Run one part; its result (or error / skip) goes under parts[name]."""
        if self.left() < needs_s:
            self.data["parts"][name] = {"status": "skipped", "reason": f"{self.left():.0f} s of budget left, part needs ~{needs_s:.0f} s"}
            self.save()
            return None
        t0 = time.perf_counter()
        try:
            result = fn()
            self.data["parts"][name] = {"status": "ok", "seconds": round(time.perf_counter() - t0, 1), **(result or {})}
        except Exception as e:  # noqa: BLE001 - a failing part is recorded, the rest goes on
            self.data["parts"][name] = {
                "status": "error",
                "seconds": round(time.perf_counter() - t0, 1),
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc()[-4000:],
            }
            result = None
        finally:
            try:
                sync()
                if DEV == "cuda":
                    torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001
                pass
        self.save()
        return result

    def save(self) -> None:
        self.data["elapsed_s"] = round(time.perf_counter() - self.started, 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        tmp.replace(self.path)


# -- parts ----------------------------------------------------------------------------------------


def environment() -> dict:
    if DEV != "cuda":
        return {"python": platform.python_version(), "torch": torch.__version__, "device": "cpu (dry run)"}
    props = torch.cuda.get_device_properties(0)
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "device": torch.cuda.get_device_name(0),
        "capability": list(torch.cuda.get_device_capability(0)),
        "memory_gib": round(props.total_memory / 2**30, 1),
        "bf16_supported": torch.cuda.is_bf16_supported(),
        "sm_count": props.multi_processor_count,
    }
    try:
        env["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
    except Exception as e:  # noqa: BLE001
        env["driver"] = f"unknown ({e})"
    try:
        env["koe_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        env["koe_commit"] = None
    return env


def run_tests(timeout: float) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/engines/qwen3_tts/test_qwen3_tts_gpu_graphs.py",
        "tests/engines/qwen3_tts/test_qwen3_tts_gpu_parts_cpu.py",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    summary = next((ln for ln in reversed(lines) if " passed" in ln or " failed" in ln or " error" in ln), lines[-1] if lines else "")
    return {
        "passed": proc.returncode == 0,
        "returncode": proc.returncode,
        "summary": summary.strip("= "),
        "tail": "\n".join(lines[-40:])[-6000:],
        "stderr_tail": proc.stderr[-2000:],
    }


def start_model_builds(root: Path) -> subprocess.Popen:
    """Build the random 0.6B and 1.7B models in a background process (CPU work, while the GPU tests run)."""
    code = (
        "import sys; from koe.engines.qwen3_tts.fixtures import write_random_model\n"
        "for size in ('0.6b', '1.7b'):\n"
        "    write_random_model(sys.argv[1] + '/' + size, 'custom_voice', sys.argv[2 + ('0.6b', '1.7b').index(size)]); print(size, flush=True)\n"
    )
    root.mkdir(parents=True, exist_ok=True)
    log = open(root / "build.log", "w")  # noqa: SIM115 - lives as long as the builder
    env = {**os.environ, "OMP_NUM_THREADS": "4"}  # leave cores to the benchmark's host side
    return subprocess.Popen(
        [sys.executable, "-c", code, str(root), SIZES["0.6b"], SIZES["1.7b"]], cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, env=env
    )


_BUILT: set[str] = set()


def wait_for_model(root: Path, size: str, builder: subprocess.Popen, deadline: float) -> Path:
    """Wait until the builder reports `size` done (it prints each size when written)."""
    import select

    while size not in _BUILT:
        if builder.poll() is not None:  # ended: whatever it printed is readable to EOF
            _BUILT.update(line.strip() for line in builder.stdout.read().splitlines())
            if size not in _BUILT:
                raise RuntimeError(f"model build ended (rc {builder.returncode}) without {size}: {(root / 'build.log').read_text()[-2000:]}")
            break
        if select.select([builder.stdout], [], [], 1.0)[0]:
            line = builder.stdout.readline()
            if line:
                _BUILT.add(line.strip())
        if time.perf_counter() > deadline:
            raise TimeoutError(f"random {size} model not built in time")
    return root / size


class Bench:
    """Timings of one loaded model."""

    def __init__(self, folder: Path) -> None:
        from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

        t0 = time.perf_counter()
        self.engine = Qwen3TTSEngine.load(folder, device=DEV)
        self.load_s = time.perf_counter() - t0
        self.talker = self.engine.network.talker
        self.settings = self.engine.decode_settings()

    def inputs(self, batch: int):
        from koe.engines.qwen3_tts.prompt import build_talker_inputs

        items, _ = self.engine._request([TEXT] * batch, "english", "ryan", None, None, {})
        with torch.inference_mode():
            return build_talker_inputs(self.talker, self.engine.cfg, items, False)

    def frames_fn(self, path: str):
        from koe.engines.qwen3_tts.cuda_decode import GraphedDecoder
        from koe.engines.qwen3_tts.generate import decode_frames

        if path == "decode_frames":
            return lambda inputs, settings, gen, limits: decode_frames(self.talker, inputs, settings, gen, row_limits=limits)
        if not hasattr(self, "_decoders"):
            self._decoders = {"eager_static": GraphedDecoder(self.talker, capture=False), "cuda_graphs": GraphedDecoder(self.talker)}
        dec = self._decoders[path]
        return lambda inputs, settings, gen, limits: dec.decode_frames(inputs, settings, gen, row_limits=limits)

    def time_decode(self, path: str, batch: int, frames: int, settings=None, seed: int = 0) -> dict:
        """Warm-up run, then one timed run of `frames` frames: prefill (to the first frame) split out."""
        settings = settings or self.settings
        fn = self.frames_fn(path)
        inputs = self.inputs(batch)
        limits = torch.full((batch,), frames, device=DEV)
        with torch.inference_mode():
            warm = fn(inputs, settings, torch.Generator().manual_seed(seed), limits)  # same plan: captures happen here
            for i, _ in enumerate(warm):
                if i == 3:
                    break
            warm.close()
            sync()
            if DEV == "cuda":
                torch.cuda.reset_peak_memory_stats()
            codes = []
            t0 = time.perf_counter()
            it = fn(inputs, settings, torch.Generator().manual_seed(seed), limits)
            for frame in it:
                if not codes:
                    sync()
                    t1 = time.perf_counter()
                codes.append(frame.codes)
            sync()
            t2 = time.perf_counter()
        n = len(codes)
        ms = (t2 - t1) * 1000 / max(n - 1, 1)
        return {
            "path": path,
            "batch": batch,
            "frames": n,
            "first_frame_ms": round((t1 - t0) * 1000, 2),
            "ms_per_frame": round(ms, 3),
            "loop_frames_per_s": round(batch * 1000 / ms, 1),
            "rtf_loop": round(FRAME_S * 1000 / ms, 2),
            "rtf_with_prefill": round(n * FRAME_S / (t2 - t0), 2),
            "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if DEV == "cuda" else None,
            "_codes": codes,
        }

    def ttfa(self, first_chunk_frames: int, reps: int = 5) -> dict:
        """Text in -> first streamed audio samples on the host, as engine.stream does it (graphed frames)."""
        from koe.engines.qwen3_tts.prompt import build_talker_inputs
        from koe.engines.qwen3_tts.streaming import CodecStream

        fn = self.frames_fn("cuda_graphs")
        times = []
        for rep in range(reps + 1):
            sync()
            t0 = time.perf_counter()
            items, settings = self.engine._request([TEXT], "english", "ryan", None, None, {})
            with torch.inference_mode():
                inputs = build_talker_inputs(self.talker, self.engine.cfg, items, False)
                codec = CodecStream(self.engine.codec)
                frames = fn(inputs, settings, torch.Generator().manual_seed(rep), torch.tensor([50]))
                for frame in frames:
                    codec.push(frame.codes[0])
                    if codec.pending >= first_chunk_frames:
                        samples = codec.drain().cpu().numpy()
                        break
                frames.close()
            if rep:  # the first is a warm-up
                times.append((time.perf_counter() - t0) * 1000)
        assert len(samples) > 0
        return {"first_chunk_frames": first_chunk_frames, "ttfa_ms_median": round(statistics.median(times), 1), "ttfa_ms_all": [round(t, 1) for t in times]}

    def engine_stream_ttfa(self, reps: int = 3) -> dict:
        """Time to the first chunk of `engine.stream` with whatever decode path the engine uses."""
        times, meta = [], {}
        for rep in range(reps + 1):
            sync()
            t0 = time.perf_counter()
            stream = self.engine.stream(TEXT, speaker="ryan", language="english", seed=rep, max_frames=40)
            chunk = next(stream)
            if rep:
                times.append((time.perf_counter() - t0) * 1000)
            meta = {k: v for k, v in chunk.metadata.items() if k in ("decode_path", "frames")}
            stream.close()
        return {"ttfa_ms_median": round(statistics.median(times), 1), "first_chunk_metadata": meta}

    def busy_fraction(self, path: str, frames: int = 40) -> dict:
        """GPU busy fraction from torch.profiler: union of device-activity intervals / wall time of the loop."""
        from torch.profiler import ProfilerActivity, profile

        fn = self.frames_fn(path)
        inputs = self.inputs(1)
        with torch.inference_mode():
            warm = fn(inputs, self.settings, torch.Generator().manual_seed(0), torch.tensor([frames]))
            next(warm)
            warm.close()
            sync()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                it = fn(inputs, self.settings, torch.Generator().manual_seed(0), torch.tensor([frames]))
                next(it)
                sync()
                w0 = time.perf_counter_ns()
                for _ in it:
                    pass
                sync()
                w1 = time.perf_counter_ns()
        spans = _device_spans(prof)
        if not spans:
            return {"path": path, "busy_fraction": None, "note": "the profiler recorded no device activity"}
        spans.sort()
        # The window: from the first device activity after the first frame to the last one; the wall
        # clock of the loop bounds it from above.
        union, cur_s, cur_e = 0.0, *spans[0]
        for s, e in spans[1:]:
            if s > cur_e:
                union += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        union += cur_e - cur_s
        kernel_span = spans[-1][1] - spans[0][0]
        wall_us = (w1 - w0) / 1000
        return {
            "path": path,
            "busy_fraction_of_device_span": round(union / kernel_span, 3),
            "device_events": len(spans),
            "device_span_ms": round(kernel_span / 1000, 2),
            "busy_ms": round(union / 1000, 2),
            "loop_wall_ms_after_first_frame": round(wall_us / 1000, 2),
            "note": "device activity of the prefill + first frame is included in the span; the loop's wall time is given for scale",
        }

    def weight_bytes_per_frame(self) -> int:
        """Bytes of weights read per frame at batch 1: the talker once, the predictor 15 times (one head each)."""
        size = lambda m: sum(p.numel() * p.element_size() for p in m.parameters())  # noqa: E731
        pred = self.talker.code_predictor
        layers = size(self.talker.model.layers) + size(self.talker.model.norm) + size(self.talker.codec_head)
        per_step = size(pred.model.layers) + size(pred.model.norm) + size(pred.lm_head[0]) + size(pred.small_to_mtp_projection)
        return layers + (pred.cfg.num_code_groups - 1) * per_step


def _device_spans(prof) -> list[tuple[float, float]]:
    """(start, end) in microseconds of every device activity (kernels, copies, sets) the profiler saw."""
    spans: list[tuple[float, float]] = []
    try:
        for evt in prof.profiler.kineto_results.events():
            if evt.device_type() == torch.autograd.DeviceType.CUDA:
                start = evt.start_ns() / 1000
                spans.append((start, start + evt.duration_ns() / 1000))
    except Exception:  # noqa: BLE001 - older/newer profiler APIs: fall back to the event list
        spans = []
    if not spans:
        for e in prof.events():
            if getattr(getattr(e, "device_type", None), "name", "") == "CUDA":
                spans.append((e.time_range.start, e.time_range.end))
    return spans


def bench_model(report: Report, size: str, folder: Path) -> None:
    holder: list[Bench] = []

    def load() -> dict:
        holder.append(Bench(folder))
        return {"load_s": round(holder[0].load_s, 1), "dtype": str(holder[0].engine.dtype)}

    report.part(f"{size}/load", load, needs_s=30)
    if not holder:
        return
    bench = holder[0]
    frames = 150 if size == "0.6b" else 120
    results: dict = {}

    def timing(path: str, batch: int, n: int):
        def run():
            r = bench.time_decode(path, batch, n)
            results[(path, batch)] = r.pop("_codes")
            return r

        return run

    report.part(f"{size}/graphed_b1", timing("cuda_graphs", 1, frames), needs_s=20)
    report.part(f"{size}/eager_static_b1", timing("eager_static", 1, 40), needs_s=20)
    report.part(f"{size}/decode_frames_b1", timing("decode_frames", 1, 40), needs_s=20)
    report.part(f"{size}/exactness", lambda: _exactness(bench, results), needs_s=15)
    report.part(f"{size}/graphed_b16", timing("cuda_graphs", 16, 60 if size == "0.6b" else 40), needs_s=30)
    report.part(f"{size}/ttfa", lambda: {"runs": [bench.ttfa(4), bench.ttfa(1)]}, needs_s=20)
    report.part(f"{size}/engine_stream", bench.engine_stream_ttfa, needs_s=20)
    report.part(
        f"{size}/busy", lambda: {"cuda_graphs": bench.busy_fraction("cuda_graphs"), "decode_frames": bench.busy_fraction("decode_frames", 20)}, needs_s=25
    )
    parts = report.data["parts"]
    g1 = parts.get(f"{size}/graphed_b1", {})
    if "ms_per_frame" in g1:
        per_frame = bench.weight_bytes_per_frame()
        gbps = per_frame / (g1["ms_per_frame"] / 1000) / 1e9
        name = report.data["parts"].get("environment", {}).get("device", "")
        peak = next((v for k, v in PEAK_GBPS.items() if k in name), None)
        parts[f"{size}/bandwidth"] = {
            "weight_gb_per_frame": round(per_frame / 1e9, 3),
            "achieved_gb_s": round(gbps, 1),
            "peak_gb_s": peak,
            "fraction_of_peak": round(gbps / peak, 3) if peak else None,
        }
    holder.clear()
    bench = None  # the closures above share this cell: free the model before the next size loads
    report.save()


def _exactness(bench: Bench, results: dict) -> dict:
    """Graphed == eager (same seed, same GPU, same dtype) over the common frames; greedy agreement with decode_frames."""
    g, e = results.get(("cuda_graphs", 1)), results.get(("eager_static", 1))
    out: dict = {}
    if g is not None and e is not None:
        n = min(len(g), len(e))
        out["graphed_equals_eager_sampled"] = all(torch.equal(a, b) for a, b in zip(g[:n], e[:n]))
        out["frames_compared"] = n
    greedy = replace(bench.settings, talker=replace(bench.settings.talker, do_sample=False), predictor=replace(bench.settings.predictor, do_sample=False))
    gg = bench.time_decode("cuda_graphs", 1, 40, greedy)["_codes"]
    ge = bench.time_decode("eager_static", 1, 40, greedy)["_codes"]
    core = bench.time_decode("decode_frames", 1, 40, greedy)["_codes"]
    out["graphed_equals_eager_greedy"] = len(gg) == len(ge) and all(torch.equal(a, b) for a, b in zip(gg, ge))
    same = [torch.equal(a, b) for a, b in zip(gg, core)]
    out["greedy_vs_decode_frames"] = {
        "frames": len(same),
        "identical_frames": sum(same),
        "first_difference": same.index(False) if False in same else None,
        "note": "bf16: the talker's static-cache attention reduces over a masked full buffer, so bf16 rounding may differ from the growing cache's",
    }
    return out


def summarize(report: Report) -> None:
    p = report.data["parts"]
    get = lambda k, f: p.get(k, {}).get(f)  # noqa: E731
    s: dict = {}
    for size in ("0.6b", "1.7b"):
        s[size] = {
            "ms_per_frame": {
                "cuda_graphs": get(f"{size}/graphed_b1", "ms_per_frame"),
                "eager_static": get(f"{size}/eager_static_b1", "ms_per_frame"),
                "decode_frames": get(f"{size}/decode_frames_b1", "ms_per_frame"),
            },
            "rtf_loop_graphed": get(f"{size}/graphed_b1", "rtf_loop"),
            "speedup_vs_decode_frames": _ratio(get(f"{size}/decode_frames_b1", "ms_per_frame"), get(f"{size}/graphed_b1", "ms_per_frame")),
            "ttfa_ms": {str(r["first_chunk_frames"]) + "_frames": r["ttfa_ms_median"] for r in (get(f"{size}/ttfa", "runs") or [])},
            "engine_stream_ttfa_ms": get(f"{size}/engine_stream", "ttfa_ms_median"),
            "batch16_over_batch1": _ratio(get(f"{size}/graphed_b16", "loop_frames_per_s"), get(f"{size}/graphed_b1", "loop_frames_per_s")),
            "busy_fraction_graphed": (get(f"{size}/busy", "cuda_graphs") or {}).get("busy_fraction_of_device_span"),
            "busy_fraction_decode_frames": (get(f"{size}/busy", "decode_frames") or {}).get("busy_fraction_of_device_span"),
            "graphed_equals_eager": get(f"{size}/exactness", "graphed_equals_eager_sampled"),
        }
    t = {
        "0.6b <= 8 ms/frame": _le(s["0.6b"]["ms_per_frame"]["cuda_graphs"], TARGETS["0.6b_ms_per_frame"]),
        "0.6b <= 60 ms to first streamed audio (4-frame first chunk)": _le(s["0.6b"]["ttfa_ms"].get("4_frames"), TARGETS["0.6b_ttfa_ms"]),
        "1.7b <= 12 ms/frame": _le(s["1.7b"]["ms_per_frame"]["cuda_graphs"], TARGETS["1.7b_ms_per_frame"]),
        "0.6b batch 16 >= 8x batch 1 frames/s": _le(TARGETS["batch16_over_batch1"], s["0.6b"]["batch16_over_batch1"]),
    }
    report.data["summary"] = s
    report.data["targets_met"] = t
    report.save()


def _ratio(a, b):
    return round(a / b, 2) if a and b else None


def _le(a, b):
    return None if a is None or b is None else bool(a <= b)


def family_checks(work: Path) -> dict:
    """Every other registered family through the engine contract on the GPU: its tiny random-weight
    fixture loaded on the device in float32 and in each opt-in precision it offers that runs on a
    GPU (bf16), one short request each (seed 0), timed; float32 on the device against float32 on
    the CPU (the largest sample difference: the same computation on other kernels)."""
    import numpy as np

    from koe.engines import registry
    from koe.engines.base import SynthesisRequest, collect

    out: dict = {}
    for family in registry.families():
        if family == "qwen3_tts":  # measured above, at the released sizes
            continue
        entry: dict = {}
        out[family] = entry
        try:
            folder = registry.write_fixture(work / f"family-{family}", family)
            caps = registry.describe(folder).capabilities
            request = SynthesisRequest(TEXT[:60], seed=0, options=_short(caps))
            runs = {}
            for precision in ("fp32", *(p for p in caps.precisions if p == "bf16")):
                for device in (DEV, "cpu") if precision == "fp32" and DEV != "cpu" else (DEV,):
                    started = time.perf_counter()
                    engine = registry.load_engine(folder, device=device, precision=precision)
                    loaded = time.perf_counter() - started
                    sync()
                    started = time.perf_counter()
                    chunk = collect(engine.synthesize(replace(request, voice=_voice(engine, caps))))
                    sync()
                    runs[f"{precision}@{device}"] = chunk.samples
                    entry[f"{precision}@{device}"] = {
                        "load_s": round(loaded, 3),
                        "synthesize_s": round(time.perf_counter() - started, 3),
                        "audio_s": round(len(chunk.samples) / chunk.sample_rate, 3),
                        "finite": bool(np.isfinite(chunk.samples).all()),
                        "precision": chunk.metadata.get("precision"),
                    }
                    engine.close()
            a, b = runs.get(f"fp32@{DEV}"), runs.get("fp32@cpu")
            if a is not None and b is not None and DEV != "cpu":
                n = min(len(a), len(b))
                entry["fp32_device_vs_cpu"] = {"same_length": len(a) == len(b), "max_abs_diff": float(np.abs(a[:n] - b[:n]).max()) if n else None}
        except Exception as e:  # one family's failure is recorded; the others go on
            entry["error"] = f"{type(e).__name__}: {e}"
            entry["traceback"] = traceback.format_exc()[-2000:]
    return out


def _voice(engine, caps):
    """What a request speaks in: the model's own voice where it has one, else its first preset
    speaker, else a clone of a 2 s synthetic clip (or the model's shortest reference) with its transcript."""
    import numpy as np

    from koe.engines.base import NO_VOICE, PRESET, VoiceReference

    if NO_VOICE in caps.voice_modes:
        return None
    if PRESET in caps.voice_modes and caps.speakers:
        return caps.speakers[0]
    t = np.arange(int(max(2.0, caps.min_reference_s) * 24000)) / 24000
    clip = (0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    return engine.prepare_voice(VoiceReference((clip, 24000), "A short test clip."))


def _short(caps) -> dict:
    """Options that keep a random-weight model's request short (its length cap, or few steps)."""
    names = {o.name for o in caps.options.options}
    options = {caps.length_option: 16} if caps.length_option else {}
    for name, value in (("nfe_step", 8), ("num_step", 8), ("inference_timesteps", 4)):
        if name in names:
            options[name] = value
    return options


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "gpu_check.json"))
    ap.add_argument("--budget", type=float, default=450.0, help="seconds for everything (tests + benchmark)")
    ap.add_argument("--workdir", default=None, help="where the random models are written (default: a temp dir)")
    ap.add_argument("--dry-run", action="store_true", help="check this script on the CPU with tiny models (no GPU numbers)")
    args = ap.parse_args()
    report = Report(Path(args.out), args.budget)
    if args.dry_run:
        global DEV
        DEV = "cpu"
        SIZES.update({"0.6b": "tiny", "1.7b": "tiny-proj"})
        report.data["dry_run"] = True
    elif not torch.cuda.is_available():
        report.data["error"] = "no CUDA device visible to torch"
        report.save()
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    logging_setup()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="koe-gpu-check-"))
    builder = start_model_builds(work)
    report.data["workdir"] = str(work)
    report.part("environment", environment)
    if not args.dry_run:
        report.part("tests", lambda: run_tests(timeout=min(180.0, max(report.left() - 200, 30))), needs_s=60)
    report.part("families", lambda: family_checks(work), needs_s=60)
    for size in ("0.6b", "1.7b"):
        deadline = time.perf_counter() + max(report.left() - 40, 0)
        folder = report.part(f"{size}/build", lambda size=size, deadline=deadline: {"folder": str(wait_for_model(work, size, builder, deadline))}, needs_s=40)
        if folder is not None:
            bench_model(report, size, Path(folder["folder"]))
    if builder.poll() is None:
        builder.kill()
    summarize(report)
    print(json.dumps({"summary": report.data.get("summary"), "targets_met": report.data.get("targets_met")}, indent=2))
    return 0


def logging_setup() -> None:
    import logging

    logging.basicConfig(level=os.environ.get("KOE_LOG", "WARNING"))


if __name__ == "__main__":
    sys.exit(main())
