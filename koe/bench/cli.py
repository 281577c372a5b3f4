"""The command line of the benchmark and its printed table."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from koe.bench import wire
from koe.bench.runner import BenchError, BenchOptions, run_bench

COLUMNS = (
    ("load_s", "load s", 1), ("prompt_s", "prompt s", 1), ("prefill_s", "prefill s", 1),
    ("ms_per_frame", "ms/frame", 1), ("talker_ms_per_frame", "talker", 1), ("predictor_ms_per_frame", "predictor", 1),
    ("codec_s_per_audio_s", "codec s/s", 1), ("ttfa_s", "TTFA s", 1), ("frames_per_s", "frames/s", 1), ("peak_rss", "peak RSS GB", 1e-9),
)  # fmt: skip


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="koe bench", description="Benchmark koe's Qwen3-TTS on this machine (random weights at the released sizes).")
    p.add_argument("--size", action="append", choices=["tiny", "0.6b", "1.7b"], help="model size (repeatable; default 0.6b)")
    p.add_argument("--case", action="append", choices=list(wire.CASES), help="case to run (repeatable; default all)")
    p.add_argument("--frames", type=int, default=24, help="frames per run, end of speech disabled (default 24)")
    p.add_argument("--runs", type=int, default=3, help="timed runs per case after warm-up (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case, excluded (default 1)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads in every process (default: all cores)")
    p.add_argument("--precision", choices=["fp32", "bf16", "int8"], default="fp32", help="koe's precision (fp32 is exact)")
    p.add_argument("--compare", choices=["upstream"], help="also run qwen-tts 0.1.1 (its own venv and process), interleaved, and print ratios")
    p.add_argument("--upstream-precision", choices=["fp32", "bf16"], default="fp32")
    prof = p.add_mutually_exclusive_group()
    prof.add_argument("--profile", action="store_true", help="one extra run per case under cProfile (top functions in the JSON)")
    prof.add_argument("--torch-profile", action="store_true", help="one extra run per case under torch.profiler (op table in the JSON)")
    p.add_argument("--quick", action="store_true", help="tiny model, 4 frames, 1 run, no bandwidth probe: a smoke test in seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", type=Path, help="where random models are cached (default $KOE_HOME/bench or ~/.cache/koe/bench)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--print-profile", action="store_true", help="print the profile tables too")
    return p


def parse_options(argv: list[str] | None = None) -> tuple[BenchOptions, argparse.Namespace]:
    a = parser().parse_args(argv)
    opts = BenchOptions(
        sizes=a.size or (["tiny"] if a.quick else ["0.6b"]), cases=a.case or list(wire.CASES), frames=a.frames, runs=a.runs,
        warmup=a.warmup, threads=a.threads, precision=a.precision, compare=a.compare, upstream_precision=a.upstream_precision,
        profile="cprofile" if a.profile else "torch" if a.torch_profile else None, seed=a.seed, models_root=a.models, out=a.out,
    )  # fmt: skip
    if a.quick:
        opts.frames, opts.runs, opts.warmup, opts.bandwidth = (a.frames if a.frames != 24 else 4), 1, 1, False
    if opts.frames < 1 or opts.runs < 1:
        raise SystemExit("koe bench: --frames and --runs must be >= 1")
    return opts, a


def format_table(results: dict) -> str:
    """The summary as a plain-text table: one row per size, case and side (medians; min in brackets)."""
    lines = []
    m = results["machine"]
    bw = f", read {m['read_gbps']:.1f} GB/s, fp32 matvec {m['matvec_gbps']:.1f} GB/s" if "read_gbps" in m else ""
    lines.append(f"{m['cpu']} ({m['cores']} cores), torch {m['torch']}, {results['options']['threads']} threads{bw}")
    header = ["size", "case", "side", "prec"] + [c[1] for c in COLUMNS] + ["GB/s"]
    rows = [header]
    for size, per in results["sizes"].items():
        for case, entry in per["cases"].items():
            for side in ("koe", "upstream"):
                if side not in entry:
                    continue
                s = entry[side]["summary"]
                cells = [size, case, side, str(entry[side].get("precision", ""))]
                for key, _, scale in COLUMNS:
                    v = s.get(key)
                    cells.append("-" if v is None else f"{v['median'] * scale:.3g} ({v['min'] * scale:.3g})")
                gbps = entry[side].get("achieved_gbps")
                cells.append("-" if gbps is None else f"{gbps:.1f}")
                rows.append(cells)
            if "ratio" in entry:
                r = entry["ratio"]
                cells = [size, case, "koe/up", ""] + [("-" if key not in r else f"{r[key]:.2f}x") for key, _, _ in COLUMNS] + [""]
                rows.append(cells)
        if "batch8_speedup" in per:
            lines_extra = ", ".join(f"{side} {v:.2f}x" for side, v in per["batch8_speedup"].items())
            rows.append([size, "batch8/batch1 frames/s", lines_extra] + [""] * (len(header) - 3))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`koe bench` entry point; returns the exit status."""
    opts, a = parse_options(argv)
    try:
        results = run_bench(opts, progress=lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True))
    except BenchError as e:
        print(f"koe bench: {e}", file=sys.stderr)
        return 2
    print(format_table(results))
    if opts.compare:
        print("koe/up: koe's median over upstream's; below 1 is faster, except frames/s where above 1 is faster")
    if a.print_profile:
        for size, per in results["sizes"].items():
            for case, entry in per["cases"].items():
                for side in ("koe", "upstream"):
                    if entry.get(side, {}).get("profile"):
                        print(f"\n== {size} {case} {side} ==\n{entry[side]['profile']}")
    if opts.out:
        print(f"results: {opts.out}")
    return 0
