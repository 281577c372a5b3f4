"""Drives the benchmark: worker processes (koe and, with `--compare KEY`, the sides the family
declares: upstream in its own virtualenv, peers in theirs), runs interleaved, and the summary
(median and min of the timed runs, ratios).

Strategy (each family's `run` follows it, with these helpers): each model gets fresh workers, so
load time and peak memory are measured in a process that has held nothing else. Each case runs
`warmup` times (excluded), then `runs` times, alternating the order of the sides (koe, the
compared ones, then the reverse) so slow drift of the machine hits every side alike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

from koe.bench import wire
from koe.bench.families import family_bench, import_target
from koe.engines.benchmark import FamilyBench, Side

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


class BenchError(RuntimeError):
    """The benchmark cannot run as asked (no upstream venv, a worker failed); the message says why."""


@dataclass
class BenchOptions:
    """What to run. None in `family`, `sizes`, `cases` or `variant`: the family's default
    (`resolve`). `family_options`: the values of the family's own flags (`FamilyBench.flags`), also
    read as attributes (`opts.frames`)."""

    sizes: list[str] | None = None
    cases: list[str] | None = None
    runs: int = 3
    warmup: int = 1
    threads: int = os.cpu_count() or 1
    precision: str = "fp32"
    compare: list[str] | str | None = None  # the compared sides: "upstream", or a peer the family declares (a list, or one name)
    upstream_precision: str = "fp32"
    profile: str | None = None  # "cprofile" | "torch"
    seed: int = 0
    models_root: Path | None = None
    out: Path | None = None
    bandwidth: bool = True  # probe the machine (bandwidth, matmul rate); off with --quick
    family: str | None = None
    variant: str | None = None
    family_options: dict = field(default_factory=dict)

    def __getattr__(self, name: str):
        options = self.__dict__.get("family_options") or {}
        if name in options:
            return options[name]
        raise AttributeError(name)

    def as_json(self) -> dict:
        """The options as the results' `options` say them: the family's flags beside the others."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "family_options"}
        out.update(self.family_options)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in out.items()}


def resolve(opts: BenchOptions) -> FamilyBench:
    """`opts` with the family's defaults filled in where None (family, sizes, cases, variant, its
    flags' defaults); returns the family's declaration."""
    bench = family_bench(opts.family, BenchError)
    if opts.family is None:
        from koe.bench.families import default_family

        opts.family = default_family()
    opts.sizes = list(opts.sizes or [bench.default_size])
    opts.cases = list(opts.cases or bench.default_cases)
    if opts.variant is None and bench.variants:
        opts.variant = bench.variants[0]
    for flag in bench.flags:
        opts.family_options.setdefault(flag.key, flag.default)
    return bench


def side(family: str, key: str) -> Side:
    sides = family_bench(family, BenchError).sides
    if key not in sides:
        raise BenchError(f"--family {family} has no --compare {key}; it compares: {', '.join(sides) or 'nothing'}")
    return sides[key]


def side_python(family: str, key: str) -> str:
    """The Python of a compared side's virtualenv: its environment variable, else the folder its make target builds."""
    s = side(family, key)
    path = os.environ.get(s.python_env) or str(ROOT / s.venv / "bin" / "python")
    if not Path(path).exists():
        raise BenchError(f"--compare {key} needs {s.holds} in its own virtualenv, not found at {path}: run `make {s.make}` or set {s.python_env}")
    return path


def side_worker(family: str, key: str) -> Path:
    """A compared side's worker script; it lives in the source tree (scripts/), beside the venvs."""
    path = ROOT / side(family, key).worker
    if not path.exists():
        raise BenchError(f"--compare {key} runs from a source checkout of koe: {path} not found")
    return path


def compared(opts: BenchOptions) -> list[str]:
    """The sides `opts.compare` names, in order, each once (`None` or empty: none; one name: that one)."""
    names = [opts.compare] if isinstance(opts.compare, str) else list(opts.compare or [])
    sides = family_bench(opts.family, BenchError).sides
    wrong = [n for n in names if n not in sides]
    if wrong:
        raise BenchError(f"--compare takes {' or '.join(repr(p) for p in sides) or 'nothing'} here (got {wrong[0]!r})")
    return list(dict.fromkeys(names))


