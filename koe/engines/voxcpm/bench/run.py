"""VoxCPM's benchmark run and table (`BENCH.run`, `BENCH.table`; handed `koe.bench.kit`).

Each case: `warmup` requests (excluded), then `runs` timed ones, alternating which side goes first;
same seed on both sides, so the waveforms' hashes say whether the bits are equal.
"""

from __future__ import annotations

import os
from pathlib import Path

from koe.engines.voxcpm.bench import cases
from koe.engines.voxcpm.bench.models import parameter_counts


def run(kit, opts, progress=lambda msg: None) -> dict:
    """`koe bench --family voxcpm`: every case in koe and, with `--compare upstream`, in voxcpm, interleaved; returns the results."""
    from koe.engines.voxcpm.bench import BENCH

    sides, logs, results = kit.start_run(opts)
    if opts.bandwidth:
        progress("measuring the machine's read bandwidth and fp32 matvec")
        results["machine"]["read_gbps"] = kit.machine.read_bandwidth()
        results["machine"]["matvec_gbps"] = kit.machine.matvec_bandwidth()

    def case_cmd(case: str) -> dict:
        return {"op": "run", "case": case, "reference": str(reference), "patches": opts.patches, "timesteps": opts.timesteps, "seed": opts.seed}

    reference = kit.wire.write_reference_wav(logs / f"koe-bench-voxcpm-reference-{os.getpid()}.wav", cases.REF_SECONDS, cases.REF_RATE)
    try:
        # upstream runs the precision asked too (bf16: its release config), not --upstream-precision
        kit.run_sizes(opts, sides, logs, results, progress, case_cmd, BENCH.timed_keys, parameter_counts, upstream_precision=opts.precision)
    finally:
        Path(reference).unlink(missing_ok=True)
    return kit.finish_run(opts, results)


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratios, bit checks; laid out by `kit.lay_out`."""
    from koe.engines.voxcpm.bench import BENCH

    m, o = results["machine"], results["options"]
    title = kit.machine_title(m, o["threads"], loadavg=True) + f"; {o['patches']} patches per request (min_len = max_len), {o['timesteps']} CFM steps per patch"

    def model_note(size: str, model: dict) -> str:
        params = model["parameters"]
        return (
            f"{size}: {model['variant']}, {(params['total'] - params.get('audio_vae', 0)) / 1e6:.1f} M parameters + AudioVAE "
            f"{params.get('audio_vae', 0) / 1e6:.1f} M, {model['weights_bytes'] / 1e9:.2f} GB on disk"
        )

    rows, notes = kit.sizes_table(results, BENCH.columns, BENCH.sides, model_note)
    return "\n".join(kit.lay_out(title, rows, 4, width) + notes)
