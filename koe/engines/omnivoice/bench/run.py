"""OmniVoice's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`).

Each case: `warmup` requests (excluded), then `runs` timed ones, alternating which side goes first;
same seed on both sides, so the waveforms' hashes say whether the bits are equal.
"""

from __future__ import annotations

import os
from pathlib import Path

from koe.engines.omnivoice.bench import cases
from koe.engines.omnivoice.bench.models import parameter_counts


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench --family omnivoice`: every case in koe and, with `--compare upstream`, in omnivoice, interleaved; returns the results."""
    from koe.engines.omnivoice.bench import BENCH

    sides, logs, results = kit.start_run(opts)

    def case_cmd(case: str) -> dict:
        return {"op": "run", "case": case, "reference": str(reference), "seed": opts.seed}

    reference = kit.wire.write_reference_wav(logs / f"koe-bench-omnivoice-reference-{os.getpid()}.wav", cases.REF_SECONDS, cases.REF_RATE)
    try:
        kit.run_sizes(opts, sides, logs, results, progress, case_cmd, BENCH.timed_keys, parameter_counts)
    finally:
        Path(reference).unlink(missing_ok=True)
    return kit.finish_run(opts, results)


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe.engines.omnivoice.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True) + "; one request per run, the length from upstream's estimate"

    def model_note(size: str, model: dict) -> str:
        params = model["parameters"]
        return (
            f"{size}: LM {params['lm'] / 1e6:.1f} M parameters + audio tokenizer {params['audio_tokenizer'] / 1e6:.1f} M, "
            f"{model['weights_bytes'] / 1e9:.2f} GB on disk"
        )

    rows, notes = kit.sizes_table(results, BENCH.columns, BENCH.sides, model_note)
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