class Worker:
    """One benchmark worker process speaking `wire`'s line protocol; its stderr goes to a log file."""

    def __init__(self, side: str, threads: int, log: Path, family: str, worker: str | None = None) -> None:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        if side == "koe":  # the family's worker class (`worker`: "module:Class"; default its declaration's)
            argv = [sys.executable, "-m", "koe.bench.koe_worker", family] + ([worker] if worker else [])
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        else:  # a peer's own settings are its host's defaults (its worker applies them before torch loads)
            argv = [side_python(family, side), str(side_worker(family, side))]
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
                    raise BenchError(
                        f"{self.side} worker: {command.get('op')} {command.get('case', '')} failed: {reply['error']}\n{reply.get('traceback', '')}"
                    )
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


@contextmanager
def loaded_workers(
    opts: BenchOptions, sides: list[str], folder: Path, logs: Path, label: str, progress, upstream_precision: str | None = None
) -> Iterator[tuple[dict, dict]]:
    """Fresh workers for one model, as every family's run starts them: one per side (koe first; the
    koe side's class is the family's declared `worker`), each logging to `logs`, each loading
    `folder` at `opts.threads` threads, koe at `opts.precision` and the compared sides at
    `upstream_precision` (default `opts.upstream_precision`); yields (workers, load replies) and
    closes the workers after."""
    koe_worker = family_bench(opts.family, BenchError).worker or "koe.bench.contract:ContractWorker"  # named here: the declaration read in this process
    workers: dict[str, Worker] = {}
    try:
        for side in sides:
            workers[side] = Worker(side, opts.threads, logs / f"koe-bench-{opts.family}-{side}.log", opts.family, koe_worker)
        loads = {}
        for side, w in workers.items():
            progress(f"{label}: loading in {side}")
            precision = opts.precision if side == "koe" else upstream_precision or opts.upstream_precision
            loads[side] = w.call(op="load", model=str(folder), threads=opts.threads, precision=precision)
        yield workers, loads
    finally:
        for w in workers.values():
            w.close()


def time_case(opts: BenchOptions, workers: dict, loads: dict, cmd: dict, label: str, progress, keys, warm: dict | None = None, on_sample=None):
    """One case, as every family's run times it: `opts.warmup` warm-up calls of `warm` (default
    `cmd`) per side, excluded; then `opts.runs` timed calls of `cmd`, the sides' order alternating
    (koe first, then last) so a drifting machine hits every side alike; each sample gets its
    side's `load_s`, then `on_sample(side, sample, call_s)` (`call_s`: the whole call, seen from
    here) may add to it; with `opts.profile`, one more call per side, profiled. Returns (entry:
    per side the summary of `keys` (`summarize`), the runs, the precision loaded, the profile;
    the samples per side; the last warm-up reply per side)."""
    sides = list(workers)
    samples: dict[str, list[dict]] = {side: [] for side in sides}
    warmed: dict[str, dict] = {}
    for _ in range(opts.warmup):
        for side, w in workers.items():
            progress(f"{label}: warm-up ({side})")
            warmed[side] = w.call(**(warm or cmd))
    for r in range(opts.runs):
        for side in sides if r % 2 == 0 else sides[::-1]:
            progress(f"{label}: run {r + 1}/{opts.runs} ({side})")
            started = time.perf_counter()
            sample = workers[side].call(**cmd)
            call_s = time.perf_counter() - started
            sample["load_s"] = loads[side]["load_s"]
            if on_sample is not None:
                on_sample(side, sample, call_s)
            samples[side].append(sample)
    entry: dict = {side: {"summary": summarize(samples[side], keys), "runs": samples[side], "precision": loads[side].get("precision")} for side in sides}
    if opts.profile:
        for side in sides:
            progress(f"{label}: {opts.profile} profile ({side})")
            entry[side]["profile"] = workers[side].call(**cmd, profile=opts.profile).get("profile")
    return entry, samples, warmed


