"""IndexTTS's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`).

Per size and release (the cases pick it), the model built or found and fresh workers; each case:
`warmup` requests (excluded), then `runs` timed ones, alternating which side goes first; the same
seed and `--codes` cap on both sides, so the codes' and waveforms' hashes say whether the bits are
equal.
"""

from __future__ import annotations

import os
from pathlib import Path

from koe_indextts.bench import cases
from koe_indextts.bench.models import WEIGHTS, parameter_counts


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench --family indextts`: every case in koe and, with `--compare upstream`, upstream's, interleaved; returns the results."""
    from koe_indextts.bench import BENCH

    sides, logs, results = kit.start_run(opts)
    peers = sides[1:]
    reference = kit.wire.write_reference_wav(logs / f"koe-bench-indextts-reference-{os.getpid()}.wav", cases.REF_SECONDS, cases.REF_RATE)
    by_variant: dict[str, list[str]] = {}
    for case in opts.cases:
        by_variant.setdefault(cases.VARIANTS[case], []).append(case)
    try:
        for size in opts.sizes:
            per_size: dict = {"cases": {}, "models": {}}
            results["sizes"][size] = per_size
            for variant, variant_cases in by_variant.items():
                progress(f"{variant} {size}: building or finding the model")
                folder = kit.bench_model(opts.family, variant, size, opts.models_root, seed=opts.seed)
                model = {"folder": str(folder), "variant": variant, "weights_bytes": kit.weights_bytes(folder, WEIGHTS), "parameters": parameter_counts(folder)}
                per_size["models"][variant] = model
                with kit.loaded_workers(opts, sides, folder, logs, f"{variant} {size}", progress) as (workers, loads):
                    model["load"] = loads
                    for case in variant_cases:
                        cmd = {"op": "run", "case": case, "reference": str(reference), "codes": opts.codes, "seed": opts.seed}
                        entry, samples, _ = kit.time_case(opts, workers, loads, cmd, f"{size} {case}", progress, BENCH.timed_keys)
                        if peers:
                            kit.compare_sides(entry, samples, peers, hash_key="codes_sha1")
                            waves = {side: {s["wave_sha1"] for s in runs} for side, runs in samples.items()}
                            entry["wave_equal"] = len(waves["koe"]) == 1 and all(waves[side] == waves["koe"] for side in peers)
                        per_size["cases"][case] = entry
    finally:
        Path(reference).unlink(missing_ok=True)
    return kit.finish_run(opts, results)


def model_note(size: str, variant: str, model: dict) -> str:
    """One line per model: its parts' parameters and its bytes on disk."""
    p = model["parameters"]
    names = {
        "gpt": "GPT",
        "conditioning": "conditioning",
        "bigvgan": "BigVGAN",
        "speaker_encoder": "speaker encoder",
        "s2mel": "s2mel",
        "w2v_bert": "w2v-BERT",
        "semantic_codec": "codec",
        "codec": "2.5 codec",
        "campplus": "CAM++",
    }
    parts = " + ".join(f"{names[k]} {v / 1e6:.1f} M" for k, v in p.items() if k != "total")
    return f"{size} {variant}: {parts} = {p['total'] / 1e6:.1f} M parameters, {model['weights_bytes'] / 1e9:.2f} GB on disk"


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe_indextts.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True) + f"; one clone request per run (a {cases.REF_SECONDS:g} s clip), at most {o['codes']} codes"
    rows = [["size", "case", "side", "prec", "audio s"] + [c[1] for c in BENCH.columns]]
    notes: list[str] = []
    threads = o["threads"]
    for size, per in results["sizes"].items():
        for variant, model in per["models"].items():
            if model.get("parameters"):
                notes.append(model_note(size, variant, model))
        for case, entry in per["cases"].items():
            rows += kit.case_rows(size, case, entry, BENCH.columns, BENCH.sides)
            if "codes_equal" in entry:
                notes.append(f"{size} {case}: codes {'equal' if entry['codes_equal'] else 'DIFFERENT'}")
            if "wave_equal" in entry:
                notes.append(f"{size} {case}: waveforms {'equal' if entry['wave_equal'] else 'DIFFERENT'} at {threads} thread(s) (same seed)")
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
