"""What the benchmark's workers share: the line protocol, the reference clip, timing helpers.

Stdlib, numpy and torch only: the compared sides' workers (the scripts a family's bench declares,
`koe.engines.benchmark.Side`) import this file by path inside their own virtualenvs, where koe is
not installed. The cases and their texts are each family's (its `bench/cases.py`, stdlib only,
imported by path too); the koe side's worker is handed this module (`koe.bench.koe_worker`).

Protocol: the parent writes one JSON command per line on the worker's stdin; the worker answers
each with one line `@@bench@@ {json}` on its stdout. Anything else a library prints goes to stderr.
"""

from __future__ import annotations

import cProfile
import functools
import io
import json
import os
import pstats
import resource
import sys
import time
import traceback
from collections.abc import Callable

PREFIX = "@@bench@@ "
REF_TEXT = "This is the transcript of the reference clip used for cloning."


def timed_stream(chunks, started: float, sample_rate: int) -> dict:
    """Time a stream of chunks (each `.samples`, a sized array) as a listener feels it: the time to
    the first non-empty chunk (`ttfa_s`) and the real-time factor after it (`stream_rtf`: wall time
    from the first to the last chunk over the audio the later chunks hold; < 1 keeps ahead of playback)."""
    first = last = None
    first_samples = count = 0
    for chunk in chunks:
        n = len(chunk.samples)
        if not n:
            continue
        last = time.perf_counter() - started
        if first is None:
            first, first_samples = last, n
        count += n
    later_s = (count - first_samples) / sample_rate
    rtf = (last - first) / later_s if first is not None and later_s > 0 else None
    return {"ttfa_s": first, "stream_rtf": rtf, "stream_total_s": time.perf_counter() - started, "audio_samples": count}


def write_reference_wav(path, seconds: float = 3.0, sample_rate: int = 24000):
    """`reference_clip` as a mono 16-bit PCM WAV at `path` (stdlib `wave`); returns the path."""
    import wave

    import numpy as np

    samples, sr = reference_clip(seconds, sample_rate)
    pcm = np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())
    return path


class CallTimer:
    """Wraps a function: counts its calls, adds up their seconds, and keeps `shape(args)` per call."""

    def __init__(self, fn: Callable, shape: Callable | None = None) -> None:
        self.fn, self.shape = fn, shape
        self.calls, self.seconds, self.shapes = 0, 0.0, []
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t
            self.calls += 1
            if self.shape is not None:
                self.shapes.append(self.shape(*args, **kwargs))


def wave_sha1(samples) -> str:
    """SHA-1 of a waveform's float32 bytes (upstream's float64 cross-faded output is cast first)."""
    import hashlib

    import numpy as np

    return hashlib.sha1(np.ascontiguousarray(np.asarray(samples, dtype=np.float32)).tobytes()).hexdigest()


def reference_clip(seconds: float = 3.0, sample_rate: int = 24000):
    """A deterministic voiced-ish reference clip: a few harmonics under an envelope, plus a little noise.

    Its samples lie on the 16-bit PCM grid (multiples of 1/32768), as a real reference clip's do: a
    side that can only read a WAV file (a peer whose host hands engines 16-bit WAVs) gets
    from `write_reference_wav` exactly the samples the others take as an array."""
    import numpy as np

    t = np.arange(int(seconds * sample_rate)) / sample_rate
    f0 = 120 + 20 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    wav = sum(np.sin(k * phase) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * 2.0 * t) ** 2)
    wav = wav + 0.01 * np.random.default_rng(0).standard_normal(len(t))
    return (np.round(0.3 * wav / np.abs(wav).max() * 32768) / 32768).astype(np.float32), sample_rate


def peak_rss() -> int:
    """Peak resident set size of this process in bytes: `VmHWM` (fresh at exec, unlike `ru_maxrss`,
    which a child inherits from the process that started it)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def minor_faults() -> int:
    """Minor page faults of this process so far (first touches of fresh memory, mostly)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def current_rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def profiled(kind: str | None, fn: Callable[[], dict], rows: int = 30) -> dict:
    """Run `fn`; with kind "cprofile" or "torch", attach the profile's top table as `profile`."""
    if kind is None:
        return fn()
    if kind == "cprofile":
        prof = cProfile.Profile()
        result = prof.runcall(fn)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(rows)
        result["profile"] = text.getvalue()
        return result
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        result = fn()
    result["profile"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
    return result


def serve(handlers: dict[str, Callable[[dict], dict]]) -> None:
    """Answer commands from stdin until `{"op": "quit"}` or end of input."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints from libraries go to stderr, not into the protocol
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        if command.get("op") == "quit":
            break
        try:
            reply = {"ok": True, **handlers[command["op"]](command)}
        except Exception as e:  # reported to the parent, which raises it there
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        replies.write(PREFIX + json.dumps(reply) + "\n")
        replies.flush()


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(int(threads))


def run_case(cmd: dict, fn: Callable[[], dict]) -> dict:
    """A worker's `run`: `fn()`, at `cmd["threads"]` torch threads for this run only when given,
    profiled when `cmd["profile"]` asks (`profiled`)."""
    import torch

    threads = torch.get_num_threads()
    if cmd.get("threads"):
        torch.set_num_threads(int(cmd["threads"]))
    try:
        return profiled(cmd.get("profile"), fn)
    finally:
        torch.set_num_threads(threads)


class SpanTimer:
    """Wraps a function: per call, its seconds and `shape(args)`; `total(pred)` adds up the calls whose shape passes."""

    def __init__(self, fn: Callable, shape: Callable | None = None) -> None:
        self.fn, self.shape = fn, shape
        self.calls: list[tuple] = []
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.calls.append((self.shape(*args, **kwargs) if self.shape else None, time.perf_counter() - t))

    def total(self, pred: Callable = lambda shape: True) -> float:
        return sum(s for shape, s in self.calls if pred(shape))

    def count(self, pred: Callable = lambda shape: True) -> int:
        return sum(1 for shape, _ in self.calls if pred(shape))
