"""CosyVoice's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`).

Per size and variant (the cases pick it), the model built or found and fresh workers; each case:
`warmup` requests (excluded), then `runs` timed ones, alternating which side goes first. With
`--compare upstream`, upstream's worker first gives its CAM++ vector of the prompt clip, which every
koe run then uses (see `worker`), and the waveforms' hashes are compared where upstream's are
reproducible (every case but v2_stream).
"""

from __future__ import annotations

import os
from pathlib import Path

from koe.engines.cosyvoice.bench import cases
from koe.engines.cosyvoice.bench.models import WEIGHTS, parameter_counts


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench --family cosyvoice`: every case in koe and, with `--compare upstream`, upstream, interleaved; returns the results."""
    from koe.engines.cosyvoice.bench import BENCH

    sides, logs, results = kit.start_run(opts)
    peers = sides[1:]
    reference = kit.wire.write_reference_wav(logs / f"koe-bench-cosyvoice-reference-{os.getpid()}.wav", cases.REF_SECONDS, cases.REF_RATE)
    try:
        for size in opts.sizes:
            per_size: dict = {"cases": {}, "models": {}}
            results["sizes"][size] = per_size
            by_variant: dict[str, list[str]] = {}
            for case in opts.cases:
                by_variant.setdefault(cases.CASES[case][0], []).append(case)
            for variant, variant_cases in by_variant.items():
                progress(f"{size} {variant}: building or finding the model")
                folder = kit.bench_model(opts.family, variant, size, opts.models_root, seed=opts.seed)
                model = {"folder": str(folder), "variant": variant, "weights_bytes": kit.weights_bytes(folder, WEIGHTS), "parameters": parameter_counts(folder)}
                per_size["models"][variant] = model
                with kit.loaded_workers(opts, sides, folder, logs, f"{size} {variant}", progress) as (workers, loads):
                    model["load"] = loads
                    embedding = workers["upstream"].call(op="embedding", reference=str(reference))["embedding"] if "upstream" in workers else None
                    for case in variant_cases:
                        cmd = {"op": "run", "case": case, "reference": str(reference), "seed": opts.seed}
                        koe_cmd = {**cmd, "embedding": embedding} if embedding is not None else cmd
                        entry, samples, _ = _time_case(kit, opts, workers, loads, cmd, koe_cmd, f"{size} {case}", progress, BENCH.timed_keys)
                        for side in sides:
                            if loads[side].get("kernel"):
                                entry[side]["kernel"] = loads[side]["kernel"]
                        if peers:
                            kit.compare_sides(entry, samples, peers, hash_key="wave_sha1")
                            if case in cases.RACING:  # upstream's bits vary run to run: nothing to compare
                                entry.pop("codes_equal", None)
                                entry.get("codes_equal_to", {}).pop("upstream", None)
                            elif "codes_equal" in entry:
                                entry["wave_equal"] = entry["codes_equal"] and len({s["wave_sha1"] for s in samples["koe"]}) == 1
                        per_size["cases"][case] = entry
    finally:
        Path(reference).unlink(missing_ok=True)
    return kit.finish_run(opts, results)


def _time_case(kit, opts, workers: dict, loads: dict, cmd: dict, koe_cmd: dict, label: str, progress, keys):
    """`kit.time_case` with koe's command carrying upstream's CAM++ vector (the other sides get `cmd`)."""
    routed = {side: _Routed(w, koe_cmd if side == "koe" else cmd) for side, w in workers.items()}
    return kit.time_case(opts, routed, loads, cmd, label, progress, keys)


class _Routed:
    """A worker whose `call` sends its own side's command."""

    def __init__(self, worker, cmd: dict) -> None:
        self.worker, self.cmd = worker, cmd

    def call(self, **command) -> dict:
        return self.worker.call(**{**command, **self.cmd})


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe.engines.cosyvoice.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True) + f"; one zero-shot request per run, text {cases.TEXT!r}"
    rows = [["size", "case", "side", "prec", "audio s"] + [c[1] for c in BENCH.columns]]
    notes: list[str] = []
    threads = o["threads"]
    for size, per in results["sizes"].items():
        for variant, model in per["models"].items():
            p = model["parameters"]
            notes.append(
                f"{size} {variant}: LM {p['llm'] / 1e6:.1f} M + flow {p['flow'] / 1e6:.1f} M + vocoder {p['hift'] / 1e6:.1f} M parameters, "
                f"{model['weights_bytes'] / 1e9:.2f} GB on disk with the ONNX front end"
            )
        for case, entry in per["cases"].items():
            rows += kit.case_rows(size, case, entry, BENCH.columns, BENCH.sides)
            if "wave_equal" in entry:
                notes.append(
                    f"{size} {case}: waveforms {'equal' if entry['wave_equal'] else 'DIFFERENT'} at {threads} thread(s) (same seed, upstream's CAM++ vector)"
                )
            elif case in cases.RACING and "upstream" in entry:
                notes.append(f"{size} {case}: waveforms not compared (upstream's v2 stream races two threads on one generator)")
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
