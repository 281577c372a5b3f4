"""Write a family's golden files again: upstream's outputs that its tests compare with bit for bit.

    python scripts/goldens.py FAMILY [TOPIC ...]      # make goldens-FAMILY [TOPICS="a b"]
    python scripts/goldens.py FAMILY --list           # the family's topics
    python scripts/goldens.py FAMILY TOPIC --keep     # keep each topic's temp folder, and say where
    python scripts/goldens.py FAMILY --into DIR       # write DIR/<topic>.npz, not the committed ones

A topic is a pair of scripts: `tests/engines/<family>/golden_<topic>.py` (koe's side, no upstream:
`write_inputs(folder)` writes the weights, configs, audio and texts upstream needs) and
`<the family's oracle scripts>/golden_<topic>.py` (upstream's side, run with the oracle's python
as `golden_<topic>.py <folder> <out.npz>`). Each topic gets a temp folder: koe's side writes the
inputs in this process, then the oracle script runs in a child process (its working folder a fresh
one beside them, one thread, `MKL_CBWR=AUTO,STRICT`, hubs offline) and its npz becomes
`tests/engines/<family>/goldens/<topic>.npz`. A golden must carry the hashes of the weights its
inputs recorded in `<folder>/state_sha256.txt`: a line `HASH` is the npz's `state_sha256`, a line
`NAME HASH` its `NAME.state_sha256` (a topic with several modules or cases); a golden whose arrays did not change keeps its old file
(an npz's bytes carry the time it was written), so a rerun changes nothing in git.

A family whose oracle declares `recorded` test paths also has recorded oracle runs
(`tests/engines/<family>/oracle_runs/`, see tests/oracle_harness.py): the pseudo-topic `runs`
(`make goldens-FAMILY TOPICS=runs`, and part of every run that names no topic) runs those tests
with `KOE_ORACLE_RECORD=FAMILY` on WORKERS pytest workers: each oracle run they make is read from
this CPU kind's old recordings when its key is there, else run live, into
`oracle_runs.recording/`, which replaces `oracle_runs/<this CPU's kind>/` when every test passed
(tests/cpu_kind.py); another kind's folder is dropped unless it holds the same runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")  # before torch loads (koe's side builds weights)

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # koe's side may import the tests' helpers, as under pytest

from cpu_kind import cpu_kind, golden_cpu  # noqa: E402

from koe.engines.oracle import UpstreamOracle, declared  # noqa: E402

LARGE = 512 * 1024  # a golden past this is reported: keep them small (tiny models, short inputs)


def tests_folder(family: str) -> Path:
    return ROOT / "tests" / "engines" / family


def topics(family: str) -> list[str]:
    """The family's topics: every `tests/engines/<family>/golden_<topic>.py`, sorted."""
    return sorted(p.stem.removeprefix("golden_") for p in tests_folder(family).glob("golden_*.py"))


def oracle_python(o: UpstreamOracle) -> str:
    path = os.environ.get(o.python_env) or str(ROOT / o.venv / "bin" / "python")
    if not Path(path).exists():
        raise SystemExit(f"no oracle python at {path}: run `make oracle-...` (or set {o.python_env})")
    return path


def write_inputs(family: str, topic: str, folder: Path) -> None:
    """koe's side of `topic`, in this process, one torch thread."""
    import torch

    torch.set_num_threads(1)
    path = tests_folder(family) / f"golden_{topic}.py"
    spec = importlib.util.spec_from_file_location(f"_golden_{family}_{topic}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_inputs(folder)


def run_oracle(o: UpstreamOracle, python: str, topic: str, folder: Path, out: Path, cwd: Path) -> subprocess.CompletedProcess:
    scripts = ROOT / o.scripts
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (scripts / "stubs", scripts) if p.is_dir())
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MKL_CBWR="AUTO,STRICT", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [python, str(scripts / f"golden_{topic}.py"), str(folder), str(out)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k]) for k in a)


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def check_hashes(topic: str, recorded: Path, arrays: dict[str, np.ndarray]) -> None:
    """The golden carries every weight hash its inputs recorded (see the module's doc)."""
    if not recorded.is_file():
        return
    for line in recorded.read_text().splitlines():
        words = line.split()
        if not words:
            continue
        key = "state_sha256" if len(words) == 1 else f"{words[0]}.state_sha256"
        got = str(arrays[key]).strip() if key in arrays else "(none)"
        if got != words[-1]:
            raise RuntimeError(f"golden {topic}: its {key} is {got}, the inputs' is {words[-1]}: copy it from {recorded.name} into the npz")


