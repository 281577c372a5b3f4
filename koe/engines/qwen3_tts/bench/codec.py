"""Speed and error of the fast codec (the opt-in modes') against the exact codec, on the same codes.

The released-size speech tokenizer with random weights (the one `koe bench`'s 0.6B and 1.7B models
carry; speed does not depend on the values), random codes of each `--seconds` length. Per length:
seconds of decode per second of audio for the exact one-shot decode (`SpeechTokenizer.decode`, as
the engine decodes a whole segment), the exact streaming decode (`IncrementalDecoder`, pushed the
engine's first 4 frames then 12 at a time), and the same two for each fast codec; one warm-up, then
`--runs` interleaved runs, median and minimum. Error: waveform SNR (dB) of each fast decode against
the exact one-shot decode of the same codes, over `--sequences` code sequences.

    python -m koe.bench.tool codec --threads 2 [--seconds 2 8 24] [--runs 3] [--out codec.json]

A tool of the family's benchmark (`BENCH.tools`): `koe.bench.tool` runs `main(kit, argv)`.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from pathlib import Path

import torch

FRAME_RATE = 12.5
STREAM_FIRST, STREAM_EVERY = 4, 12  # the engine's streaming chunks (frames)
CODEC_VERSION = 1


def codec_folder(kit, size: str = "real", root: Path | None = None, seed: int = 0) -> Path:
    """A random speech tokenizer folder at `size` ("real": the release's shapes), built once and cached (`kit.cached_folder`)."""
    from koe.engines.qwen3_tts.codec.random_weights import write_random_speech_tokenizer

    folder = (root or kit.cache_root()) / f"qwen3-tts-codec-{size}-seed{seed}"
    return kit.cached_folder(
        folder, lambda tmp: write_random_speech_tokenizer(tmp, size=size, seed=seed), {"version": CODEC_VERSION, "size": size, "seed": seed}
    )


def random_codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


def stream(codec, codes: torch.Tensor) -> torch.Tensor:
    """Samples of `codes` pushed as the engine streams them (first 4 frames, then 12 at a time)."""
    decoder = codec.incremental_decoder()
    pieces, done, size = [], 0, STREAM_FIRST
    with torch.inference_mode():
        while done < codes.shape[0]:
            pieces.append(decoder.push(codes[done : done + size]))
            done, size = done + size, STREAM_EVERY
    return torch.cat(pieces)


def one_shot(codec, codes: torch.Tensor) -> torch.Tensor:
    return codec.decode([codes])[0]


def measure(kit, folder: Path, seconds: list[float], runs: int, sequences: int, fast_kinds: list[str]) -> dict:
    from koe.engines.qwen3_tts.codec import SpeechTokenizer
    from koe.engines.qwen3_tts.codec.fast import FastCodec
    from koe.runtime.kernels import snake

    exact = SpeechTokenizer.from_folder(folder)
    codecs = {"exact": exact, **{f"fast-{k}": FastCodec(exact, k) for k in fast_kinds}}
    ways = {"one_shot": one_shot, "stream": stream}
    result: dict = {"snake_kernel": snake.describe(), "lengths": []}
    for length in seconds:
        codes = random_codes(round(length * FRAME_RATE), seed=0)
        audio_s = codes.shape[0] / FRAME_RATE
        times: dict[str, list[float]] = {f"{c}/{w}": [] for c in codecs for w in ways}
        for run in range(runs + 1):  # run 0 warms up; the order alternates between runs
            order = list(times) if run % 2 == 0 else list(reversed(times))
            for key in order:
                name, way = key.split("/")
                started = time.perf_counter()
                ways[way](codecs[name], codes)
                if run:
                    times[key].append((time.perf_counter() - started) / audio_s)
        entry = {
            "seconds": audio_s,
            "frames": int(codes.shape[0]),
            "s_per_audio_s": {k: {"median": statistics.median(v), "min": min(v), "runs": v} for k, v in times.items()},
        }
        result["lengths"].append(entry)
    result["snr_db"] = snr_table(kit, codecs, ways, seconds, sequences)
    return result


def snr_table(kit, codecs: dict, ways: dict, seconds: list[float], sequences: int) -> dict:
    """SNR of every fast decode (one-shot, streamed) and of the exact streamed decode against the exact
    one-shot decode, per sequence (codes of the longest length, seeds 1..sequences)."""
    frames = round(max(seconds) * FRAME_RATE)
    table: dict[str, list[float]] = {}
    for seed in range(1, sequences + 1):
        codes = random_codes(frames, seed)
        ref = one_shot(codecs["exact"], codes)
        for name, codec in codecs.items():
            for way, fn in ways.items():
                if (name, way) != ("exact", "one_shot"):
                    table.setdefault(f"{name}/{way}", []).append(kit.snr_db(ref, fn(codec, codes)))
    return {k: {"min": min(v), "mean": sum(v) / len(v), "per_sequence": v} for k, v in table.items()}


def main(kit, argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m koe.bench.tool codec", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="real", choices=["tiny", "real"])
    p.add_argument("--seconds", type=float, nargs="+", default=[2.0, 8.0, 24.0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sequences", type=int, default=4)
    p.add_argument("--fast", nargs="+", default=["bf16", "fp32"], choices=["bf16", "fp32"], help="the fast codecs to measure")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--models", type=Path, help="cache folder (default: koe bench's)")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    result = measure(kit, codec_folder(kit, a.size, a.models), a.seconds, a.runs, a.sequences, a.fast)
    result.update({"size": a.size, "threads": torch.get_num_threads(), "torch": torch.__version__, "cpu": platform.processor() or platform.machine()})
    for entry in result["lengths"]:
        cells = "  ".join(f"{k} {v['median']:.3f} ({v['min']:.3f})" for k, v in entry["s_per_audio_s"].items())
        print(f"{entry['seconds']:5.1f} s audio, s per s: {cells}")
    for k, v in result["snr_db"].items():
        print(f"SNR vs exact one-shot {k}: min {v['min']:.1f} dB, mean {v['mean']:.1f} dB" if math.isfinite(v["min"]) else f"{k}: identical")
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))
    return 0
