"""OmniVoice's benchmark cases and their inputs, the same on both sides (koe and omnivoice).

Case -> (mode, unmasking steps). "own32" / "own16" speak TEXT in the model's own voice at upstream's
32 steps and at 16; "clone32" clones a 5 s clip (REF_TEXT its transcript; the same 24 kHz WAV on both
sides), the prompt made inside the request on both sides. The length is upstream's estimate from the
text on both sides (random weights do not change it). Stdlib only: upstream's worker imports this
file by path.
"""

from __future__ import annotations

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green hills."
REF_TEXT = "This is the transcript of the five second prompt clip that the model clones, in the same voice."
CASES = {"own32": ("own", 32), "own16": ("own", 16), "clone32": ("clone", 32)}
DEFAULT_CASES = ("own32", "own16", "clone32")
REF_SECONDS, REF_RATE = 5.0, 24000
SAMPLE_RATE = 24000


def request(cmd: dict) -> tuple[str, int, str, int]:
    """A `run` command's (mode, steps, reference WAV, seed)."""
    mode, steps = CASES[cmd["case"]]
    return mode, steps, cmd["reference"], int(cmd.get("seed", 0))


def result(wire, total_s: float, samples, prompt_s: float, text_s: float, backbone_s: float, steps: int, decode_s: float, **extra) -> dict:
    """One request's numbers, both sides alike: seconds, seconds per second of audio, the split
    (prompt, text front end, backbone steps, tokenizer decode, the rest: sampling and post-processing)."""
    audio_s = len(samples) / SAMPLE_RATE
    return {
        "total_s": total_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        "prompt_s": prompt_s,
        "text_s": text_s,
        "backbone_s": backbone_s,
        "ms_per_step": 1e3 * backbone_s / max(steps, 1),
        "decode_s": decode_s,
        "other_s": total_s - prompt_s - text_s - backbone_s - decode_s,
        "steps": steps,
        "wave_sha1": wire.wave_sha1(samples),
        "audio_samples": len(samples),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
