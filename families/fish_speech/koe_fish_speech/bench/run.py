"""Fish Speech's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`).

Per size, the model built or found (the real size at `--layers` slow layers) and fresh workers; each
case: `warmup` requests (excluded), then `runs` timed ones, alternating which side goes first; the
same seed and `--frames` cap on both sides, so the codes' and waveforms' hashes say whether the bits
are equal. With `--in-turn` each side is loaded and runs every case alone, one after the other (a
machine that cannot hold both sides' float32 models: upstream's alone holds ~16 GB at 8 layers).
"""

from __future__ import annotations

import os
from pathlib import Path

from koe_fish_speech.bench import cases
from koe_fish_speech.bench.models import RELEASED_LAYERS, WEIGHTS, layers_of, model_folder, parameter_counts


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench --family fish_speech`: every case in koe and, with `--compare upstream`, upstream's, interleaved (or in turn); returns the results."""
    from koe_fish_speech.bench import BENCH

    sides, logs, results = kit.start_run(opts)
    peers = sides[1:]
    clips = {
        name: str(kit.wire.write_reference_wav(logs / f"koe-bench-fish_speech-{name}-{os.getpid()}.wav", seconds, rate))
        for name, (seconds, rate, _) in cases.CLIPS.items()
    }
    try:
        for size in opts.sizes:
            progress(f"{size}: building or finding the model")
            folder = model_folder(kit, opts, size)
            model = {
                "folder": str(folder),
                "variant": "s2-pro",
                "layers": layers_of(size, opts.layers),
                "weights_bytes": kit.weights_bytes(folder, WEIGHTS),
                "parameters": parameter_counts(folder),
            }
            per_size: dict = {"cases": {}, "models": {"s2-pro": model}}
            results["sizes"][size] = per_size
            entries: dict = {case: {} for case in opts.cases}
            samples: dict = {case: {} for case in opts.cases}
            model["load"] = {}
            for group in [[side] for side in sides] if opts.in_turn else [sides]:  # in turn: each side's model alone in memory
                with kit.loaded_workers(opts, group, folder, logs, f"{size} {'+'.join(group)}", progress) as (workers, loads):
                    model["load"].update(loads)
                    for case in opts.cases:
                        references = [[clips[name], cases.CLIPS[name][2]] for name in cases.CASES[case][1]]
                        cmd = {"op": "run", "case": case, "references": references, "frames": opts.frames, "seed": opts.seed}
                        entry, runs, _ = kit.time_case(opts, workers, loads, cmd, f"{size} {case}", progress, BENCH.timed_keys)
                        entries[case].update(entry)
                        samples[case].update(runs)
            for case, entry in entries.items():
                if peers:
                    kit.compare_sides(entry, samples[case], peers, hash_key="codes_sha1")
                    waves = {side: {s["wave_sha1"] for s in runs} for side, runs in samples[case].items()}
                    entry["wave_equal"] = len(waves["koe"]) == 1 and all(waves[side] == waves["koe"] for side in peers)
                per_size["cases"][case] = entry
    finally:
        for path in clips.values():
            Path(path).unlink(missing_ok=True)
    return kit.finish_run(opts, results)


def model_note(size: str, model: dict) -> str:
    """One line per model: its parts' parameters, its depth and its bytes on disk."""
    p = model["parameters"]
    depth = f", {model['layers']} of the released {RELEASED_LAYERS} slow layers" if model.get("layers") else ""
    return (
        f"{size}: slow transformer {p['slow'] / 1e6:.1f} M + fast {p['fast'] / 1e6:.1f} M + codec {p['codec'] / 1e6:.1f} M = {p['total'] / 1e6:.1f} M parameters"
        f"{depth}, {model['weights_bytes'] / 1e9:.2f} GB on disk"
    )


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe_fish_speech.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True) + f"; one request per run, at most {o['frames']} frames a batch (max_new_tokens)"
    if o.get("in_turn"):
        title += "; the sides loaded and run in turn"
    rows = [["size", "case", "side", "prec", "audio s"] + [c[1] for c in BENCH.columns]]
    notes: list[str] = []
    threads = o["threads"]
    for size, per in results["sizes"].items():
        for model in per["models"].values():
            notes.append(model_note(size, model))
        for case, entry in per["cases"].items():
            rows += kit.case_rows(size, case, entry, BENCH.columns, BENCH.sides)
            if "codes_equal" in entry:
                notes.append(f"{size} {case}: codes (reference and every batch) {'equal' if entry['codes_equal'] else 'DIFFERENT'}")
            if "wave_equal" in entry:
                notes.append(f"{size} {case}: waveforms {'equal' if entry['wave_equal'] else 'DIFFERENT'} at {threads} thread(s) (same seed)")
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
