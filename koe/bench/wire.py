"""What both benchmark workers share: the line protocol, the inputs of each case, timing helpers.

Stdlib, numpy and torch only: the upstream workers (scripts/bench_upstream_worker.py for Qwen3-TTS,
scripts/bench_f5_upstream_worker.py for F5-TTS) import this file by path inside upstream's own
virtualenvs, where koe is not installed.

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
FRAME_RATE = 12.5
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green hills."
BATCH_TEXTS = [
    TEXT,
    "A benchmark measures what a program does, not what its authors hope it does.",
    "Speech synthesis turns written words into sound, one frame at a time.",
    "Every frame reads the whole talker once and the code predictor fifteen times.",
    "On a small machine, memory bandwidth is the limit, not arithmetic.",
    "Seeds make random draws repeatable, which makes results comparable.",
    "The codec turns sixteen codes per frame into nineteen hundred and twenty samples.",
    "Warm-up runs are excluded; the median and the minimum of the rest are reported.",
]
INSTRUCT = "A calm, warm, low-pitched male voice speaking slowly and clearly."
REF_TEXT = "This is the transcript of the reference clip used for cloning."
SPEAKER = "ryan"
LANGUAGE = "english"
# Case -> (model kind, batch size). "streaming" measures the time to the first audio chunk.
CASES = {
    "custom_voice": ("custom_voice", 1),
    "voice_design": ("voice_design", 1),
    "clone_xvector": ("base", 1),
    "clone_icl": ("base", 1),
    "streaming": ("custom_voice", 1),
    "batch8": ("custom_voice", 8),
}


# F5-TTS cases: case -> (NFE steps, text). One request each: the 3 s reference clip below (written
# once as a 16-bit WAV that both sides read: the same file, the same samples) with REF_TEXT as its
# transcript, then the text. "short" is two sentences (one text batch, about 4.5 s of speech);
# "long" is several sentences that upstream's byte budget cuts into more than one batch.
F5_SAMPLE_RATE = 24000
QWEN_SAMPLE_RATE = 24000


def timed_stream(chunks, started: float, sample_rate: int = QWEN_SAMPLE_RATE) -> dict:
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
F5_TEXTS = {
    "short": "The quick brown fox jumps over the lazy dog. Then it runs far away into the quiet green hills.",
    "long": (
        "A benchmark measures what a program does, not what its authors hope it does. It runs the same request "
        "again and again, on the same machine, with the same seed, and reports the median and the minimum. "
        "Speech synthesis turns written words into sound. This model draws a whole mel spectrogram at once, "
        "from noise, in a fixed number of steps, and a vocoder turns the spectrogram into a waveform. "
        "Long texts are cut into batches at sentence ends, and the batches are joined with a short cross-fade. "
        "Every batch repeats the reference clip and its transcript, so the model keeps the same voice throughout."
    ),
}  # fmt: skip
F5_CASES = {"nfe32": (32, "short"), "nfe16": (16, "short"), "long": (16, "long")}
F5_DEFAULT_CASES = ("nfe32", "nfe16")


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


def f5_result(total_s: float, prompt_s: float, samples, text_s: float, dit_s: float, vocoder_s: float, steps: CallTimer, **extra) -> dict:
    """One F5-TTS request's numbers, both sides alike: seconds, real-time factor, the split, ms per DiT step."""
    audio_s = len(samples) / F5_SAMPLE_RATE
    return {
        "total_s": total_s, "prompt_s": prompt_s, "audio_s": audio_s, "rtf": total_s / max(audio_s, 1e-9),
        "text_s": text_s, "dit_s": dit_s, "vocoder_s": vocoder_s, "other_s": total_s - text_s - dit_s - vocoder_s,
        "dit_steps": steps.calls, "ms_per_step": 1e3 * steps.seconds / max(steps.calls, 1), "forward_s": steps.seconds,
        "seq_frames": steps.shapes, "wave_sha1": wave_sha1(samples), "audio_samples": len(samples), "peak_rss": peak_rss(), **extra,
    }  # fmt: skip


