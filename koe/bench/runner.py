"""Drives the benchmark: worker processes (koe and, with `--compare upstream`, qwen-tts), runs
interleaved A/B, and the summary (median and min of the timed runs, ratios, achieved bandwidth).

Strategy: each (size, model kind) gets fresh workers, so load time and peak memory are measured in
a process that has held nothing else. Each case runs once as warm-up (excluded), then `runs` times,
alternating which side goes first so slow drift of the machine hits both sides alike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from koe.bench import wire
from koe.bench.models import bench_model, bytes_per_frame, weights_bytes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TIMED_KEYS = (
    "load_s", "prompt_s", "prefill_s", "ms_per_frame", "talker_ms_per_frame", "predictor_ms_per_frame",
    "codec_s_per_audio_s", "ttfa_s", "frames_per_s", "peak_rss",
)  # fmt: skip


class BenchError(RuntimeError):
    """The benchmark cannot run as asked (no upstream venv, a worker failed); the message says why."""


@dataclass
class BenchOptions:
    sizes: list[str] = field(default_factory=lambda: ["0.6b"])
    cases: list[str] = field(default_factory=lambda: list(wire.CASES))
    frames: int = 24
    runs: int = 3
    warmup: int = 1
    threads: int = os.cpu_count() or 1
    precision: str = "fp32"
    compare: str | None = None  # "upstream"
    upstream_precision: str = "fp32"
    profile: str | None = None  # "cprofile" | "torch"
    seed: int = 0
    models_root: Path | None = None
    out: Path | None = None
    bandwidth: bool = True


def upstream_python() -> str:
    """Upstream's virtualenv: `KOE_ORACLE_PYTHON`, else `.oracle/bin/python` (made by `make oracle`)."""
    path = os.environ.get("KOE_ORACLE_PYTHON") or str(ROOT / ".oracle" / "bin" / "python")
    if not Path(path).exists():
        raise BenchError(f"--compare upstream needs qwen-tts in its own virtualenv, not found at {path}: run `make oracle` or set KOE_ORACLE_PYTHON")
    return path


def upstream_worker() -> Path:
    """The upstream worker script; it lives in the source tree (scripts/), beside the `make oracle` venv."""
    path = ROOT / "scripts" / "bench_upstream_worker.py"
    if not path.exists():
        raise BenchError(f"--compare upstream runs from a source checkout of koe: {path} not found")
    return path


class Worker:
    """One benchmark worker process speaking `wire`'s line protocol; its stderr goes to a log file."""

    def __init__(self, side: str, threads: int, log: Path) -> None:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        if side == "koe":
            argv = [sys.executable, "-m", "koe.bench.koe_worker"]
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        else:
            argv = [upstream_python(), str(upstream_worker())]
            env.pop("PYTHONPATH", None)
        self.side = side
        self.log_path = log
        self.log = open(log, "a")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)

    def call(self, **command) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(wire.PREFIX):
                reply = json.loads(line[len(wire.PREFIX) :])
                if not reply.pop("ok"):
                    raise BenchError(f"{self.side} worker: {command.get('op')} {command.get('case', '')} failed: {reply['error']}\n{reply.get('traceback', '')}")
                return reply
        raise BenchError(f"{self.side} worker exited ({self.proc.wait()}); see {self.log_path}")

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.log.close()


def summarize(samples: list[dict]) -> dict:
    """Median and min of each timed key over the runs (keys absent or None in a run are skipped)."""
    out: dict = {}
    for key in TIMED_KEYS:
        values = [s[key] for s in samples if s.get(key) is not None]
        if values:
            out[key] = {"median": statistics.median(values), "min": min(values), "n": len(values)}
    return out


