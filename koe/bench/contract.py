"""The default benchmark of a family whose declaration names no `run`, `table` or `worker` of its own:
requests through the engine contract (`Engine.synthesize`), timed from outside.

The family declares `requests`: case -> the `SynthesisRequest` fields of that case (text, language,
voice, instruct, options, stream). The koe side loads the model with its family's engine
(`registry.engine_class`) and speaks each request whole (`collect`), or, with `stream`, as a
listener hears it (time to the first audio, real-time factor after it); the result's samples are
hashed, so a compared side (its own worker script, the same commands) is checked bit for bit.
One model per size (`--variant`, else the first variant the family's model writer takes).
"""

from __future__ import annotations

import time

TIMED_KEYS = ("load_s", "total_s", "rtf", "ttfa_s", "stream_rtf", "peak_rss")
COLUMNS = (
    ("load_s", "load s", 1),
    ("total_s", "total s", 1),
    ("rtf", "s/audio s", 1),
    ("ttfa_s", "TTFA s", 1),
    ("stream_rtf", "RTF", 1),
    ("peak_rss", "peak RSS GB", 1e-9),
)


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
        workers: dict = {}
        try:
            for side in sides:
                workers[side] = kit.Worker(side, opts.threads, logs / f"koe-bench-{opts.family}-{side}.log", opts.family, bench.worker or WORKER)
            loads = {}
            for side, w in workers.items():
                progress(f"{size}: loading in {side}")
                loads[side] = w.call(op="load", model=str(folder), threads=opts.threads, precision=opts.precision if side == "koe" else opts.upstream_precision)
            model["load"] = loads
            for case in opts.cases:
                cmd = {"op": "run", "case": case, "request": dict(bench.requests[case]), "seed": opts.seed}
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
                entry: dict = {
                    side: {"summary": kit.summarize(samples[side], TIMED_KEYS), "runs": samples[side], "precision": loads[side].get("precision")}
                    for side in sides
                }
                if opts.profile:
                    for side in sides:
                        progress(f"{size} {case}: {opts.profile} profile ({side})")
                        entry[side]["profile"] = workers[side].call(**cmd, profile=opts.profile).get("profile")
                kit.compare_sides(entry, samples, sides[1:], "wave_sha1")
                per_size["cases"][case] = entry
        finally:
            for w in workers.values():
                w.close()
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
            same = entry.get("codes_equal_to", {})
            for side in ("koe", *bench.sides):
                if side not in entry:
                    continue
                s, runs = entry[side]["summary"], entry[side]["runs"]
                cells = [size, case, side, str(entry[side].get("precision", "")), f"{runs[0]['audio_s']:.2f}" if runs else "-"]
                cells += [kit.median(s.get(key), scale) for key, _, scale in columns]
                cells.append("" if side == "koe" else "-" if side not in same else "= koe" if same[side] else "DIFFERENT")
                rows.append(cells)
            for side, r in entry.get("ratios", {}).items():
                rows.append([size, case, f"koe/{bench.sides[side].short}", "", ""] + kit.ratio_cells(r, columns) + [""])
    return "\n".join(kit.lay_out(title, rows, 4, width))


class ContractWorker:
    """The koe side: the family's engine (`registry.engine_class`), each request through `synthesize`."""

    def __init__(self, wire) -> None:
        self.wire = wire
        self.engine = None

    def load(self, cmd: dict) -> dict:
        from koe.engines.registry import detect, engine_class

        self.wire.set_threads(cmd["threads"])
        cls = engine_class(detect(cmd["model"]).family)
        started = time.perf_counter()
        self.engine = cls.load(cmd["model"], device="cpu", precision=cmd.get("precision") or "fp32")
        load_s = time.perf_counter() - started
        return {"load_s": load_s, "peak_rss": self.wire.peak_rss(), "rss": self.wire.current_rss(), "precision": self.engine.precision}

    def run(self, cmd: dict) -> dict:
        return self.wire.run_case(cmd, lambda: self._run(cmd["request"], int(cmd.get("seed", 0))))

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
