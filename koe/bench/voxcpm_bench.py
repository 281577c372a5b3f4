"""`koe bench --family voxcpm`: VoxCPM2 / VoxCPM 1.5 on random weights at the released sizes.

One model (`--variant`, size tiny or real), one pair of workers (koe, and with `--compare
upstream` voxcpm 2.0.3 in its own venv and process) for all cases (`wire.VOX_CASES`). Every
request makes exactly `patches` latent patches on both sides (min_len = max_len, no retries: a
stop-head length would depend on the random weights). Precision: koe's exact path runs float32
(the weights, bfloat16 on disk as released, are widened at load); upstream then reads the folder
with its config's dtype set to float32 (upstream keeps the config's dtype on a CPU). With
`--precision bf16` both sides run the LM and DiT in bfloat16 (upstream: the release's own
config), the AudioVAE in float32 on both.

Each case: `warmup` requests (excluded), then `runs` timed ones, alternating which side goes
first; same seed on both sides, so the waveforms' hashes say whether the bits are equal.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from koe.bench import wire

VOX_TIMED_KEYS = ("load_s", "prompt_s", "prefill_s", "total_s", "rtf", "first_chunk_s", "ms_per_patch", "base_lm_ms", "residual_lm_ms", "dit_ms",
                  "locenc_ms", "vae_ms", "other_s", "peak_rss")  # fmt: skip
VOX_COLUMNS = (
    ("load_s", "load s", 1), ("prompt_s", "prompt s", 1), ("prefill_s", "prefill s", 1), ("total_s", "total s", 1), ("rtf", "s/audio s", 1),
    ("first_chunk_s", "1st chunk s", 1), ("ms_per_patch", "ms/patch", 1), ("base_lm_ms", "base LM", 1), ("residual_lm_ms", "res LM", 1),
    ("dit_ms", "DiT", 1), ("locenc_ms", "LocEnc", 1), ("vae_ms", "VAE", 1), ("peak_rss", "peak RSS GB", 1e-9),
)  # fmt: skip


def run_voxcpm(opts, progress=lambda msg: None) -> dict:
    from koe.bench import machine
    from koe.bench.models import VOX_SIZES, voxcpm_bench_model, voxcpm_parameter_counts, weights_bytes
    from koe.bench.runner import Worker, ratios, start_run, summarize

    sides, logs, results = start_run(opts, "voxcpm", "VoxCPM", wire.VOX_CASES, VOX_SIZES)
    if opts.bandwidth:
        progress("measuring the machine's read bandwidth and fp32 matvec")
        results["machine"]["read_gbps"] = machine.read_bandwidth()
        results["machine"]["matvec_gbps"] = machine.matvec_bandwidth()
    reference = wire.write_vox_reference_wav(logs / f"koe-bench-voxcpm-reference-{os.getpid()}.wav")
    variant = opts.variant if opts.variant in ("VoxCPM2", "VoxCPM1.5") else "VoxCPM2"
    try:
        for size in opts.sizes:
            progress(f"{variant} {size}: building or finding the model")
            folder = voxcpm_bench_model(variant, size, opts.models_root, seed=opts.seed)
            model = {"folder": str(folder), "variant": variant, "weights_bytes": weights_bytes(folder), "parameters": voxcpm_parameter_counts(folder)}
            per_size: dict = {"cases": {}, "models": {"voxcpm": model}}
            results["sizes"][size] = per_size
            workers: dict = {}
            try:
                for side in sides:
                    workers[side] = Worker(side, opts.threads, logs / f"koe-bench-voxcpm-{side}.log", family="voxcpm")
                loads = {}
                for side, w in workers.items():
                    progress(f"{variant} {size}: loading in {side}")
                    loads[side] = w.call(op="load", model=str(folder), threads=opts.threads, precision=opts.precision)
                model["load"] = loads
                for case in opts.cases:
                    cmd = {"op": "run", "case": case, "reference": str(reference), "patches": opts.patches, "timesteps": opts.timesteps, "seed": opts.seed}
                    samples: dict = {side: [] for side in sides}
                    for _ in range(opts.warmup):
                        for side, w in workers.items():
                            progress(f"{size} {case}: warm-up ({side})")
                            w.call(**cmd)
                    for r in range(opts.runs):
                        for side in sides if r % 2 == 0 else sides[::-1]:
                            progress(f"{size} {case}: run {r + 1}/{opts.runs} ({side})")
                            sample = workers[side].call(**cmd)
                            sample["load_s"] = loads[side]["load_s"]
                            samples[side].append(sample)
                    entry: dict = {side: {"summary": summarize(samples[side], VOX_TIMED_KEYS), "runs": samples[side], "precision": loads[side].get("precision")}
                                   for side in sides}  # fmt: skip
                    if opts.profile:
                        for side in sides:
                            progress(f"{size} {case}: {opts.profile} profile ({side})")
                            entry[side]["profile"] = workers[side].call(**cmd, profile=opts.profile).get("profile")
                    if opts.compare:
                        entry["ratio"] = ratios(entry["koe"]["summary"], entry["upstream"]["summary"])
                        hashes = {side: {s["wave_sha1"] for s in samples[side]} for side in sides}
                        entry["wave_equal"] = hashes["koe"] == hashes["upstream"] and len(hashes["koe"]) == 1
                    per_size["cases"][case] = entry
            finally:
                for w in workers.values():
                    w.close()
    finally:
        Path(reference).unlink(missing_ok=True)
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    results["machine"]["loadavg_end"] = list(os.getloadavg())
    if opts.out:
        import json

        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(json.dumps(results, indent=1))
    return results


def format_voxcpm_table(results: dict, width: int | None = None) -> str:
    """VoxCPM: one row per size, case and side (medians), ratios, bit checks; laid out by koe.bench.cli's `lay_out`."""
    from koe.bench.cli import lay_out, median

    m, o = results["machine"], results["options"]
    bw = f", read {m['read_gbps']:.1f} GB/s, fp32 matvec {m['matvec_gbps']:.1f} GB/s" if "read_gbps" in m else ""
    title = (f"{m['cpu']} ({m['cores']} cores), torch {m['torch']}, {o['threads']} threads{bw}, load average {m['loadavg'][0]:.2f}; "
             f"{o['patches']} patches per request (min_len = max_len), {o['timesteps']} CFM steps per patch")  # fmt: skip
    header = ["size", "case", "side", "prec", "audio s"] + [c[1] for c in VOX_COLUMNS]
    rows = [header]
    notes = []
    for size, per in results["sizes"].items():
        model = per["models"]["voxcpm"]
        params = model.get("parameters", {})
        if params:
            notes.append(f"{size}: {model['variant']}, {(params['total'] - params.get('audio_vae', 0)) / 1e6:.1f} M parameters + AudioVAE "
                         f"{params.get('audio_vae', 0) / 1e6:.1f} M, {model['weights_bytes'] / 1e9:.2f} GB on disk")  # fmt: skip
        for case, entry in per["cases"].items():
            for side in ("koe", "upstream"):
                if side not in entry:
                    continue
                s, runs = entry[side]["summary"], entry[side]["runs"]
                cells = [size, case, side, str(entry[side].get("precision", "")), f"{runs[0]['audio_s']:.2f}" if runs else "-"]
                cells += [median(s.get(key), scale) for key, _, scale in VOX_COLUMNS]
                rows.append(cells)
            if "ratio" in entry:
                r = entry["ratio"]
                rows.append([size, case, "koe/up", "", ""] + [("-" if key not in r else f"{r[key]:.2f}x") for key, _, _ in VOX_COLUMNS])
            if "wave_equal" in entry:
                notes.append(f"{size} {case}: waveforms {'equal' if entry['wave_equal'] else 'DIFFERENT'} at {o['threads']} thread(s) (same seed)")
    return "\n".join(lay_out(title, rows, 4, width) + notes)


