"""Drives the benchmark: worker processes (koe and, with `--compare upstream`, qwen-tts or
f5-tts; with `--compare mizuoto`, the peer runtime mizuoto 0.2.16, Qwen3-TTS only), runs
interleaved, and the summary (median and min of the timed runs, ratios, achieved bandwidth or
arithmetic rate).

Strategy: each (size, model kind) gets fresh workers, so load time and peak memory are measured in
a process that has held nothing else. Each case runs once as warm-up (excluded), then `runs` times,
alternating the order of the sides (koe, the compared ones, then the reverse) so slow drift of the
machine hits every side alike. `call_s` is the whole call as the parent sees it (the `run` command's
round trip: the voice prompt, generation and codec in the worker), the same measure for every side.

Family `f5_tts` (`run_f5`): one model (`--variant`, size tiny or real), one pair of workers for
all cases; a warm-up is the case's request at `warmup_nfe` steps (the same shapes and code, a
fraction of the time); with `--compare upstream` a last request per side at one thread checks that
both sides' waveforms are equal bit for bit.
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
    "load_s", "call_s", "prompt_s", "prefill_s", "ms_per_frame", "talker_ms_per_frame", "predictor_ms_per_frame",
    "codec_s_per_audio_s", "ttfa_s", "stream_rtf", "frames_per_s", "peak_rss",
    "ttfa_before_prefill_s", "ttfa_prefill_s", "ttfa_frames_s", "ttfa_codec_s",  # koe's streaming case: where its TTFA goes
)  # fmt: skip
PEERS = ("upstream", "mizuoto")  # what `--compare` takes (mizuoto: Qwen3-TTS only)
F5_TIMED_KEYS = ("load_s", "prompt_s", "total_s", "rtf", "text_s", "dit_s", "ms_per_step", "vocoder_s", "other_s", "dit_gflops", "peak_rss")
FAMILIES = ("qwen3_tts", "f5_tts", "voxcpm")


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
    compare: list[str] | str | None = None  # the compared sides: "upstream", "mizuoto" (a list, or one name)
    upstream_precision: str = "fp32"
    profile: str | None = None  # "cprofile" | "torch"
    seed: int = 0
    models_root: Path | None = None
    out: Path | None = None
    bandwidth: bool = True
    family: str = "qwen3_tts"  # or "f5_tts"
    variant: str = "F5TTS_v1_Base"  # F5-TTS only
    warmup_nfe: int = 2  # F5-TTS: NFE of a warm-up request
    nfe: int | None = None  # F5-TTS: every case at this NFE instead of its own (a quick profile)
    exact_check: bool = True  # F5-TTS with --compare upstream: one request per side at 1 thread, waveforms compared
    patches: int = 16  # VoxCPM: latent patches per request (min_len = max_len)
    timesteps: int = 10  # VoxCPM: CFM steps per patch (upstream's default)


# Each compared side's virtualenv and worker script (scripts/, never imported by koe): upstream per
# family, and the peer. key -> (environment variable, default venv folder, what it holds, make
# target, worker script).
SIDES = {
    "qwen3_tts": ("KOE_ORACLE_PYTHON", ".oracle", "qwen-tts", "oracle", "bench_upstream_worker.py"),
    "f5_tts": ("KOE_ORACLE_F5_PYTHON", ".oracle-f5", "f5-tts", "oracle-f5", "bench_f5_upstream_worker.py"),
    "voxcpm": ("KOE_ORACLE_VOXCPM_PYTHON", ".oracle-voxcpm", "voxcpm", "oracle-voxcpm", "bench_voxcpm_upstream_worker.py"),
    "mizuoto": ("KOE_PEER_MIZUOTO_PYTHON", ".peer-mizuoto", "mizuoto 0.2.16", "peer-mizuoto", "bench_mizuoto_worker.py"),
}


def _flag(key: str) -> str:
    return "--compare mizuoto" if key == "mizuoto" else "--compare upstream"


def side_python(key: str) -> str:
    """The Python of a compared side's virtualenv (`key`: a family for upstream, or "mizuoto"): its
    environment variable, else the folder its make target builds."""
    variable, folder, holds, target, _ = SIDES[key]
    path = os.environ.get(variable) or str(ROOT / folder / "bin" / "python")
    if not Path(path).exists():
        raise BenchError(f"{_flag(key)} needs {holds} in its own virtualenv, not found at {path}: run `make {target}` or set {variable}")
    return path


def side_worker(key: str) -> Path:
    """A compared side's worker script; it lives in the source tree (scripts/), beside the venvs."""
    path = ROOT / "scripts" / SIDES[key][4]
    if not path.exists():
        raise BenchError(f"{_flag(key)} runs from a source checkout of koe: {path} not found")
    return path