def run_bench(opts: BenchOptions, progress=lambda msg: None) -> dict:
    """Run the benchmark and return its results (also written as JSON when `opts.out` is set)."""
    import torch

    from koe.bench import machine

    for case in opts.cases:
        if case not in wire.CASES:
            raise BenchError(f"unknown case {case!r}; cases: {list(wire.CASES)}")
    if opts.compare not in (None, "upstream"):
        raise BenchError(f"--compare takes 'upstream' (got {opts.compare!r})")
    if opts.compare:
        upstream_python()
        upstream_worker()
    torch.set_num_threads(opts.threads)
    sides = ["koe"] + (["upstream"] if opts.compare else [])
    logs = Path(opts.out).parent if opts.out else Path(os.environ.get("TMPDIR", "/tmp"))
    logs.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "machine": machine.describe(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "sizes": {},
    }  # fmt: skip
    if opts.bandwidth:
        progress("measuring the machine's read bandwidth")
        results["machine"]["read_gbps"] = machine.read_bandwidth()
        results["machine"]["matvec_gbps"] = machine.matvec_bandwidth()
    bytes_per_weight = {"fp32": 4, "bf16": 2, "int8": 1}
    for size in opts.sizes:
        per_size: dict = {"cases": {}, "models": {}}
        by_kind: dict[str, list[str]] = {}
        for case in opts.cases:
            by_kind.setdefault(wire.CASES[case][0], []).append(case)
        for kind, cases in by_kind.items():
            progress(f"{size} {kind}: building or finding the model")
            folder = bench_model(kind, size, opts.models_root, seed=opts.seed)
            per_size["models"][kind] = {"folder": str(folder), "weights_bytes": weights_bytes(folder)}
            workers = {side: Worker(side, opts.threads, logs / f"koe-bench-{side}.log") for side in sides}
            try:
                loads = {}
                for side, w in workers.items():
                    progress(f"{size} {kind}: loading in {side}")
                    precision = opts.precision if side == "koe" else opts.upstream_precision
                    loads[side] = w.call(op="load", model=str(folder), threads=opts.threads, precision=precision)
                per_size["models"][kind]["load"] = loads
                for case in cases:
                    samples: dict[str, list[dict]] = {side: [] for side in sides}
                    for _ in range(opts.warmup):
                        for side, w in workers.items():
                            progress(f"{size} {case}: warm-up ({side})")
                            w.call(op="run", case=case, frames=opts.frames, seed=opts.seed)
                    for r in range(opts.runs):
                        order = sides if r % 2 == 0 else sides[::-1]
                        for side in order:
                            progress(f"{size} {case}: run {r + 1}/{opts.runs} ({side})")
                            sample = workers[side].call(op="run", case=case, frames=opts.frames, seed=opts.seed)
                            sample["load_s"] = loads[side]["load_s"]
                            samples[side].append(sample)
                    entry = {side: {"summary": summarize(samples[side]), "runs": samples[side]} for side in sides}
                    if opts.profile:
                        for side in sides:
                            progress(f"{size} {case}: {opts.profile} profile ({side})")
                            prof = workers[side].call(op="run", case=case, frames=opts.frames, seed=opts.seed, profile=opts.profile)
                            entry[side]["profile"] = prof.get("profile")
                    for side in sides:
                        bpw = bytes_per_weight.get(opts.precision if side == "koe" else opts.upstream_precision, 4)
                        mpf = entry[side]["summary"].get("ms_per_frame")
                        if mpf and wire.CASES[case][1] == 1:
                            gb = bytes_per_frame(folder, bpw) / 1e9
                            entry[side]["gb_per_frame"] = gb
                            entry[side]["achieved_gbps"] = gb / (mpf["median"] / 1e3)
                        entry[side]["precision"] = loads[side].get("precision")
                    if opts.compare:
                        entry["ratio"] = ratios(entry["koe"]["summary"], entry["upstream"]["summary"])
                        hashes = {side: {s.get("codes_sha1") for s in samples[side]} for side in sides}
                        if None not in hashes["koe"] | hashes["upstream"]:  # same seed, same codes? (expected with 1 thread in fp32)
                            entry["codes_equal"] = hashes["koe"] == hashes["upstream"]
                    per_size["cases"][case] = entry
            finally:
                for w in workers.values():
                    w.close()
        batch_case, single = per_size["cases"].get("batch8"), per_size["cases"].get("custom_voice")
        if batch_case and single:
            per_size["batch8_speedup"] = {
                side: batch_case[side]["summary"]["frames_per_s"]["median"] / single[side]["summary"]["frames_per_s"]["median"]
                for side in sides if "frames_per_s" in batch_case[side]["summary"]
            }  # fmt: skip
        results["sizes"][size] = per_size
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    results["machine"]["loadavg_end"] = list(os.getloadavg())
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(json.dumps(results, indent=1))
    return results


def ratios(koe: dict, upstream: dict) -> dict:
    """koe / upstream for each timed key both sides have (medians): below 1 means koe is faster
    (for `frames_per_s`, above 1 means koe is faster)."""
    return {k: koe[k]["median"] / upstream[k]["median"] for k in koe if k in upstream and upstream[k]["median"]}