def reference_clip(seconds: float = 3.0, sample_rate: int = 24000):
    """A deterministic voiced-ish reference clip: a few harmonics under an envelope, plus a little noise.

    Its samples lie on the 16-bit PCM grid (multiples of 1/32768), as a real reference clip's do: a
    side that can only read a WAV file (the mizuoto peer: its host hands engines 16-bit WAVs) gets
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


class Phases:
    """Collects phase times of one run: the start of decoding, the end of the first talker
    forward (prefill), and the time spent in the code predictor."""

    def __init__(self) -> None:
        self.decode_start = 0.0
        self.prefill_end: float | None = None
        self.predictor_s = 0.0

    def mark_talker_forward(self) -> None:
        if self.prefill_end is None:
            self.prefill_end = time.perf_counter()

    def timed(self, fn: Callable) -> Callable:
        """`fn` wrapped so that its time adds to `predictor_s`."""

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.predictor_s += time.perf_counter() - t

        return wrapper

    def result(self, decode_end: float, frames: int) -> dict:
        prefill = (self.prefill_end or decode_end) - self.decode_start
        steps = max(frames, 1)
        per_frame = (decode_end - self.decode_start - prefill) / steps
        predictor = self.predictor_s / steps
        return {
            "prefill_s": prefill, "decode_s": decode_end - self.decode_start,
            "ms_per_frame": per_frame * 1e3, "predictor_ms_per_frame": predictor * 1e3,
            "talker_ms_per_frame": (per_frame - predictor) * 1e3,
        }  # fmt: skip


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


def run_f5_case(cmd: dict, run) -> dict:
    """Both F5-TTS workers' `run`: the case's NFE (or `cmd["nfe"]`) and text, at `cmd["threads"]`
    for this run only, profiled when asked; `run(reference, text, nfe, seed)` does the work."""
    import torch

    nfe, text = F5_CASES[cmd["case"]]
    nfe = int(cmd.get("nfe") or nfe)
    threads = torch.get_num_threads()
    if cmd.get("threads"):
        torch.set_num_threads(int(cmd["threads"]))
    try:
        return profiled(cmd.get("profile"), lambda: run(cmd["reference"], F5_TEXTS[text], nfe, int(cmd.get("seed", 0))))
    finally:
        torch.set_num_threads(threads)


# VoxCPM cases: case -> (mode, text). Every request makes exactly `patches` latent patches on
# both sides (min_len = max_len = patches, retry_badcase off: with random weights the stop head's
# verdict is noise, so a stopped-by-stop-head length would not be comparable). "short" speaks in
# the model's own voice (zero-shot), "clone" continues a 5 s prompt clip (VOX_REF_TEXT its
# transcript; the same 16 kHz WAV on both sides), "stream" is "short" through the streaming
# decode (first-chunk latency: the time to the first non-empty chunk).
VOX_TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green hills."
VOX_REF_TEXT = "This is the transcript of the five second prompt clip that the model continues from, in the same voice."
VOX_CASES = {"short": ("one_shot", VOX_TEXT), "clone": ("clone", VOX_TEXT), "stream": ("stream", VOX_TEXT)}
VOX_DEFAULT_CASES = ("short", "clone", "stream")
VOX_REF_SECONDS, VOX_REF_RATE = 5.0, 16000


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


def vox_result(total_s: float, samples, sample_rate: int, patches: int, prefill_s: float, base_s: float, residual_s: float,
               dit_s: float, locenc_s: float, vae_s: float, **extra) -> dict:
    """One VoxCPM request's numbers, both sides alike: seconds, real-time factor, ms per latent patch by part."""
    audio_s = len(samples) / sample_rate
    n = max(patches, 1)
    loop_s = base_s + residual_s + dit_s + locenc_s
    return {
        "total_s": total_s, "audio_s": audio_s, "rtf": total_s / max(audio_s, 1e-9), "patches": patches, "prefill_s": prefill_s,
        "ms_per_patch": 1e3 * (base_s + residual_s + dit_s + locenc_s + vae_s) / n, "base_lm_ms": 1e3 * base_s / n,
        "residual_lm_ms": 1e3 * residual_s / n, "dit_ms": 1e3 * dit_s / n, "locenc_ms": 1e3 * locenc_s / n, "vae_ms": 1e3 * vae_s / n,
        "other_s": total_s - prefill_s - loop_s - vae_s - extra.get("prompt_s", 0.0), "wave_sha1": wave_sha1(samples),
        "audio_samples": len(samples), "peak_rss": peak_rss(), **extra,
    }  # fmt: skip


def write_vox_reference_wav(path, seconds: float = VOX_REF_SECONDS, sample_rate: int = VOX_REF_RATE):
    """The VoxCPM prompt clip (`reference_clip`, 5 s at 16 kHz) as a 16-bit WAV; returns the path."""
    return write_reference_wav(path, seconds, sample_rate)


def run_vox_case(cmd: dict, run) -> dict:
    """Both VoxCPM workers' `run`: `run(mode, text, reference, patches, timesteps, seed)` at
    `cmd["threads"]` for this run only, profiled when asked."""
    import torch

    mode, text = VOX_CASES[cmd["case"]]
    threads = torch.get_num_threads()
    if cmd.get("threads"):
        torch.set_num_threads(int(cmd["threads"]))
    try:
        return profiled(cmd.get("profile"), lambda: run(mode, text, cmd["reference"], int(cmd["patches"]), int(cmd.get("timesteps", 10)),
                                                         int(cmd.get("seed", 0))))  # fmt: skip
    finally:
        torch.set_num_threads(threads)
