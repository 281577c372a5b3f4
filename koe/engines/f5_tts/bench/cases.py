"""F5-TTS's benchmark cases and their inputs, the same on both sides (koe and f5-tts).

Case -> (NFE steps, text). One request each: the 3 s reference clip (`wire.reference_clip`,
written once as a 16-bit WAV that both sides read: the same file, the same samples) with
`wire.REF_TEXT` as its transcript, then the text. "short" is two sentences (one text batch, about
4.5 s of speech); "long" is several sentences that upstream's byte budget cuts into more than one
batch. Stdlib only: upstream's worker imports this file by path in its own virtualenv.
"""

from __future__ import annotations

SAMPLE_RATE = 24000
TEXTS = {
    "short": "The quick brown fox jumps over the lazy dog. Then it runs far away into the quiet green hills.",
    "long": (
        "A benchmark measures what a program does, not what its authors hope it does. It runs the same request "
        "again and again, on the same machine, with the same seed, and reports the median and the minimum. "
        "Speech synthesis turns written words into sound. This model draws a whole mel spectrogram at once, "
        "from noise, in a fixed number of steps, and a vocoder turns the spectrogram into a waveform. "
        "Long texts are cut into batches at sentence ends, and the batches are joined with a short cross-fade. "
        "Every batch repeats the reference clip and its transcript, so the model keeps the same voice throughout."
    ),
}
CASES = {"nfe32": (32, "short"), "nfe16": (16, "short"), "long": (16, "long")}
DEFAULT_CASES = ("nfe32", "nfe16")


def request(cmd: dict) -> tuple[str, int]:
    """A `run` command's text and NFE: the case's, or `cmd["nfe"]` when given."""
    nfe, text = CASES[cmd["case"]]
    return TEXTS[text], int(cmd.get("nfe") or nfe)


def result(wire, total_s: float, prompt_s: float, samples, text_s: float, dit_s: float, vocoder_s: float, steps, **extra) -> dict:
    """One request's numbers, both sides alike: seconds, real-time factor, the split, ms per DiT step
    (`steps`: a `wire.CallTimer` around the DiT's forward)."""
    audio_s = len(samples) / SAMPLE_RATE
    return {
        "total_s": total_s,
        "prompt_s": prompt_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        "text_s": text_s,
        "dit_s": dit_s,
        "vocoder_s": vocoder_s,
        "other_s": total_s - text_s - dit_s - vocoder_s,
        "dit_steps": steps.calls,
        "ms_per_step": 1e3 * steps.seconds / max(steps.calls, 1),
        "forward_s": steps.seconds,
        "seq_frames": steps.shapes,
        "wave_sha1": wire.wave_sha1(samples),
        "audio_samples": len(samples),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
