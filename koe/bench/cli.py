"""The command line of the benchmark and its printed tables (Qwen3-TTS, F5-TTS with `--family f5_tts`, VoxCPM with `--family voxcpm`)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap
from pathlib import Path

from koe.bench import wire
from koe.bench.runner import BenchError, BenchOptions, compared, run_bench

COLUMNS = (
    ("load_s", "load s", 1), ("call_s", "call s", 1), ("prompt_s", "prompt s", 1), ("prefill_s", "prefill s", 1),
    ("ms_per_frame", "ms/frame", 1), ("talker_ms_per_frame", "talker", 1), ("predictor_ms_per_frame", "predictor", 1),
    ("codec_s_per_audio_s", "codec s/s", 1), ("ttfa_s", "TTFA s", 1), ("stream_rtf", "RTF", 1), ("frames_per_s", "frames/s", 1), ("peak_rss", "peak RSS GB", 1e-9),
)  # fmt: skip
F5_COLUMNS = (
    ("load_s", "load s", 1), ("prompt_s", "prompt s", 1), ("total_s", "total s", 1), ("rtf", "s/audio s", 1),
    ("text_s", "text s", 1), ("dit_s", "DiT s", 1), ("ms_per_step", "ms/step", 1), ("vocoder_s", "vocoder s", 1),
    ("dit_gflops", "GFLOP/s", 1), ("peak_rss", "peak RSS GB", 1e-9),
)  # fmt: skip
DEFAULT_SIZE = {"qwen3_tts": "0.6b", "f5_tts": "real", "voxcpm": "real"}
SIDE_NAMES = {"upstream": "up", "mizuoto": "peer"}  # the ratio rows: koe/up, koe/peer


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="koe bench", description="Benchmark koe's Qwen3-TTS, F5-TTS or VoxCPM on this machine (random weights at the released sizes).")
    p.add_argument("--family", choices=["qwen3_tts", "f5_tts", "voxcpm"], default="qwen3_tts", help="model family (default qwen3_tts)")
    p.add_argument("--size", action="append", choices=["tiny", "0.6b", "1.7b", "real"],
                   help="model size (repeatable): qwen3_tts tiny, 0.6b (default), 1.7b; f5_tts tiny, real (default: DiT dim 1024 x 22); voxcpm tiny, real (default: the released sizes)")
    p.add_argument("--case", action="append", choices=list(dict.fromkeys([*wire.CASES, *wire.F5_CASES, *wire.VOX_CASES])),
                   help=f"case to run (repeatable); qwen3_tts: {', '.join(wire.CASES)} (default all); "
                        f"f5_tts: {', '.join(wire.F5_CASES)} (default {', '.join(wire.F5_DEFAULT_CASES)}); voxcpm: {', '.join(wire.VOX_CASES)} (default all)")
    p.add_argument("--frames", type=int, default=24, help="qwen3_tts: frames per run, end of speech disabled (default 24)")
    p.add_argument("--variant", choices=["F5TTS_v1_Base", "F5TTS_Base", "VoxCPM2", "VoxCPM1.5"],
                   help="f5_tts: F5TTS_v1_Base (default) or F5TTS_Base; voxcpm: VoxCPM2 (default) or VoxCPM1.5")
    p.add_argument("--patches", type=int, default=16, help="voxcpm: latent patches per request, both sides (min_len = max_len; default 16)")
    p.add_argument("--timesteps", type=int, default=10, help="voxcpm: CFM steps per patch (default 10, upstream's)")
    p.add_argument("--warmup-nfe", type=int, default=2, help="f5_tts: NFE steps of a warm-up request and of the 1-thread bit check (default 2)")
    p.add_argument("--nfe", type=int, help="f5_tts: run every case at this NFE instead of its own (e.g. a quick profile)")
    p.add_argument("--no-exact-check", action="store_true", help="f5_tts: skip the 1-thread request per side whose waveforms are compared")
    p.add_argument("--runs", type=int, default=3, help="timed runs per case after warm-up (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case, excluded (default 1)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads in every process (default: all cores)")
    p.add_argument("--precision", choices=["fp32", "bf16", "int8", "int4"], default="fp32", help="koe's precision (fp32 is exact; int8 and int4 on koe's CPU kernels)")
    p.add_argument("--compare", action="append", choices=["upstream", "mizuoto"],
                   help="also run upstream (qwen-tts 0.1.1 or f5-tts 1.1.22) or, qwen3_tts only, the peer runtime mizuoto 0.2.16, each in its own venv "
                        "and process, interleaved, and print ratios; repeatable: --compare upstream --compare mizuoto runs all three")
    p.add_argument("--upstream-precision", choices=["fp32", "bf16"], default="fp32", help="upstream's precision (and mizuoto's, with --compare mizuoto)")
    prof = p.add_mutually_exclusive_group()
    prof.add_argument("--profile", action="store_true", help="one extra run per case under cProfile (top functions in the JSON)")
    prof.add_argument("--torch-profile", action="store_true", help="one extra run per case under torch.profiler (op table in the JSON)")
    p.add_argument("--quick", action="store_true", help="tiny model, 4 frames (qwen3_tts), 1 run, no machine probe: a smoke test in seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", type=Path, help="where random models are cached (default $KOE_HOME/bench or ~/.cache/koe/bench)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--print-profile", action="store_true", help="print the profile tables too")
    return p


def parse_options(argv: list[str] | None = None) -> tuple[BenchOptions, argparse.Namespace]:
    p = parser()
    a = p.parse_args(argv)
    f5, vox = a.family == "f5_tts", a.family == "voxcpm"
    cases = a.case or list(wire.F5_DEFAULT_CASES if f5 else wire.VOX_DEFAULT_CASES if vox else wire.CASES)
    known = wire.F5_CASES if f5 else wire.VOX_CASES if vox else wire.CASES
    wrong = [c for c in cases if c not in known]
    if wrong:
        p.error(f"--family {a.family} has no case {wrong[0]!r}; its cases: {', '.join(known)}")
    sizes = a.size or (["tiny"] if a.quick else [DEFAULT_SIZE[a.family]])
    wrong = [s for s in sizes if s not in (("tiny", "real") if f5 or vox else ("tiny", "0.6b", "1.7b"))]
    if wrong:
        p.error(f"--family {a.family} has no size {wrong[0]!r}")
    if f5 and (a.precision != "fp32" or a.upstream_precision != "fp32"):
        p.error("--family f5_tts runs in float32 only (upstream's precision on the CPU)")
    variants = ("VoxCPM2", "VoxCPM1.5") if vox else ("F5TTS_v1_Base", "F5TTS_Base")
    if a.variant is not None and a.variant not in variants:
        p.error(f"--family {a.family} has no variant {a.variant!r}; its variants: {', '.join(variants)}")
    variant = a.variant or variants[0]
    if vox and (a.precision not in ("fp32", "bf16") or a.upstream_precision != "fp32"):
        p.error("--family voxcpm: --precision fp32 (exact) or bf16, which upstream then runs too (its release config); no --upstream-precision")
    opts = BenchOptions(
        sizes=sizes, cases=cases, frames=a.frames, runs=a.runs,
        warmup=a.warmup, threads=a.threads, precision=a.precision, compare=list(dict.fromkeys(a.compare)) if a.compare else None, upstream_precision=a.upstream_precision,
        profile="cprofile" if a.profile else "torch" if a.torch_profile else None, seed=a.seed, models_root=a.models, out=a.out,
        family=a.family, variant=variant, warmup_nfe=a.warmup_nfe, patches=a.patches, timesteps=a.timesteps, nfe=a.nfe, exact_check=not a.no_exact_check,
    )  # fmt: skip
    if a.quick:
        opts.frames, opts.runs, opts.warmup, opts.bandwidth = (a.frames if a.frames != 24 else 4), 1, 1, False
    if a.compare and "mizuoto" in a.compare and (f5 or vox):
        p.error("--compare mizuoto compares Qwen3-TTS only (--family qwen3_tts)")
    if a.quick and vox:
        opts.patches = a.patches if a.patches != 16 else 4
        opts.timesteps = a.timesteps if a.timesteps != 10 else 2
    if opts.patches < 1 or opts.timesteps < 1:
        raise SystemExit("koe bench: --patches and --timesteps must be >= 1")
    if opts.frames < 1 or opts.runs < 1 or opts.warmup_nfe < 1 or (opts.nfe is not None and opts.nfe < 1):
        raise SystemExit("koe bench: --frames, --runs, --warmup-nfe and --nfe must be >= 1")
    return opts, a


def format_table(results: dict, width: int | None = None) -> str:
    """The summary as plain-text tables no wider than `width` (default: the terminal's): one row per size, case and
    side, each value the median of the timed runs (the JSON has every run and the minimums); see `lay_out`."""
    if results.get("family") == "f5_tts":
        return format_f5_table(results, width)
    if results.get("family") == "voxcpm":
        from koe.bench.voxcpm_bench import format_voxcpm_table

        return format_voxcpm_table(results, width)
    m = results["machine"]
    bw = f", read {m['read_gbps']:.1f} GB/s, fp32 matvec {m['matvec_gbps']:.1f} GB/s" if "read_gbps" in m else ""
    title = f"{m['cpu']} ({m['cores']} cores), torch {m['torch']}, {results['options']['threads']} threads{bw}"
    header = ["size", "case", "side", "prec"] + [c[1] for c in COLUMNS] + ["GB/s", "codes"]
    rows = [header]
    notes = []
    for size, per in results["sizes"].items():
        for case, entry in per["cases"].items():
            same = entry.get("codes_equal_to") or ({"upstream": entry["codes_equal"]} if "codes_equal" in entry else {})
            for side in ("koe", *SIDE_NAMES):
                if side not in entry:
                    continue
                s = entry[side]["summary"]
                cells = [size, case, side, str(entry[side].get("precision", ""))]
                cells += [median(s.get(key), scale) for key, _, scale in COLUMNS]
                gbps = entry[side].get("achieved_gbps")
                cells.append("-" if gbps is None else f"{gbps:.1f}")
                cells.append("" if side == "koe" else "-" if side not in same else "= koe" if same[side] else "DIFFERENT")
                rows.append(cells)
                if entry[side].get("unsupported"):
                    notes.append(f"{size} {case}: {side}: unsupported ({entry[side]['unsupported']})")
            for side, r in side_ratios(entry).items():
                rows.append([size, case, f"koe/{SIDE_NAMES.get(side, side)}", ""] + [("-" if key not in r else f"{r[key]:.2f}x") for key, _, _ in COLUMNS] + ["", ""])
        if "batch8_speedup" in per:
            notes.append(f"{size} batch8/batch1 frames/s: " + ", ".join(f"{side} {v:.2f}x" for side, v in per["batch8_speedup"].items()))
    return "\n".join(lay_out(title, rows, 4, width) + notes)


def median(v: dict | None, scale: float = 1) -> str:
    """A summary's median, 3 significant digits ("-" when it was not measured)."""
    return "-" if v is None else f"{v['median'] * scale:.3g}"


def lay_out(title: str, rows: list[list[str]], keys: int, width: int | None = None) -> list[str]:
    """`title` (wrapped) and `rows` (the first is the header) as lines no wider than `width` where the key columns leave room.

    The first `keys` columns name a row (size, case, side, ...): one holding a single value in every
    row is said once above the table instead. A measure column no row has a value in ("-" or "") is
    left out. The measures that are left are split into as few tables as fit, each with the key columns."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    header, body = rows[0], rows[1:]
    said = [f"{header[i]} {vals.pop()}" for i in range(keys) if len(vals := {r[i] for r in body} - {""}) == 1]
    key_cols = [i for i in range(keys) if len({r[i] for r in body} - {""}) != 1]
    measures = [i for i in range(keys, len(header)) if any(r[i] not in ("-", "") for r in body)]
    widths = {i: max(len(r[i]) for r in rows) for i in range(len(header))}
    room = width - sum(widths[i] + 2 for i in key_cols)
    blocks: list[list[int]] = [[]]
    for i in measures:
        if blocks[-1] and sum(widths[j] + 2 for j in blocks[-1]) + widths[i] > room:
            blocks.append([])
        blocks[-1].append(i)
    lines = textwrap.wrap(title, width) + ([", ".join(said)] if said else [])
    for n, block in enumerate(blocks):
        if n:
            lines.append("")
        for r in rows:
            lines.append("  ".join(r[i].ljust(widths[i]) for i in key_cols + block).rstrip())
    return lines


def side_ratios(entry: dict) -> dict[str, dict]:
    """koe / side of one case for each compared side (`ratios`; results from before it have only `ratio`, upstream's)."""
    if "ratios" in entry:
        return entry["ratios"]
    return {"upstream": entry["ratio"]} if "ratio" in entry else {}


def ratio_legend(family: str, compared: list[str]) -> str:
    """The line under the table that says how to read its ratio rows."""
    names = {"upstream": "upstream's", "mizuoto": "mizuoto's"}
    rows = ", ".join(f"koe/{SIDE_NAMES[side]}" for side in compared)
    over = " / ".join(names[side] for side in compared)
    faster = {"f5_tts": ", except GFLOP/s where above 1 is faster", "voxcpm": ""}.get(family, ", except frames/s where above 1 is faster")
    return f"{rows}: koe's median over {over}; below 1 is faster{faster}"


def format_f5_table(results: dict, width: int | None = None) -> str:
    """F5-TTS: one row per size, case and side (medians), ratios, bit checks; laid out by `lay_out`."""
    m, o = results["machine"], results["options"]
    rate = f", fp32 matmul {m['matmul_gflops']:.0f} GFLOP/s" if "matmul_gflops" in m else ""
    rate += f" ({m['matmul_gflops_end']:.0f} at the end)" if "matmul_gflops_end" in m else ""
    title = f"{m['cpu']} ({m['cores']} cores), torch {m['torch']}, {o['threads']} threads{rate}, load average {m['loadavg'][0]:.2f}"
    header = ["size", "case", "side", "audio s"] + [c[1] for c in F5_COLUMNS]
    rows = [header]
    notes = []
    for size, per in results["sizes"].items():
        params = per["models"]["f5_tts"].get("parameters", {})
        if params:
            notes.append(f"{size}: {o['variant']}, DiT {params['dit'] / 1e6:.1f} M parameters, Vocos {params['vocos'] / 1e6:.1f} M")
        for case, entry in per["cases"].items():
            for side in ("koe", "upstream"):
                if side not in entry:
                    continue
                s = entry[side]["summary"]
                runs = entry[side]["runs"]
                cells = [size, case, side, f"{runs[0]['audio_s']:.2f}" if runs else "-"]
                cells += [median(s.get(key), scale) for key, _, scale in F5_COLUMNS]
                rows.append(cells)
            if "ratio" in entry:
                r = entry["ratio"]
                rows.append([size, case, "koe/up", ""] + [("-" if key not in r else f"{r[key]:.2f}x") for key, _, _ in F5_COLUMNS])
            if "wave_equal" in entry:
                notes.append(f"{size} {case}: waveforms {'equal' if entry['wave_equal'] else 'DIFFERENT'} at {o['threads']} thread(s) (same seed)")
        check = per.get("exact_1thread")
        if check:
            same = check.get("same_bits_as_threads", {})
            vs = f"; {o['threads']} thread(s) gave " + ", ".join(f"{side} {'the same bits' if v else 'other bits'}" for side, v in same.items()) if same and o["threads"] != 1 else ""
            notes.append(f"{size} {check['case']} at NFE {check['nfe']}, 1 thread: waveforms {'equal' if check['wave_equal'] else 'DIFFERENT'}{vs}")
    return "\n".join(lay_out(title, rows, 3, width) + notes)


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
        print(ratio_legend(opts.family, compared(opts)))
    if a.print_profile:
        for size, per in results["sizes"].items():
            for case, entry in per["cases"].items():
                for side in ("koe", *SIDE_NAMES):
                    if entry.get(side, {}).get("profile"):
                        print(f"\n== {size} {case} {side} ==\n{entry[side]['profile']}")
    if opts.out:
        print(f"results: {opts.out}")
    return 0
