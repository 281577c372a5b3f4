"""Inputs of the `reference` golden (koe's side): reference clips as WAV files at several rates and
channel counts, and the tiny `chinese-hubert-base` of the `hubert` topic (its seed), for the path
upstream's `TTS.set_ref_audio` takes with a v2 model (SoVITS at 32 kHz, n_fft 2048, hop 640).

Clips (rate, channels, seconds, subtype): 16 kHz mono, 24 kHz stereo, 44.1 kHz mono, 48 kHz
stereo, 32 kHz mono of exactly 3 s (the window's low edge; no resampling for the spectrogram),
16 kHz mono of exactly 10 s (the high edge), a 48 kHz float WAV peaking at 1.6 (the spectrogram's
peak division), and two outside the window: 22.05 kHz 2.9 s and 16 kHz 10.05 s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from koe.audio.io import write_wav
from koe.engines.gpt_sovits.fixtures_hubert import random_hubert_state, write_random_hubert
from koe.runtime.weights import state_sha256

SEED = 5  # the hubert topic's
CLIPS = {
    "mono16k": (16000, 1, 3.5, "PCM_16"),
    "stereo24k": (24000, 2, 4.2, "PCM_16"),
    "mono44k": (44100, 1, 5.0, "PCM_16"),
    "stereo48k": (48000, 2, 3.1, "PCM_16"),
    "edge3s32k": (32000, 1, 3.0, "PCM_16"),
    "edge10s16k": (16000, 1, 10.0, "PCM_16"),
    "loud48k": (48000, 1, 4.0, "FLOAT"),
    "short22k": (22050, 1, 2.9, "PCM_16"),
    "long16k": (16000, 1, 10.05, "PCM_16"),
}
TOO_SHORT_OR_LONG = ("short22k", "long16k")
HUBERT_CLIPS = ("stereo24k", "mono44k")  # whose HuBERT features are recorded too
SV_CLIPS = ("stereo48k", "loud48k")  # whose v2Pro 16 kHz audio is recorded too


def clip(name: str) -> np.ndarray:
    """A seeded voice-like clip (n, channels) float32; `loud48k` peaks at 1.6, the rest stay under 0.6."""
    rate, channels, seconds, _ = CLIPS[name]
    g = np.random.default_rng(sum(map(ord, name)))
    n = round(rate * seconds)
    t = np.arange(n) / rate
    f0 = 150 + 35 * np.sin(2 * np.pi * 0.6 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    tone = sum(np.sin(k * phase) / k for k in range(1, 9)) * (0.4 + 0.6 * np.sin(2 * np.pi * 2.3 * t) ** 2)
    out = np.stack([0.3 * tone * (1 - 0.25 * c) + 0.02 * g.standard_normal(n) for c in range(channels)], axis=1)
    out = np.clip(out, -0.6, 0.6)
    if name == "loud48k":
        out = out / np.abs(out).max() * 1.6
    return out.astype(np.float32)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_random_hubert(folder / "hubert", SEED)
    for name, (rate, _, _, subtype) in CLIPS.items():
        write_wav(folder / f"{name}.wav", clip(name), rate, subtype=subtype)
    (folder / "state_sha256.txt").write_text(state_sha256(random_hubert_state(SEED)) + "\n")
