"""Inputs of the `mel22k` golden (koe's side): 22.05 kHz clips and `s2mel.preprocess_params` sections.

Clips are seeded tones and noise `(1, samples)` float32 (what upstream's `mel_fn` gets after its
resampling to 22.05 kHz), from the shortest one the reflect padding allows (385 samples, one frame)
to 1.5 s. Configs: IndexTTS 2's (n_fft 1024, hop 256, 80 mels, fmax "None"), one with an fmax (which
upstream reads as 8000 Hz whatever it says) and an fmin, and a smaller STFT whose window is shorter
than the FFT. `state_sha256.txt` holds one hash of the clips' samples (no weights here).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import yaml
from koe_indextts.fixtures import tone_clip

RATE = 22050
# name -> samples
CLIPS: dict[str, int] = {"min": 385, "short": 1024, "fifth": 4410, "second": 22127, "long": 33075}
# config -> (preprocess_params, clips it runs on)
CONFIGS: dict[str, tuple[dict, tuple[str, ...]]] = {
    "release": (
        {"sr": RATE, "spect_params": {"n_fft": 1024, "win_length": 1024, "hop_length": 256, "n_mels": 80, "fmin": 0, "fmax": "None"}},
        tuple(CLIPS),
    ),
    "fmax": (
        {"sr": RATE, "spect_params": {"n_fft": 1024, "win_length": 1024, "hop_length": 256, "n_mels": 80, "fmin": 40, "fmax": 11025}},
        ("short", "fifth"),
    ),
    "small": (
        {"sr": RATE, "spect_params": {"n_fft": 512, "win_length": 400, "hop_length": 128, "n_mels": 64}},
        ("min", "fifth"),
    ),
}


def clip(name: str) -> np.ndarray:
    """Seeded tones under a slow envelope plus noise: float32 `(1, samples)` within +-0.9."""
    return tone_clip(name, RATE, CLIPS[name]).reshape(1, -1)


def inputs_sha256() -> str:
    h = hashlib.sha256()
    for name in CLIPS:
        h.update(f"{name}:{CLIPS[name]};".encode() + clip(name).tobytes())
    return h.hexdigest()


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in CLIPS:
        np.save(folder / f"{name}.npy", clip(name))
    for config, (params, _) in CONFIGS.items():
        (folder / f"{config}.yaml").write_text(yaml.safe_dump({"s2mel": {"preprocess_params": params}}, sort_keys=False))
    (folder / "cases.json").write_text(json.dumps({config: list(names) for config, (_, names) in CONFIGS.items()}))
    (folder / "state_sha256.txt").write_text(inputs_sha256() + "\n")
