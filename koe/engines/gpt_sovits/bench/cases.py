"""GPT-SoVITS's benchmark cases and their inputs, the same on both sides (koe and upstream's `TTS.run`).

Case -> (variant, `TTS.run` inputs without the reference's path). Every case is one zero-shot
request: TEXT (English, or Chinese for "v2_zh") in the voice of a 5 s reference clip (the same
32 kHz 16-bit WAV on both sides) whose transcript is PROMPT_TEXT, upstream's defaults otherwise
(cut1, top_k 15, batch_size 1, parallel_infer), a fixed seed. "v4" runs its CFM DiT for
V4_SAMPLE_STEPS[size] Euler steps instead of upstream's default 32: each step runs the ~330 M-number
DiT over the whole chunk (32 would take tens of minutes a request on a 2-core CPU), and the tiny
folder's DiT is that size too (upstream hard-codes it), so the tiny size takes one step. Each request is a first call with
that reference on both sides: upstream's prompt cache is emptied before each run (it would skip
HuBERT on a reference it has seen, and with it HuBERT's layer-drop draws after the seed), and koe
prepares the voice inside each run. Random weights end the AR decode at random, so the length
depends on the seed; the `tokens` column says what each run made (the same on both sides).

A variant is a model folder (`models.VARIANTS`, written by `models.write_model`); FILES names its
GPT and SoVITS files (v4's SoVITS file is a LoRA over its pretrained model, read from the folder
where upstream reads it), SAMPLE_RATES the rate it speaks at.
Stdlib only: upstream's worker imports this file by path.
"""

from __future__ import annotations

TEXT = "Hello there. This is a quick test of the voice, at an even pace."
TEXT_ZH = "你好，世界！今天天气很好，我们去公园散步吧。"
PROMPT_TEXT = "This is a test of my voice."
REF_SECONDS, REF_RATE = 5.0, 32000
SEED = 1
V4_SAMPLE_STEPS = {"tiny": 1, "real": 8}
CASES = {
    "v2": ("GPT-SoVITS-v2", {"text": TEXT, "text_lang": "en"}),
    "v2_zh": ("GPT-SoVITS-v2", {"text": TEXT_ZH, "text_lang": "zh"}),
    "v4": ("GPT-SoVITS-v4", {"text": TEXT, "text_lang": "en", "sample_steps": V4_SAMPLE_STEPS}),  # the size's steps (`inputs`)
}
DEFAULT_CASES = ("v2",)
UPSTREAM_VERSION = {"GPT-SoVITS-v2": "v2", "GPT-SoVITS-v4": "v4"}  # TTS_Config's "version" per variant
SAMPLE_RATES = {"GPT-SoVITS-v2": 32000, "GPT-SoVITS-v4": 48000}  # v2: SoVITS's 32 kHz; v4: its vocoder's 48 kHz
FILES = {  # variant -> its GPT and SoVITS files in the folder (the release's paths; v4's LoRA as upstream names one)
    "GPT-SoVITS-v2": ("gsv-v2final-pretrained/s1bert25hz-5kh-longer-epoch=12-step=369668.ckpt", "gsv-v2final-pretrained/s2G2333k.pth"),
    "GPT-SoVITS-v4": ("s1v3.ckpt", "SoVITS_weights_v4/fixture_e1_s10_l4.pth"),
}


def inputs(cmd: dict) -> tuple[str, dict]:
    """A `run` command's variant and `TTS.run` inputs (the reference's path included; v4's sample
    steps for the command's size)."""
    variant, given = CASES[cmd["case"]]
    steps = {"sample_steps": given["sample_steps"][cmd["size"]]} if "sample_steps" in given else {}
    return variant, {
        **given,
        **steps,
        "ref_audio_path": cmd["reference"],
        "prompt_text": PROMPT_TEXT,
        "prompt_lang": "en",
        "seed": int(cmd.get("seed", SEED)),
    }


def result(wire, sample_rate: int, total_s: float, samples, int16, parts: dict, tokens: int, **extra) -> dict:
    """One request's numbers, both sides alike: seconds, seconds per second of audio, and the split:
    `parts` holds reference_s (the reference clip: HuBERT's codes and its spectrogram), ar_s (the
    AR decode: every batch's `infer_panel`) and sovits_s (every SoVITS decode; v4: the CFM and its
    vocoder); other_s is the rest
    (the text front end, BERT features, post-processing); reference_s takes in the transcript's
    phonemes and BERT features too. ms_per_token: the AR decode's time per semantic token made (its
    prompt's prefill included). `samples`: the float32 audio before upstream's int16 step
    (`wave_sha1`); `int16`: the int16 samples `TTS.run` returns (`int16_sha1`)."""
    import numpy as np

    samples = np.asarray(samples, dtype=np.float32)
    audio_s = len(samples) / sample_rate
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
