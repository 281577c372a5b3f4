"""F5-TTS's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`)."""

from __future__ import annotations

import os
from pathlib import Path

from koe.engines.f5_tts.bench.models import dit_forward_flops, parameter_counts

TIMED_KEYS = ("load_s", "prompt_s", "total_s", "rtf", "text_s", "dit_s", "ms_per_step", "vocoder_s", "other_s", "dit_gflops", "peak_rss")


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench --family f5_tts`: requests (`cases.CASES`) in koe and, with `--compare upstream`,
    in f5-tts 1.1.22, interleaved; returns the results (JSON with `opts.out`)."""
    sides, logs, results = kit.start_run(opts)
    if opts.bandwidth:
        progress("measuring the machine's fp32 matrix-product rate")
        results["machine"]["matmul_gflops"] = kit.machine.matmul_gflops()
    reference = kit.wire.write_reference_wav(logs / f"koe-bench-f5-reference-{os.getpid()}.wav")
    try:
        for size in opts.sizes:
            progress(f"F5-TTS {opts.variant} {size}: building or finding the model")
            folder = kit.bench_model(opts.family, opts.variant, size, opts.models_root, seed=opts.seed)
            model = {
                "folder": str(folder),
                "variant": opts.variant,
                "weights_bytes": kit.weights_bytes(folder, ("*.safetensors", "*.pt", "*.bin")),
                "parameters": parameter_counts(folder),
            }
            per_size: dict = {"cases": {}, "models": {opts.family: model}}
            results["sizes"][size] = per_size
            workers: dict = {}
            try:
                for side in sides:
                    workers[side] = kit.Worker(side, opts.threads, logs / f"koe-bench-f5-{side}.log", opts.family)
                loads = {}
                for side, w in workers.items():
                    progress(f"{size}: loading in {side}")
                    loads[side] = w.call(
                        op="load", model=str(folder), threads=opts.threads, precision=opts.precision if side == "koe" else opts.upstream_precision
                    )
                model["load"] = loads
                for case in opts.cases:
                    per_size["cases"][case] = _case(kit, opts, size, case, workers, loads, str(reference), folder, progress)
                if opts.compare and opts.exact_check:
                    case = opts.cases[0]
                    checks = {}
                    for side, w in workers.items():
                        progress(f"{size} {case}: bits at 1 thread, NFE {opts.warmup_nfe} ({side})")
                        checks[side] = w.call(op="run", case=case, seed=opts.seed, reference=str(reference), nfe=opts.warmup_nfe, threads=1)
                    warm = per_size["cases"][case].get("warmup_sha1", {})
                    per_size["exact_1thread"] = {
                        "case": case,
                        "nfe": opts.warmup_nfe,
                        "threads": 1,
                        "wave_equal": checks["koe"]["wave_sha1"] == checks["upstream"]["wave_sha1"],
                        **{f"{side}_sha1": c["wave_sha1"] for side, c in checks.items()},
                        "audio_samples": {side: c["audio_samples"] for side, c in checks.items()},
                        # the same request at opts.threads (the warm-up): does the thread count change the bits?
                        "same_bits_as_threads": {side: warm[side] == c["wave_sha1"] for side, c in checks.items() if side in warm},
                    }
            finally:
                for w in workers.values():
                    w.close()
    finally:
        reference.unlink(missing_ok=True)
    if opts.bandwidth:  # the rate again: a shared machine drifts over a long run
        results["machine"]["matmul_gflops_end"] = kit.machine.matmul_gflops()
    return kit.finish_run(opts, results)


def _case(kit, opts, size: str, case: str, workers: dict, loads: dict, reference: str, folder: Path, progress) -> dict:
    """One case: warm-ups at `warmup_nfe`, then `runs` interleaved timed requests, summary, ratios, hashes."""
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
                sample["dit_gflops"] = sum(dit_forward_flops(folder, n, 2) for n in sample["seq_frames"]) / sample["forward_s"] / 1e9
            samples[side].append(sample)
    entry: dict = {
        side: {"summary": kit.summarize(samples[side], TIMED_KEYS), "runs": samples[side], "precision": loads[side].get("precision")} for side in sides
    }
    if opts.profile:
        for side in sides:
            progress(f"{size} {case}: {opts.profile} profile ({side})")
            entry[side]["profile"] = request(side, profile=opts.profile).get("profile")
    hashes = {side: {s["wave_sha1"] for s in samples[side]} for side in sides}
    for side in sides:
        entry[side]["deterministic"] = len(hashes[side]) == 1  # the same seed gave the same waveform in every run
    if opts.compare:
        entry["ratio"] = kit.ratios(entry["koe"]["summary"], entry["upstream"]["summary"])
        entry["wave_equal"] = hashes["koe"] == hashes["upstream"]  # at opts.threads threads
    if warm:
        entry["warmup_sha1"] = warm  # at warmup_nfe and opts.threads: the 1-thread check compares with it
    return entry


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe.engines.f5_tts.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True)
    header = ["size", "case", "side", "prec", "audio s"] + [c[1] for c in BENCH.columns]
    rows = [header]
    notes = []
    for size, per in results["sizes"].items():
        params = per["models"][results["family"]].get("parameters", {})
        if params:
            notes.append(f"{size}: {o['variant']}, DiT {params['dit'] / 1e6:.1f} M parameters, Vocos {params['vocos'] / 1e6:.1f} M")
        for case, entry in per["cases"].items():
            for side in ("koe", "upstream"):
                if side not in entry:
                    continue
                s = entry[side]["summary"]
                runs = entry[side]["runs"]
                cells = [size, case, side, str(entry[side].get("precision", "")), f"{runs[0]['audio_s']:.2f}" if runs else "-"]
                cells += [kit.median(s.get(key), scale) for key, _, scale in BENCH.columns]
                rows.append(cells)
            if "ratio" in entry:
                rows.append([size, case, "koe/up", "", ""] + kit.ratio_cells(entry["ratio"], BENCH.columns))
            if "wave_equal" in entry:
                notes.append(f"{size} {case}: waveforms {'equal' if entry['wave_equal'] else 'DIFFERENT'} at {o['threads']} thread(s) (same seed)")
        check = per.get("exact_1thread")
        if check:
            same = check.get("same_bits_as_threads", {})
            vs = (
                f"; {o['threads']} thread(s) gave " + ", ".join(f"{side} {'the same bits' if v else 'other bits'}" for side, v in same.items())
                if same and o["threads"] != 1
                else ""
            )
            notes.append(f"{size} {check['case']} at NFE {check['nfe']}, 1 thread: waveforms {'equal' if check['wave_equal'] else 'DIFFERENT'}{vs}")
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