def regenerate(family: str, topic: str, o: UpstreamOracle, python: str, keep: bool, into: Path | None = None) -> str:
    """One topic: returns what happened, in words (raises on a failure)."""
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f"koe-golden-{family}-{topic}-"))
    try:
        folder, work, out = tmp / "inputs", tmp / "work", tmp / "out.npz"
        folder.mkdir()
        work.mkdir()
        write_inputs(family, topic, folder)
        proc = run_oracle(o, python, topic, folder, out, work)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"{o.scripts}/golden_{topic}.py failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-6000:]}")
        arrays = load(out)
        check_hashes(topic, folder / "state_sha256.txt", arrays)
        golden = (into or tests_folder(family) / "goldens" / golden_cpu(tests_folder(family) / f"golden_{topic}.py")) / f"{topic}.npz"
        if golden.is_file() and same(load(golden), arrays):
            status = "unchanged (file kept)"
        else:
            status = "changed" if golden.is_file() else "new"
            golden.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out, golden)
        size = golden.stat().st_size
        note = f"; over {LARGE // 1024} KB: make it smaller" if size > LARGE else ""
        kept = f"; inputs kept in {tmp}" if keep else ""
        where = golden.relative_to(ROOT) if golden.is_relative_to(ROOT) else golden
        return f"{where}: {status}, {len(arrays)} arrays, {size / 1024:.0f} KB, {time.perf_counter() - start:.1f} s{note}{kept}"
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


RUNS = "runs"  # the pseudo-topic of a family's recorded oracle runs


def record_runs(family: str, o: UpstreamOracle, python: str, workers: int) -> str:
    """Record the family's oracle runs again (see the module's doc): returns what happened, in words."""
    start = time.perf_counter()
    import recorded_runs  # tests/ (with pytest, which the recording pass needs anyway)

    runs, staging = tests_folder(family) / recorded_runs.FOLDER, tests_folder(family) / recorded_runs.STAGING
    shutil.rmtree(staging, ignore_errors=True)
    env = dict(os.environ, KOE_ORACLE_RECORD=family, **{o.python_env: python})
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers), "--dist", "loadfile", *o.recorded]
    print(f"{RUNS}: {' '.join(cmd[1:])} (KOE_ORACLE_RECORD={family})", flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"the tests failed (exit {proc.returncode}): {runs.relative_to(ROOT)} kept as it was")
    new, old, stale = recorded_runs.commit(staging, runs, cpu_kind())
    final = runs / cpu_kind()
    size = sum(p.stat().st_size for p in final.glob("*.safetensors"))
    took = time.perf_counter() - start
    dropped = f"; another CPU kind's, stale, dropped: {', '.join(stale)}" if stale else ""
    return f"{final.relative_to(ROOT)}: {len(new)} runs ({len(new - old)} new, {len(old - new)} gone), {size / 2**20:.1f} MB, {took:.0f} s{dropped}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("family")
    parser.add_argument("topics", nargs="*", help="default: every tests/engines/FAMILY/golden_<topic>.py")
    parser.add_argument("--list", action="store_true", help="print the topics and stop")
    parser.add_argument("--keep", action="store_true", help="keep each topic's temp folder")
    parser.add_argument("--into", type=Path, help="write the goldens into this folder instead")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WORKERS", "2")), help="pytest workers for the recorded runs")
    args = parser.parse_args(argv)
    oracles = declared()
    if args.family not in oracles:
        raise SystemExit(f"no oracle is declared for {args.family!r} (declared: {', '.join(oracles)})")
    o = oracles[args.family]
    known = topics(args.family) + ([RUNS] if o.recorded else [])
    if args.list:
        print("\n".join(known))
        return 0
    unknown = [t for t in args.topics if t not in known]
    if unknown:
        raise SystemExit(f"no tests/engines/{args.family}/golden_<topic>.py for {', '.join(unknown)} (topics: {', '.join(known) or 'none'})")
    chosen = args.topics or known
    if not chosen:
        print(f"{args.family}: no golden topics (tests/engines/{args.family}/golden_*.py) and no recorded runs")
        return 0
    python = oracle_python(o)
    failed = []
    for topic in chosen:
        if topic == RUNS:
            if args.into:
                raise SystemExit("--into writes golden topics; recorded runs are written in place")
            try:
                print(f"{RUNS}: {record_runs(args.family, o, python, args.workers)}", flush=True)
            except Exception as e:
                print(f"{RUNS}: FAILED: {e}", flush=True)
                failed.append(topic)
            continue
        missing = ROOT / o.scripts / f"golden_{topic}.py"
        if not missing.is_file():
            print(f"{topic}: FAILED: no oracle script {missing.relative_to(ROOT)}", flush=True)
            failed.append(topic)
            continue
        try:
            print(f"{topic}: {regenerate(args.family, topic, o, python, args.keep, args.into and args.into.resolve())}", flush=True)
        except Exception as e:  # one topic's failure is reported, the others still run
            print(f"{topic}: FAILED: {e}", flush=True)
            failed.append(topic)
    if failed:
        print(f"{len(failed)} of {len(chosen)} topics failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
