"""GPT-SoVITS's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`).

Per size and variant (the cases pick it), the model built or found and fresh workers (koe, and with
`--compare upstream` upstream's `TTS` in its own venv); each case: `warmup` requests (excluded),
then `runs` timed ones, alternating which side goes first; the float32 waveforms' hashes (and the
int16 samples' `TTS.run` returns) compared.
"""

from __future__ import annotations

import os
from pathlib import Path

from koe.engines.gpt_sovits.bench import cases
from koe.engines.gpt_sovits.bench.models import WEIGHTS, parameter_counts


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench --family gpt_sovits`: every case in koe and, with `--compare upstream`, upstream, interleaved; returns the results."""
    from koe.engines.gpt_sovits.bench import BENCH

    sides, logs, results = kit.start_run(opts)
    peers = sides[1:]
    reference = kit.wire.write_reference_wav(logs / f"koe-bench-gpt_sovits-reference-{os.getpid()}.wav", cases.REF_SECONDS, cases.REF_RATE)
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
                    for case in variant_cases:
                        cmd = {"op": "run", "case": case, "size": size, "reference": str(reference), "seed": cases.SEED + opts.seed}
                        entry, samples, _ = kit.time_case(opts, workers, loads, cmd, f"{size} {case}", progress, BENCH.timed_keys)
                        if peers:
                            kit.compare_sides(entry, samples, peers, hash_key="wave_sha1")
                            int16 = {side: {s["int16_sha1"] for s in runs} for side, runs in samples.items()}
                            entry["wave_equal"] = entry["codes_equal"] and len({s["wave_sha1"] for s in samples["koe"]}) == 1
                            entry["int16_equal"] = int16["koe"] == int16["upstream"] and len(int16["koe"]) == 1
                        per_size["cases"][case] = entry
    finally:
        Path(reference).unlink(missing_ok=True)
    return kit.finish_run(opts, results)


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe.engines.gpt_sovits.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True) + "; one zero-shot TTS.run request per run, a reference it has not seen"
    rows = [["size", "case", "side", "prec", "audio s"] + [c[1] for c in BENCH.columns]]
    notes: list[str] = []
    for size, per in results["sizes"].items():
        for variant, model in per["models"].items():
            p = model["parameters"]
            vocoder = f" + vocoder {p['vocoder'] / 1e6:.1f} M" if "vocoder" in p else ""
            notes.append(
                f"{size} {variant}: GPT {p['gpt'] / 1e6:.1f} M + SoVITS {p['sovits'] / 1e6:.1f} M{vocoder} + HuBERT {p['hubert'] / 1e6:.1f} M "
                f"+ BERT {p['bert'] / 1e6:.1f} M parameters, {model['weights_bytes'] / 1e9:.2f} GB on disk"
            )
        for case, entry in per["cases"].items():
            rows += kit.case_rows(size, case, entry, BENCH.columns, BENCH.sides)
            if "wave_equal" in entry:
                same = "equal" if entry["wave_equal"] and entry["int16_equal"] else "DIFFERENT"
                notes.append(f"{size} {case}: waveforms (float32 and int16) {same} at {o['threads']} thread(s), same seed")
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
