"""The default benchmark of a family whose declaration names no `run`, `table` or `worker` of its own:
requests through the engine contract (`Engine.synthesize`), timed from outside.

The family declares `requests`: case -> the `SynthesisRequest` fields of that case (text, language,
voice, instruct, options, stream). The koe side loads the model with its family's engine
(`registry.load_engine`) and speaks each request whole (`collect`), or, with `stream`, as a
listener hears it (time to the first audio, real-time factor after it); the result's samples are
hashed, so a compared side (its own worker script, the same commands) is checked bit for bit.
One model per size (`--variant`, else the first variant the family's model writer takes).
"""

from __future__ import annotations

import time

from koe.engines.benchmark import KoeWorker, columns

COLUMNS = columns(total_s="total s", rtf="s/audio s", ttfa_s="TTFA s", stream_rtf="RTF")
TIMED_KEYS = tuple(key for key, _, _ in COLUMNS)


def run(kit, opts, progress=lambda msg: None) -> dict:
    """Every case in koe and the compared sides, interleaved; returns the results (JSON with `opts.out`)."""
    from koe.bench.families import family_bench

    bench = family_bench(opts.family)
    sides, logs, results = kit.start_run(opts, bench)
    variant = opts.variant or (bench.model_variants or bench.variants or ("",))[0]
    for size in opts.sizes:
        progress(f"{opts.family} {size}: building or finding the model")
        folder = kit.bench_model(opts.family, variant, size, opts.models_root, seed=opts.seed)
        model = {"folder": str(folder), "variant": variant, "weights_bytes": kit.weights_bytes(folder, ("*.safetensors", "*.pt", "*.bin"))}
        per_size: dict = {"cases": {}, "models": {opts.family: model}}
        results["sizes"][size] = per_size
        with kit.loaded_workers(opts, sides, folder, logs, size, progress) as (workers, loads):
            model["load"] = loads
            for case in opts.cases:
                cmd = {"op": "run", "case": case, "request": dict(bench.requests[case]), "seed": opts.seed}
                entry, samples, _ = kit.time_case(opts, workers, loads, cmd, f"{size} {case}", progress, TIMED_KEYS)
                kit.compare_sides(entry, samples, sides[1:], "wave_sha1")
                per_size["cases"][case] = entry
    return kit.finish_run(opts, results)


def table(kit, results: dict, width: int | None = None) -> str:
    """One row per size, case and side (medians), ratio rows, whether each side's waveform is koe's."""
    from koe.bench.families import family_bench

    bench = family_bench(results["family"])
    columns = bench.columns or COLUMNS
    title = kit.machine_title(results["machine"], results["options"]["threads"], loadavg=True)
    rows = [["size", "case", "side", "prec", "audio s"] + [c[1] for c in columns] + ["wave"]]
    for size, per in results["sizes"].items():
        for case, entry in per["cases"].items():
            rows += kit.case_rows(size, case, entry, columns, bench.sides, extra=lambda side, entry=entry: [kit.same_cell(entry, side)])
    return "\n".join(kit.lay_out(title, rows, 4, width))


class ContractWorker(KoeWorker):
    """The koe side: the family's engine (`registry.load_engine`), each request through `synthesize`."""

    def case(self, cmd: dict) -> dict:
        return self._run(cmd["request"], int(cmd.get("seed", 0)))

    def _run(self, fields: dict, seed: int) -> dict:
        import numpy as np

        from koe.engines.base import SynthesisRequest, collect

        request = SynthesisRequest(**{**fields, "seed": seed})
        started = time.perf_counter()
        first = first_samples = last = None
        if request.streamed:  # as a listener hears it: the first audio, then the rest against playback
            chunks = []
            for chunk in self.engine.synthesize(request):
                if len(chunk.samples):
                    last = time.perf_counter() - started
                    if first is None:
                        first, first_samples = last, len(chunk.samples)
                chunks.append(chunk)
            samples = np.concatenate([c.samples for c in chunks]) if chunks else np.zeros(0, np.float32)
            rate = chunks[-1].sample_rate if chunks else 1
        else:
            chunk = collect(self.engine.synthesize(request))
            samples, rate = chunk.samples, chunk.sample_rate
        total_s = time.perf_counter() - started
        audio_s = len(samples) / rate
        result = {
            "total_s": total_s,
            "audio_s": audio_s,
            "rtf": total_s / max(audio_s, 1e-9),
            "wave_sha1": self.wire.wave_sha1(samples),
            "audio_samples": len(samples),
            "peak_rss": self.wire.peak_rss(),
        }
        if first is not None:
            later_s = (len(samples) - first_samples) / rate
            result.update({"ttfa_s": first, "stream_rtf": (last - first) / later_s if later_s > 0 else None})
        return result


WORKER = f"{__name__}:ContractWorker"
