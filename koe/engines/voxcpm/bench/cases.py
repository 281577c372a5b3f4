"""VoxCPM's benchmark cases and their inputs, the same on both sides (koe and voxcpm).

Case -> (mode, text). Every request makes exactly `patches` latent patches on both sides (min_len
= max_len = patches, retry_badcase off: with random weights the stop head's verdict is noise, so a
stopped-by-stop-head length would not be comparable). "short" speaks in the model's own voice
(zero-shot), "clone" continues a 5 s prompt clip (REF_TEXT its transcript; the same 16 kHz WAV on
both sides), "stream" is "short" through the streaming decode (first-chunk latency: the time to
the first non-empty chunk). Stdlib only: upstream's worker imports this file by path.
"""

from __future__ import annotations

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green hills."
REF_TEXT = "This is the transcript of the five second prompt clip that the model continues from, in the same voice."
CASES = {"short": ("one_shot", TEXT), "clone": ("clone", TEXT), "stream": ("stream", TEXT)}
DEFAULT_CASES = ("short", "clone", "stream")
REF_SECONDS, REF_RATE = 5.0, 16000


def request(cmd: dict) -> tuple[str, str, str, int, int, int]:
    """A `run` command's (mode, text, reference WAV, patches, CFM steps per patch, seed)."""
    mode, text = CASES[cmd["case"]]
    return mode, text, cmd["reference"], int(cmd["patches"]), int(cmd.get("timesteps", 10)), int(cmd.get("seed", 0))


def result(
    wire,
    total_s: float,
    samples,
    sample_rate: int,
    patches: int,
    prefill_s: float,
    base_s: float,
    residual_s: float,
    dit_s: float,
    locenc_s: float,
    vae_s: float,
    **extra,
) -> dict:
    """One request's numbers, both sides alike: seconds, real-time factor, ms per latent patch by part."""
    audio_s = len(samples) / sample_rate
    n = max(patches, 1)
    loop_s = base_s + residual_s + dit_s + locenc_s
    return {
        "total_s": total_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        "patches": patches,
        "prefill_s": prefill_s,
        "ms_per_patch": 1e3 * (base_s + residual_s + dit_s + locenc_s + vae_s) / n,
        "base_lm_ms": 1e3 * base_s / n,
        "residual_lm_ms": 1e3 * residual_s / n,
        "dit_ms": 1e3 * dit_s / n,
        "locenc_ms": 1e3 * locenc_s / n,
        "vae_ms": 1e3 * vae_s / n,
        "other_s": total_s - prefill_s - loop_s - vae_s - extra.get("prompt_s", 0.0),
        "wave_sha1": wire.wave_sha1(samples),
        "audio_samples": len(samples),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