def kv_span_timing(filled: tuple[int, ...] = (100, 1500), capacity: int = 8192, layers: int = 28 + 8, heads: int = 16, kv_heads: int = 2,
                   head_dim: int = 128, threads: int = 2, repeats: int = 20) -> dict:
    """What attending over only the filled KV span saves per patch at VoxCPM2's size: one patch steps
    the base LM (28 layers) and the residual LM (8), each layer one SDPA of one query over its cache.
    Upstream's way: the whole static cache (`capacity` slots) with its mask; koe's: the filled span
    rounded up to `SPAN_BLOCK` (same mask rule). Median of `repeats` patches, float32, per fill level."""
    import statistics

    import torch
    import torch.nn.functional as F

    from koe.engines.voxcpm.minicpm import SPAN_BLOCK

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    cache = torch.randn(2, layers, 1, kv_heads, capacity, head_dim, generator=g)
    q = torch.randn(1, heads, 1, head_dim, generator=g)
    out: dict = {"capacity": capacity, "layers": layers, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "threads": threads, "levels": {}}
    with torch.inference_mode():
        for n in filled:
            position = n - 1
            span = min(capacity, -(-n // SPAN_BLOCK) * SPAN_BLOCK)

            def patch(slots: int) -> float:
                t = time.perf_counter()
                for i in range(layers):
                    k, v = cache[0, i], cache[1, i]
                    mask = (torch.arange(slots) <= position).view(1, 1, 1, -1)
                    F.scaled_dot_product_attention(q, k[:, :, :slots], v[:, :, :slots], attn_mask=mask, enable_gqa=True)
                return time.perf_counter() - t

            for _ in range(3):
                patch(capacity), patch(span)
            full, ours = [], []
            for _ in range(repeats):  # interleaved
                full.append(patch(capacity))
                ours.append(patch(span))
            f, o = statistics.median(full), statistics.median(ours)
            out["levels"][n] = {"span": span, "full_ms": 1e3 * f, "span_ms": 1e3 * o, "saved_ms": 1e3 * (f - o)}
    return out


if __name__ == "__main__":
    import json
    import sys

    levels = tuple(int(a) for a in sys.argv[1:]) or (100, 1500)
    print(json.dumps(kv_span_timing(levels), indent=1))
