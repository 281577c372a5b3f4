"""CosyVoice's benchmark cases and their inputs, the same on both sides (koe and upstream's AutoModel).

Case -> (variant, streamed). Every case is one zero-shot request (upstream's `inference_zero_shot`):
TEXT in the voice of a 3 s prompt clip (the same 24 kHz WAV on both sides) whose transcript is
PROMPT_TEXT (v3's with upstream's system prompt, which its LM needs), the prompt's features made
inside the request on both sides. "v2" / "v3" are offline (the whole request), "v2_stream" /
"v3_stream" streamed (upstream's growing hop, 25 tokens first). TEXT is short (9 text ids, so at
most 180 speech tokens: 20 per text id). Random weights end speech at random (v2 seldom: 3 end
ids; v3 often: any of its 200 extra ids past the speech tokens), so the length depends on the
seed: at the default seed 0 this text gives v2 180 tokens (7.2 s) and v3 70 at the released size
(109 tiny); the `tokens` column says what each run made (the same on both sides).
Stdlib only: upstream's worker imports this file by path.
"""

from __future__ import annotations

TEXT = "Good evening, this is a quick test."
PROMPT_TEXT = "This is the prompt clip."
V3_SYSTEM = "You are a helpful assistant.<|endofprompt|>"
CASES = {
    "v2": ("CosyVoice2-0.5B", False),
    "v2_stream": ("CosyVoice2-0.5B", True),
    "v3": ("Fun-CosyVoice3-0.5B-2512", False),
    "v3_stream": ("Fun-CosyVoice3-0.5B-2512", True),
}
DEFAULT_CASES = tuple(CASES)
REF_SECONDS, REF_RATE = 3.0, 24000
SAMPLE_RATE = 24000  # CosyVoice 2 and 3 speak at 24 kHz
RACING = ("v2_stream",)  # upstream's v2 stream draws from one generator in two threads: its bits vary run to run


def prompt_text(variant: str) -> str:
    """The prompt's transcript as the variant takes it (v3: after its system prompt)."""
    return (V3_SYSTEM if "CosyVoice3" in variant else "") + PROMPT_TEXT


def request(cmd: dict) -> tuple[str, bool, str, int]:
    """A `run` command's (variant, streamed, reference WAV, seed)."""
    variant, stream = CASES[cmd["case"]]
    return variant, stream, cmd["reference"], int(cmd.get("seed", 0))


def result(
    wire,
    total_s: float,
    samples,
    ttfa_s: float | None,
    parts: dict,
    tokens: int,
    prefill_s: float,
    stream: bool,
    overlapped: bool = False,
    **extra,
) -> dict:
    """One request's numbers, both sides alike: seconds, seconds per second of audio, the time to the
    first audio (streamed), and the split: `parts` holds the seconds of text_s (normalising and text
    ids), campplus_s (the speaker embedding), tokenizer_s (the prompt's S3 tokens), mel_s (the
    prompt's mel), lm_s (the LM's whole decode, prompt included), flow_s and vocoder_s; front_s is
    the first four. `prefill_s`: the LM's steps over the prompt (several positions at once);
    ms_per_token is the rest of the LM's time (one position per step, and sampling) per token. `overlapped`: the LM ran beside the rest (upstream's thread, streamed), so the
    remainder (other_s) is not a share of the total."""
    audio_s = len(samples) / SAMPLE_RATE
    front_s = parts["text_s"] + parts["campplus_s"] + parts["tokenizer_s"] + parts["mel_s"]
    spent = front_s + parts["lm_s"] + parts["flow_s"] + parts["vocoder_s"]
    return {
        "total_s": total_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        "ttfa_s": ttfa_s,
        "front_s": front_s,
        **parts,
        "tokens": tokens,
        "prefill_s": prefill_s,
        "ms_per_token": 1e3 * (parts["lm_s"] - prefill_s) / max(tokens, 1),
        "other_s": None if overlapped else total_s - spent,
        "stream": stream,
        "wave_sha1": wire.wave_sha1(samples),
        "audio_samples": len(samples),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
