"""Inputs of the `hubert` golden (koe's side): a tiny `chinese-hubert-base` (fixtures_hubert: 768
wide, 2 layers, small convs) and two 16 kHz clips of different lengths as float32 `.npy` (the
samples HuBERT is given: a reference's 16 kHz samples and the zeros upstream appends are the
`reference` topic's).

- `hubert/`: `write_random_hubert(SEED)` (config.json, preprocessor_config.json, fp16 pytorch_model.bin).
- `short.npy` (3.3 s + 0.6 s of zeros, as a reference reaches HuBERT), `long.npy` (7.77 s, an
  odd length): voice-like tones with noise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from koe.engines.gpt_sovits.fixtures_hubert import random_hubert_state, write_random_hubert
from koe.runtime.weights import state_sha256

SEED = 5
CLIPS = {"short": (3.3, 9600), "long": (7.77, 0)}  # seconds of voice, zeros appended


def clip(name: str) -> np.ndarray:
    """A seeded voice-like 16 kHz clip, float32 (N,)."""
    seconds, zeros = CLIPS[name]
    g = np.random.default_rng(sum(map(ord, name)))
    n = int(16000 * seconds)
    t = np.arange(n) / 16000
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.9 * t)
    phase = 2 * np.pi * np.cumsum(f0) / 16000
    tone = sum(np.sin(k * phase) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * 2.7 * t) ** 2)
    voice = 0.2 * tone + 0.01 * g.standard_normal(n)
    return np.concatenate([voice, np.zeros(zeros)]).astype(np.float32)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_random_hubert(folder / "hubert", SEED)
    for name in CLIPS:
        np.save(folder / f"{name}.npy", clip(name))
    (folder / "state_sha256.txt").write_text(state_sha256(random_hubert_state(SEED)) + "\n")