def compared(opts: BenchOptions) -> list[str]:
    """The sides `opts.compare` names, in order, each once (`None` or empty: none; one name: that one)."""
    names = [opts.compare] if isinstance(opts.compare, str) else list(opts.compare or [])
    wrong = [n for n in names if n not in PEERS]
    if wrong:
        raise BenchError(f"--compare takes {' or '.join(repr(p) for p in PEERS)} (got {wrong[0]!r})")
    return list(dict.fromkeys(names))


class Worker:
    """One benchmark worker process speaking `wire`'s line protocol; its stderr goes to a log file."""

    def __init__(self, side: str, threads: int, log: Path, family: str = "qwen3_tts") -> None:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        if side == "koe":
            argv = [sys.executable, "-m", "koe.bench.koe_worker"] + ([family] if family in ("f5_tts", "voxcpm") else [])
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        else:  # mizuoto's own settings are its host's defaults (its worker applies them before torch loads)
            key = "mizuoto" if side == "mizuoto" else family
            argv = [side_python(key), str(side_worker(key))]
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


def summarize(samples: list[dict], keys: tuple[str, ...] = TIMED_KEYS) -> dict:
    """Median and min of each timed key over the runs (keys absent or None in a run are skipped)."""
    out: dict = {}
    for key in keys:
        values = [s[key] for s in samples if s.get(key) is not None]
        if values:
            out[key] = {"median": statistics.median(values), "min": min(values), "n": len(values)}
    return out


def run_bench(opts: BenchOptions, progress=lambda msg: None) -> dict:
    """Run the benchmark and return its results (also written as JSON when `opts.out` is set)."""
    if opts.family == "f5_tts":
        return run_f5(opts, progress)
    if opts.family == "voxcpm":
        from koe.bench.voxcpm_bench import run_voxcpm

        return run_voxcpm(opts, progress)
    if opts.family != "qwen3_tts":
        raise BenchError(f"unknown family {opts.family!r}; families: {list(FAMILIES)}")
    import torch

    from koe.bench import machine

    for case in opts.cases:
        if case not in wire.CASES:
            raise BenchError(f"unknown case {case!r}; cases: {list(wire.CASES)}")
    peers = compared(opts)
    for key in ("qwen3_tts" if side == "upstream" else side for side in peers):
        side_python(key)
        side_worker(key)
    torch.set_num_threads(opts.threads)
    sides = ["koe"] + peers
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
    bytes_per_weight = {"fp32": 4, "bf16": 2, "int8": 1, "int4": 0.5625}  # int4: 4 bits + a float32 scale per 64
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
                            started = time.perf_counter()
                            sample = workers[side].call(op="run", case=case, frames=opts.frames, seed=opts.seed)
                            if "unsupported" not in sample:
                                sample["call_s"] = time.perf_counter() - started  # the whole call, seen from here
                            sample["load_s"] = loads[side]["load_s"]
                            samples[side].append(sample)
                    entry = {side: {"summary": summarize(samples[side]), "runs": samples[side]} for side in sides}
                    for side in sides:
                        reason = next((s["unsupported"] for s in samples[side] if "unsupported" in s), None)
                        if reason:
                            entry[side]["unsupported"] = reason
                    if opts.profile:
                        for side in sides:
                            progress(f"{size} {case}: {opts.profile} profile ({side})")
                            prof = workers[side].call(op="run", case=case, frames=opts.frames, seed=opts.seed, profile=opts.profile)
                            entry[side]["profile"] = prof.get("profile")
                    for side in sides:
                        bpw = bytes_per_weight.get(opts.precision if side == "koe" else opts.upstream_precision, 4)
                        if loads[side].get("kernel") == "koe-exact-bf16":
                            bpw = 2  # exact products read the weights as bf16 (the values the float32 path widens)
                        mpf = entry[side]["summary"].get("ms_per_frame")
                        if mpf and wire.CASES[case][1] == 1:
                            gb = bytes_per_frame(folder, bpw) / 1e9
                            entry[side]["gb_per_frame"] = gb
                            entry[side]["achieved_gbps"] = gb / (mpf["median"] / 1e3)
                        entry[side]["precision"] = loads[side].get("precision")
                        if loads[side].get("kernel"):
                            entry[side]["kernel"] = loads[side]["kernel"]  # int8 / int4: what ran the products
                    compare_sides(entry, samples, peers)
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