def run_sizes(
    opts: BenchOptions, sides: list[str], logs: Path, results: dict, progress, case_cmd, timed_keys, parameter_counts, upstream_precision: str | None = None
) -> None:
    """The loop a family's run over whole requests shares: per size, the model built or found (its
    weights' bytes and `parameter_counts(folder)`), fresh workers, each case timed (`time_case`) with
    `case_cmd(case)`; with `--compare`, the ratios and `wave_equal` (every run of both sides gave one
    and the same waveform). Fills `results["sizes"]`."""
    from koe.bench.models import bench_model, weights_bytes

    for size in opts.sizes:
        progress(f"{opts.variant} {size}: building or finding the model")
        folder = bench_model(opts.family, opts.variant, size, opts.models_root, seed=opts.seed)
        model = {"folder": str(folder), "variant": opts.variant, "weights_bytes": weights_bytes(folder), "parameters": parameter_counts(folder)}
        per_size: dict = {"cases": {}, "models": {opts.family: model}}
        results["sizes"][size] = per_size
        with loaded_workers(opts, sides, folder, logs, f"{opts.variant} {size}", progress, upstream_precision=upstream_precision) as (workers, loads):
            model["load"] = loads
            for case in opts.cases:
                entry, samples, _ = time_case(opts, workers, loads, case_cmd(case), f"{size} {case}", progress, timed_keys)
                if opts.compare:
                    entry["ratio"] = ratios(entry["koe"]["summary"], entry["upstream"]["summary"])
                    hashes = {side: {s["wave_sha1"] for s in samples[side]} for side in sides}
                    entry["wave_equal"] = hashes["koe"] == hashes["upstream"] and len(hashes["koe"]) == 1
                per_size["cases"][case] = entry


def summarize(samples: list[dict], keys: tuple[str, ...]) -> dict:
    """Median and min of each timed key over the runs (keys absent or None in a run are skipped)."""
    out: dict = {}
    for key in keys:
        values = [s[key] for s in samples if s.get(key) is not None]
        if values:
            out[key] = {"median": statistics.median(values), "min": min(values), "n": len(values)}
    return out


def run_bench(opts: BenchOptions, progress=lambda msg: None) -> dict:
    """Run the benchmark of `opts.family` (its declared `run`) and return its results (also written
    as JSON when `opts.out` is set)."""
    from koe.bench import kit

    bench = resolve(opts)
    return import_target(bench.run or "koe.bench.contract:run")(kit, opts, progress)


def compare_sides(entry: dict, samples: dict[str, list[dict]], peers: list[str], hash_key: str = "codes_sha1") -> None:
    """Ratios and same-output verdicts of one case into `entry`: for upstream `ratio` and
    `codes_equal` (the shape older results have), and for every compared side `ratios[side]` (koe /
    side) and `codes_equal_to[side]` (its `hash_key` hashes are koe's; absent where a side made none)."""
    hashes = {side: {s.get(hash_key) for s in runs} for side, runs in samples.items()}
    for side in peers:
        entry.setdefault("ratios", {})[side] = ratios(entry["koe"]["summary"], entry[side]["summary"])
        if None not in hashes["koe"] | hashes[side]:  # same seed, same codes? (expected in fp32)
            entry.setdefault("codes_equal_to", {})[side] = hashes["koe"] == hashes[side]
    if "upstream" in peers:
        entry["ratio"] = entry["ratios"]["upstream"]
        if "upstream" in entry.get("codes_equal_to", {}):
            entry["codes_equal"] = entry["codes_equal_to"]["upstream"]


def ratios(koe: dict, upstream: dict) -> dict:
    """koe / the other side for each timed key both sides have (medians): below 1 means koe is faster
    (for rates, such as frames per second, above 1 means koe is faster)."""
    return {k: koe[k]["median"] / upstream[k]["median"] for k in koe if k in upstream and upstream[k]["median"]}


def start_run(opts: BenchOptions, bench: FamilyBench | None = None) -> tuple[list[str], Path, dict]:
    """What every family's bench run begins with: the cases, sizes and `--compare` checked (each
    compared side's venv and worker must exist), torch's threads set; returns (sides, log folder,
    results header)."""
    import torch

    from koe.bench import machine

    bench = bench or resolve(opts)
    for case in opts.cases:
        if case not in bench.cases:
            raise BenchError(f"unknown {opts.family} case {case!r}; cases: {list(bench.cases)}")
    for size in opts.sizes:
        if size not in bench.sizes:
            raise BenchError(f"unknown {opts.family} size {size!r}; sizes: {list(bench.sizes)}")
    peers = compared(opts)
    for key in peers:
        side_python(opts.family, key)
        side_worker(opts.family, key)
    torch.set_num_threads(opts.threads)
    logs = Path(opts.out).parent if opts.out else Path(os.environ.get("TMPDIR", "/tmp"))
    logs.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "family": opts.family,
        "options": opts.as_json(),
        "machine": machine.describe(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "sizes": {},
    }
    return ["koe"] + peers, logs, results


def finish_run(opts: BenchOptions, results: dict) -> dict:
    """What every family's bench run ends with: the end time and load average; the JSON written to `opts.out`."""
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    results["machine"]["loadavg_end"] = list(os.getloadavg())
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(json.dumps(results, indent=1))
    return results
