"""Load time and peak memory of a family's model, each load in a fresh process.

    python -m koe.bench.load [--family F] --size 0.6b [--size 1.7b] [--variant V] [--precision fp32] [--threads 2] [--runs 3] [--models DIR] [--out load.json]

The models are the benchmark's random-weight folders at the released sizes, stored as released
(`koe.bench.models`; default: the default family's default size and first model variant). Each
run is a new interpreter that imports koe, then times the family engine's `load` (what `koe bench`
reports as load_s) and reads its peak resident set (`VmHWM`), its resident set after the load, the
CPU seconds the load used (user + system, all threads: less sensitive than the wall time to other
work on a shared machine), and the bytes of the loaded tensors (every torch module the engine
holds, each storage once, plus kernel layers' own storage). The page cache is warm after the first
run (the file was just written or read): that is the case of a server loading a model it has
loaded before; the first run is reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from koe.bench import wire
from koe.bench.models import bench_model, weights_bytes

PRECISIONS = ("fp32", "bf16", "int8", "int4")


def measure_in_this_process(folder: str, precision: str, threads: int) -> dict:
    """One load here: seconds, peak and final RSS, RSS before, bytes of the loaded weights."""
    import torch

    from koe.engines.registry import detect, engine_class

    cls = engine_class(detect(folder).family)
    wire.set_threads(threads)
    before = wire.current_rss()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    engine = cls.load(folder, device="cpu", precision=precision)
    load_s = time.perf_counter() - started
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = used.ru_utime - cpu.ru_utime + used.ru_stime - cpu.ru_stime
    seen: set[int] = set()
    loaded = packed = 0
    for module in held_modules(engine):
        for t in [*module.parameters(recurse=False), *module.buffers(recurse=False)]:
            storage = t.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                loaded += storage.nbytes()
        packed += getattr(module, "weight_bytes", 0)  # kernel layers' own storage (exact strips, int8 / int4)
    return {
        "load_s": load_s,
        "cpu_s": cpu_s,
        "loadavg": os.getloadavg()[0],
        "peak_rss": wire.peak_rss(),
        "rss": wire.current_rss(),
        "rss_before": before,
        "loaded_bytes": loaded + packed,
        "packed_bytes": packed,
        "precision": engine.precision,
        "kernel": engine.kernel,
        "torch_threads": torch.get_num_threads(),
    }


def held_modules(engine, depth: int = 2) -> list:
    """Every torch module the engine holds, each once: modules among its attributes (and their
    attributes', `depth` levels down) and all their submodules."""
    import torch

    roots: list = []

    def visit(obj, left: int) -> None:
        for value in vars(obj).values():
            if isinstance(value, torch.nn.Module):
                roots.append(value)
            elif left and hasattr(value, "__dict__") and not isinstance(value, type) and type(value).__module__.startswith("koe."):
                visit(value, left - 1)

    visit(engine, depth)
    found: dict[int, object] = {}
    for root in roots:
        for m in root.modules():
            found.setdefault(id(m), m)
    return list(found.values())


def measure(folder: Path, precision: str, threads: int, runs: int) -> dict:
    """`runs` loads of `folder`, each in a fresh interpreter; their samples and medians."""
    samples = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-m", "koe.bench.load", "--child", str(folder), "--precision", precision, "--threads", str(threads)],
            capture_output=True,
            text=True,
            env=dict(os.environ, OMP_NUM_THREADS=str(threads)),
        )
        if proc.returncode != 0:
            raise RuntimeError(f"load of {folder} failed:\n{proc.stderr[-4000:]}")
        samples.append(json.loads(next(line[len(wire.PREFIX) :] for line in proc.stdout.splitlines() if line.startswith(wire.PREFIX))))
    median = {k: statistics.median(s[k] for s in samples) for k in ("load_s", "cpu_s", "peak_rss", "rss", "rss_before")}
    loaded = samples[0]["loaded_bytes"]
    return {
        "folder": str(folder),
        "precision": samples[0]["precision"],
        "threads": threads,
        "weights_on_disk": weights_bytes(folder),
        "loaded_bytes": loaded,
        "median": median,
        "peak_rss_over_loaded": median["peak_rss"] / loaded,
        "runs": samples,
    }


def main(argv: list[str] | None = None) -> int:
    from koe.bench.families import default_family, family_bench

    p = argparse.ArgumentParser(prog="python -m koe.bench.load", description=__doc__.split("\n\n")[0])
    p.add_argument("--family", help="model family (default: koe bench's default family)")
    p.add_argument("--size", action="append")
    p.add_argument("--variant", "--kind", dest="variant", help="the model variant (default: the family's first)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--models", type=Path, help="where random models are cached (default $KOE_HOME/bench or ~/.cache/koe/bench)")
    p.add_argument("--out", type=Path)
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(wire.PREFIX + json.dumps(measure_in_this_process(a.child, a.precision, a.threads)), flush=True)
        return 0
    family = a.family or default_family()
    bench = family_bench(family, SystemExit)
    variant = a.variant or (bench.model_variants or bench.variants)[0]
    results = {}
    for size in a.size or [bench.default_size]:
        try:
            folder = bench_model(family, variant, size, a.models)
        except ValueError as e:
            raise SystemExit(f"python -m koe.bench.load: {e}") from None
        r = measure(folder, a.precision, a.threads, a.runs)
        results[size] = r
        m = r["median"]
        print(
            f"{size} {variant} {r['precision']}: load {m['load_s']:.2f} s (min {min(x['load_s'] for x in r['runs']):.2f}; CPU {m['cpu_s']:.2f} s), peak RSS {m['peak_rss'] / 1e9:.2f} GB "
            f"({r['peak_rss_over_loaded']:.2f}x the {r['loaded_bytes'] / 1e9:.2f} GB loaded), RSS after {m['rss'] / 1e9:.2f} GB, "
            f"first run {r['runs'][0]['load_s']:.2f} s",
            file=sys.stderr,
        )
    text = json.dumps(results, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