def compare_sides(entry: dict, samples: dict[str, list[dict]], peers: list[str]) -> None:
    """Ratios and same-codes verdicts of one case into `entry`: for upstream `ratio` and `codes_equal`
    (the shape older results have), and for every compared side `ratios[side]` (koe / side) and
    `codes_equal_to[side]` (its codes are koe's; absent where a side made none)."""
    hashes = {side: {s.get("codes_sha1") for s in runs} for side, runs in samples.items()}
    for side in peers:
        entry.setdefault("ratios", {})[side] = ratios(entry["koe"]["summary"], entry[side]["summary"])
        if None not in hashes["koe"] | hashes[side]:  # same seed, same codes? (expected in fp32)
            entry.setdefault("codes_equal_to", {})[side] = hashes["koe"] == hashes[side]
    if "upstream" in peers:
        entry["ratio"] = entry["ratios"]["upstream"]
        if "upstream" in entry.get("codes_equal_to", {}):
            entry["codes_equal"] = entry["codes_equal_to"]["upstream"]


def ratios(koe: dict, upstream: dict) -> dict:
    """koe / upstream for each timed key both sides have (medians): below 1 means koe is faster
    (for `frames_per_s`, above 1 means koe is faster)."""
    return {k: koe[k]["median"] / upstream[k]["median"] for k in koe if k in upstream and upstream[k]["median"]}


def start_run(opts, family: str, title: str, cases, sizes) -> tuple[list[str], Path, dict]:
    """What every family's bench run begins with: the cases, sizes and `--compare` checked (the
    upstream venv and worker must exist), torch's threads set; returns (sides, log folder, results
    header)."""
    import torch

    from koe.bench import machine

    for case in opts.cases:
        if case not in cases:
            raise BenchError(f"unknown {title} case {case!r}; cases: {list(cases)}")
    for size in opts.sizes:
        if size not in sizes:
            raise BenchError(f"unknown {title} size {size!r}; sizes: {list(sizes)}")
    peers = compared(opts)
    if peers not in ([], ["upstream"]):
        raise BenchError(f"--family {family}: --compare takes 'upstream' only (mizuoto is compared on Qwen3-TTS)")
    if peers:
        side_python(family)
        side_worker(family)
    torch.set_num_threads(opts.threads)
    logs = Path(opts.out).parent if opts.out else Path(os.environ.get("TMPDIR", "/tmp"))
    logs.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "family": family, "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "machine": machine.describe(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "sizes": {},
    }  # fmt: skip
    return ["koe"] + peers, logs, results


