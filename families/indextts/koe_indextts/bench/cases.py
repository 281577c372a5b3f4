"""IndexTTS's benchmark cases and their inputs, the same on both sides (koe's engine and upstream's
`IndexTTS.infer`).

Case -> the text. Every case is one clone request: TEXTS[case] in the voice of a 5 s clip (the same
22.05 kHz WAV on both sides, resampled to 24 kHz inside the request), upstream's generation
defaults (3 beams sampling their candidates, top-k 30, top-p 0.8, repetition penalty 10) except
`max_mel_tokens`, which is `--codes` on both sides: random weights seldom end a search, so the
cap is what a request makes (the `codes` column says how many each run made, stop code included
when one was drawn; the same on both sides, as the codes' hashes check). Both texts fit in one
segment (upstream's default 120 text tokens). Stdlib only: upstream's worker imports this file by path.
"""

from __future__ import annotations

CASES = {
    "en": "The weather is lovely today, so we will take a long walk in the park after lunch.",
    "zh": "今天天气很好，午饭以后我们一起去公园散步吧。",
}
DEFAULT_CASES = tuple(CASES)
REF_SECONDS, REF_RATE = 5.0, 22050
SAMPLE_RATE = 24000  # IndexTTS 1.5 speaks at 24 kHz
SEGMENT_TOKENS = 120  # upstream's default max_text_tokens_per_segment
PARTS = ("text_s", "reference_s", "search_s", "latent_s", "vocoder_s")


def request(cmd: dict) -> tuple[str, str, int, int]:
    """A `run` command's (text, reference WAV, max_mel_tokens, seed)."""
    return CASES[cmd["case"]], cmd["reference"], int(cmd["codes"]), int(cmd.get("seed", 0))


def codes_sha1(segments: list[list[int]]) -> str:
    """SHA-1 of every segment's codes as the searches returned them, in order."""
    import hashlib
    import json

    return hashlib.sha1(json.dumps(segments).encode()).hexdigest()


def result(wire, total_s: float, wave, parts: dict, codes: int, segments: int, codes_sha1: str, **extra) -> dict:
    """One request's numbers, both sides alike. `wave`: BigVGAN's float output of every segment,
    joined (what the hashes compare; the request's audio is it at 16-bit scale, clamped). `parts`:
    the seconds of text_s (normalising, tokens, segments), reference_s (the clip's log-mel, the GPT's
    conditioning latents and the vocoder's speaker embedding), search_s (the beam-sampled code
    search: its prompt and every step), latent_s (the GPT's pass over the kept codes) and vocoder_s
    (BigVGAN without its speaker encoder); `codes`: what the searches returned; other_s is the rest."""
    audio_s = len(wave) / SAMPLE_RATE
    return {
        "total_s": total_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        **parts,
        "codes": codes,
        "ms_per_code": 1e3 * parts["search_s"] / max(codes, 1),
        "other_s": total_s - sum(parts[k] for k in PARTS),
        "segments": segments,
        "wave_sha1": wire.wave_sha1(wave),
        "codes_sha1": codes_sha1,
        "audio_samples": len(wave),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
