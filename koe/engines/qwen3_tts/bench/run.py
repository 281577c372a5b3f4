"""Qwen3-TTS's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`).

Each (size, model kind) gets fresh workers (koe and the compared sides). `call_s` is the whole call
as the parent sees it (the `run` command's round trip: the voice prompt, generation and codec in the
worker), the same measure for every side; `achieved_gbps` the weight bytes one frame reads
(`models.bytes_per_frame`) over the median time per frame, for the batch-1 cases.
"""

from __future__ import annotations

from koe.engines.qwen3_tts.bench import cases as qwen_cases
from koe.engines.qwen3_tts.bench.models import bytes_per_frame

BYTES_PER_WEIGHT = {"fp32": 4, "bf16": 2, "int8": 1, "int4": 0.5625}  # int4: 4 bits + a float32 scale per 64


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench` (Qwen3-TTS): every case in koe and the compared sides, interleaved; returns the results."""
    from koe.engines.qwen3_tts.bench import BENCH

    sides, logs, results = kit.start_run(opts)
    peers = sides[1:]
    if opts.bandwidth:
        progress("measuring the machine's read bandwidth")
        results["machine"]["read_gbps"] = kit.machine.read_bandwidth()
        results["machine"]["matvec_gbps"] = kit.machine.matvec_bandwidth()
    for size in opts.sizes:
        per_size: dict = {"cases": {}, "models": {}}
        by_kind: dict[str, list[str]] = {}
        for case in opts.cases:
            by_kind.setdefault(qwen_cases.CASES[case][0], []).append(case)
        for kind, kind_cases in by_kind.items():
            progress(f"{size} {kind}: building or finding the model")
            folder = kit.bench_model(opts.family, kind, size, opts.models_root, seed=opts.seed)
            per_size["models"][kind] = {"folder": str(folder), "weights_bytes": kit.weights_bytes(folder)}
            with kit.loaded_workers(opts, sides, folder, logs, f"{size} {kind}", progress) as (workers, loads):
                per_size["models"][kind]["load"] = loads
                for case in kind_cases:
                    cmd = {"op": "run", "case": case, "frames": opts.frames, "seed": opts.seed}
                    entry, samples, _ = kit.time_case(opts, workers, loads, cmd, f"{size} {case}", progress, BENCH.timed_keys, on_sample=_whole_call)
                    for side in sides:
                        reason = next((s["unsupported"] for s in samples[side] if "unsupported" in s), None)
                        if reason:
                            entry[side]["unsupported"] = reason
                        bpw = BYTES_PER_WEIGHT.get(opts.precision if side == "koe" else opts.upstream_precision, 4)
                        if loads[side].get("kernel") == "koe-exact-bf16":
                            bpw = 2  # exact products read the weights as bf16 (the values the float32 path widens)
                        mpf = entry[side]["summary"].get("ms_per_frame")
                        if mpf and qwen_cases.CASES[case][1] == 1:
                            gb = bytes_per_frame(folder, bpw) / 1e9
                            entry[side]["gb_per_frame"] = gb
                            entry[side]["achieved_gbps"] = gb / (mpf["median"] / 1e3)
                        if loads[side].get("kernel"):
                            entry[side]["kernel"] = loads[side]["kernel"]  # int8 / int4: what ran the products
                    kit.compare_sides(entry, samples, peers)
                    per_size["cases"][case] = entry
        batch_case, single = per_size["cases"].get("batch8"), per_size["cases"].get("custom_voice")
        if batch_case and single:
            per_size["batch8_speedup"] = {
                side: batch_case[side]["summary"]["frames_per_s"]["median"] / single[side]["summary"]["frames_per_s"]["median"]
                for side in sides
                if "frames_per_s" in batch_case[side]["summary"]
            }
        results["sizes"][size] = per_size
    return kit.finish_run(opts, results)


def _whole_call(side: str, sample: dict, call_s: float) -> None:
    if "unsupported" not in sample:
        sample["call_s"] = call_s  # the whole call, seen from the parent


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratio rows, the codes' verdicts; laid out by `kit.lay_out`."""
    from koe.engines.qwen3_tts.bench import BENCH

    columns, sides = BENCH.columns, BENCH.sides
    title = kit.machine_title(results["machine"], results["options"]["threads"])
    header = ["size", "case", "side", "prec"] + [c[1] for c in columns] + ["GB/s", "codes"]
    rows = [header]
    notes = []
    for size, per in results["sizes"].items():
        for case, entry in per["cases"].items():

            def extra(side: str, entry=entry) -> list[str]:
                gbps = entry[side].get("achieved_gbps")
                return ["-" if gbps is None else f"{gbps:.1f}", kit.same_cell(entry, side)]

            rows += kit.case_rows(size, case, entry, columns, sides, audio=False, extra=extra)
            notes += [
                f"{size} {case}: {side}: unsupported ({entry[side]['unsupported']})" for side in ("koe", *sides) if entry.get(side, {}).get("unsupported")
            ]
        if "batch8_speedup" in per:
            notes.append(f"{size} batch8/batch1 frames/s: " + ", ".join(f"{side} {v:.2f}x" for side, v in per["batch8_speedup"].items()))
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