def run_f5(opts: BenchOptions, progress=lambda msg: None) -> dict:
    """`koe bench --family f5_tts`: F5-TTS requests (`wire.F5_CASES`) in koe and, with
    `--compare upstream`, in f5-tts 1.1.22, interleaved; returns the results (JSON with `opts.out`)."""

    from koe.bench import machine
    from koe.bench.models import F5_SIZES, dit_forward_flops, f5_bench_model, parameter_counts

    sides, logs, results = start_run(opts, "f5_tts", "F5-TTS", wire.F5_CASES, F5_SIZES)
    if opts.bandwidth:
        progress("measuring the machine's fp32 matrix-product rate")
        results["machine"]["matmul_gflops"] = machine.matmul_gflops()
    reference = wire.write_reference_wav(logs / f"koe-bench-f5-reference-{os.getpid()}.wav")
    try:
        for size in opts.sizes:
            progress(f"F5-TTS {opts.variant} {size}: building or finding the model")
            folder = f5_bench_model(opts.variant, size, opts.models_root, seed=opts.seed)
            model = {"folder": str(folder), "variant": opts.variant, "weights_bytes": weights_bytes(folder, ("*.safetensors", "*.pt", "*.bin")),
                     "parameters": parameter_counts(folder)}  # fmt: skip
            per_size: dict = {"cases": {}, "models": {"f5_tts": model}}
            results["sizes"][size] = per_size
            workers: dict[str, Worker] = {}
            try:
                for side in sides:
                    workers[side] = Worker(side, opts.threads, logs / f"koe-bench-f5-{side}.log", family="f5_tts")
                loads = {}
                for side, w in workers.items():
                    progress(f"{size}: loading in {side}")
                    loads[side] = w.call(op="load", model=str(folder), threads=opts.threads)
                model["load"] = loads
                for case in opts.cases:
                    per_size["cases"][case] = _f5_case(opts, size, case, workers, loads, str(reference), folder, dit_forward_flops, progress)
                if opts.compare and opts.exact_check:
                    case = opts.cases[0]
                    checks = {}
                    for side, w in workers.items():
                        progress(f"{size} {case}: bits at 1 thread, NFE {opts.warmup_nfe} ({side})")
                        checks[side] = w.call(op="run", case=case, seed=opts.seed, reference=str(reference), nfe=opts.warmup_nfe, threads=1)
                    warm = per_size["cases"][case].get("warmup_sha1", {})
                    per_size["exact_1thread"] = {
                        "case": case, "nfe": opts.warmup_nfe, "threads": 1, "wave_equal": checks["koe"]["wave_sha1"] == checks["upstream"]["wave_sha1"],
                        **{f"{side}_sha1": c["wave_sha1"] for side, c in checks.items()}, "audio_samples": {side: c["audio_samples"] for side, c in checks.items()},
                        # the same request at opts.threads (the warm-up): does the thread count change the bits?
                        "same_bits_as_threads": {side: warm[side] == c["wave_sha1"] for side, c in checks.items() if side in warm},
                    }  # fmt: skip
            finally:
                for w in workers.values():
                    w.close()
    finally:
        reference.unlink(missing_ok=True)
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    results["machine"]["loadavg_end"] = list(os.getloadavg())
    if opts.bandwidth:  # the rate again: a shared machine drifts over a long run
        results["machine"]["matmul_gflops_end"] = machine.matmul_gflops()
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(json.dumps(results, indent=1))
    return results


def _f5_case(opts: BenchOptions, size: str, case: str, workers: dict, loads: dict, reference: str, folder: Path, flops, progress) -> dict:
    """One F5-TTS case: warm-ups at `warmup_nfe`, then `runs` interleaved timed requests, summary, ratios, hashes."""
    sides = list(workers)

    def request(side: str, **extra) -> dict:
        extra.setdefault("nfe", opts.nfe)
        return workers[side].call(op="run", case=case, seed=opts.seed, reference=reference, **extra)

    samples: dict[str, list[dict]] = {side: [] for side in sides}
    warm: dict[str, str] = {}
    for _ in range(opts.warmup):
        for side in sides:
            progress(f"{size} {case}: warm-up at NFE {opts.warmup_nfe} ({side})")
            warm[side] = request(side, nfe=opts.warmup_nfe)["wave_sha1"]
    for r in range(opts.runs):
        for side in sides if r % 2 == 0 else sides[::-1]:
            progress(f"{size} {case}: run {r + 1}/{opts.runs} ({side})")
            sample = request(side)
            sample["load_s"] = loads[side]["load_s"]
            if sample.get("forward_s"):
                sample["dit_gflops"] = sum(flops(folder, n, 2) for n in sample["seq_frames"]) / sample["forward_s"] / 1e9
            samples[side].append(sample)
    entry: dict = {side: {"summary": summarize(samples[side], F5_TIMED_KEYS), "runs": samples[side], "precision": loads[side].get("precision")} for side in sides}
    if opts.profile:
        for side in sides:
            progress(f"{size} {case}: {opts.profile} profile ({side})")
            entry[side]["profile"] = request(side, profile=opts.profile).get("profile")
    hashes = {side: {s["wave_sha1"] for s in samples[side]} for side in sides}
    for side in sides:
        entry[side]["deterministic"] = len(hashes[side]) == 1  # the same seed gave the same waveform in every run
    if opts.compare:
        entry["ratio"] = ratios(entry["koe"]["summary"], entry["upstream"]["summary"])
        entry["wave_equal"] = hashes["koe"] == hashes["upstream"]  # at opts.threads threads
    if warm:
        entry["warmup_sha1"] = warm  # at warmup_nfe and opts.threads: the 1-thread check compares with it
    return entry
