"""F5-TTS's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`)."""

from __future__ import annotations

import os
from pathlib import Path

from koe.engines.f5_tts.bench.models import dit_forward_flops, parameter_counts


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
            with kit.loaded_workers(opts, sides, folder, logs, size, progress) as (workers, loads):
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
        reference.unlink(missing_ok=True)
    if opts.bandwidth:  # the rate again: a shared machine drifts over a long run
        results["machine"]["matmul_gflops_end"] = kit.machine.matmul_gflops()
    return kit.finish_run(opts, results)


def _case(kit, opts, size: str, case: str, workers: dict, loads: dict, reference: str, folder: Path, progress) -> dict:
    """One case (`kit.time_case`): warm-ups at `warmup_nfe`, then `runs` interleaved timed requests; the DiT's
    arithmetic rate of each, hashes and whether each side's were the same in every run."""
    from koe.engines.f5_tts.bench import BENCH

    cmd = {"op": "run", "case": case, "seed": opts.seed, "reference": reference, "nfe": opts.nfe}

    def dit_rate(side: str, sample: dict, call_s: float) -> None:
        if sample.get("forward_s"):
            sample["dit_gflops"] = sum(dit_forward_flops(folder, n, 2) for n in sample["seq_frames"]) / sample["forward_s"] / 1e9

    label = f"{size} {case}"
    entry, samples, warmed = kit.time_case(opts, workers, loads, cmd, label, progress, BENCH.timed_keys, {**cmd, "nfe": opts.warmup_nfe}, dit_rate)
    hashes = {side: {s["wave_sha1"] for s in runs} for side, runs in samples.items()}
    for side in samples:
        entry[side]["deterministic"] = len(hashes[side]) == 1  # the same seed gave the same waveform in every run
    if opts.compare:
        entry["ratio"] = kit.ratios(entry["koe"]["summary"], entry["upstream"]["summary"])
        entry["wave_equal"] = hashes["koe"] == hashes["upstream"]  # at opts.threads threads
    if warmed:
        entry["warmup_sha1"] = {
            side: reply["wave_sha1"] for side, reply in warmed.items()
        }  # at warmup_nfe and opts.threads: the 1-thread check compares with it
    return entry


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe.engines.f5_tts.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True)

    def model_note(size: str, model: dict) -> str:
        params = model["parameters"]
        return f"{size}: {o['variant']}, DiT {params['dit'] / 1e6:.1f} M parameters, Vocos {params['vocos'] / 1e6:.1f} M"

    def exact_check(size: str, per: dict) -> list[str]:
        check = per.get("exact_1thread")
        if not check:
            return []
        same = check.get("same_bits_as_threads", {})
        vs = (
            f"; {o['threads']} thread(s) gave " + ", ".join(f"{side} {'the same bits' if v else 'other bits'}" for side, v in same.items())
            if same and o["threads"] != 1
            else ""
        )
        return [f"{size} {check['case']} at NFE {check['nfe']}, 1 thread: waveforms {'equal' if check['wave_equal'] else 'DIFFERENT'}{vs}"]

    rows, notes = kit.sizes_table(results, BENCH.columns, BENCH.sides, model_note, exact_check)
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
