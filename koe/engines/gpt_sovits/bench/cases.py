"""GPT-SoVITS's benchmark cases and their inputs, the same on both sides (koe and upstream's `TTS.run`).

Case -> (variant, `TTS.run` inputs without the reference's path). Every case is one zero-shot
request: TEXT (English, or Chinese for "v2_zh") in the voice of a 5 s reference clip (the same
32 kHz 16-bit WAV on both sides) whose transcript is PROMPT_TEXT, upstream's defaults otherwise
(cut1, top_k 15, batch_size 1, parallel_infer), a fixed seed. Each request is a first call with
that reference on both sides: upstream's prompt cache is emptied before each run (it would skip
HuBERT on a reference it has seen, and with it HuBERT's layer-drop draws after the seed), and koe
prepares the voice inside each run. Random weights end the AR decode at random, so the length
depends on the seed; the `tokens` column says what each run made (the same on both sides).

A variant is a model folder (`models.VARIANTS`); a later version (v4: the CFM DiT and its vocoder)
adds its variant here with its cases, and its folder writer in `models`.
Stdlib only: upstream's worker imports this file by path.
"""

from __future__ import annotations

TEXT = "Hello there. This is a quick test of the voice, at an even pace."
TEXT_ZH = "你好，世界！今天天气很好，我们去公园散步吧。"
PROMPT_TEXT = "This is a test of my voice."
REF_SECONDS, REF_RATE = 5.0, 32000
SAMPLE_RATE = 32000  # v1/v2 speak at 32 kHz
SEED = 1
CASES = {
    "v2": ("GPT-SoVITS-v2", {"text": TEXT, "text_lang": "en"}),
    "v2_zh": ("GPT-SoVITS-v2", {"text": TEXT_ZH, "text_lang": "zh"}),
}
DEFAULT_CASES = ("v2",)
UPSTREAM_VERSION = {"GPT-SoVITS-v2": "v2"}  # TTS_Config's "version" per variant


def inputs(cmd: dict) -> tuple[str, dict]:
    """A `run` command's variant and `TTS.run` inputs (the reference's path included)."""
    variant, given = CASES[cmd["case"]]
    return variant, {
        **given,
        "ref_audio_path": cmd["reference"],
        "prompt_text": PROMPT_TEXT,
        "prompt_lang": "en",
        "seed": int(cmd.get("seed", SEED)),
    }


def result(wire, total_s: float, samples, int16, parts: dict, tokens: int, **extra) -> dict:
    """One request's numbers, both sides alike: seconds, seconds per second of audio, and the split:
    `parts` holds reference_s (the reference clip: HuBERT's codes and its spectrogram), ar_s (the
    AR decode: every batch's `infer_panel`) and sovits_s (every SoVITS decode); other_s is the rest
    (the text front end, BERT features, post-processing); reference_s takes in the transcript's
    phonemes and BERT features too. ms_per_token: the AR decode's time per semantic token made (its
    prompt's prefill included). `samples`: the float32 audio before upstream's int16 step
    (`wave_sha1`); `int16`: the int16 samples `TTS.run` returns (`int16_sha1`)."""
    import numpy as np

    samples = np.asarray(samples, dtype=np.float32)
    audio_s = len(samples) / SAMPLE_RATE
    return {
        "total_s": total_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        **parts,
        "tokens": tokens,
        "ms_per_token": 1e3 * parts["ar_s"] / max(tokens, 1),
        "other_s": total_s - sum(parts.values()),
        "wave_sha1": wire.wave_sha1(samples),
        "int16_sha1": wire.wave_sha1(np.asarray(int16, dtype=np.int16).astype(np.float32)),
        "audio_samples": len(samples),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
