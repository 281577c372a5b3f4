"""Inputs of the `codec` golden (koe's side): Fish Speech S2's codec (`codec.pth`, the modded DAC)
with koe's seeded tiny weights (fixtures_codec), reference clips as 16-bit WAV files, and codes to
decode.

- `codec.pth`: `write_codec(folder, "tiny", seed=SEED)`; `sizes.json`: the packaged YAML's entries
  the tiny codec changes (`CodecConfig.yaml_overrides`), which the oracle sets on its copy.
- clips: `voice44k.wav` (mono, 44.1 kHz, 7 s: more frames than the windows of the encoder's and the
  quantizer's transformers), `voice24k_stereo.wav` (stereo, 24 kHz, 2.3 s: averaged and resampled),
  `blip16k.wav` (mono, 16 kHz, 0.05 s: less than one code frame).
- `codes_short.npy` (10, 12): random codes with a few past their codebook's end (upstream clamps
  them); `codes_long.npy` (10, 140): more frames than the post-transformer's window.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from koe_fish_speech.fixtures_codec import codec_config, random_codec_state, write_codec

from koe.audio.io import write_wav
from koe.runtime.weights import state_sha256

SEED = 7
CLIPS = {"voice44k": (44100, 1, 7.0), "voice24k_stereo": (24000, 2, 2.3), "blip16k": (16000, 1, 0.05)}  # rate, channels, seconds
CODES = {"codes_short": 12, "codes_long": 140}
DTYPES = ("float32", "bfloat16")
BY_CPU_KIND = True  # the bfloat16 codec takes oneDNN's bf16 kernels, which differ between kinds of AVX-512 CPU (cpu_kind.py)


def clip(name: str) -> np.ndarray:
    """A seeded voice-like clip (n, channels) float32 in [-0.5, 0.5]: a gliding harmonic tone with
    a syllable envelope, and noise."""
    rate, channels, seconds = CLIPS[name]
    g = np.random.default_rng(sum(map(ord, name)))
    n = int(rate * seconds)
    t = np.arange(n) / rate
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    tone = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3.1 * t) ** 2
    out = []
    for c in range(channels):
        out.append(0.25 * envelope * tone * (1 - 0.2 * c) + 0.02 * g.standard_normal(n))
    return np.clip(np.stack(out, axis=1), -0.5, 0.5).astype(np.float32)


def codes(name: str) -> np.ndarray:
    """(10, frames) int64 in range, and for `codes_short` four entries past their codebook's end."""
    c = codec_config("tiny")
    g = torch.Generator().manual_seed(SEED + CODES[name])
    frames = CODES[name]
    out = torch.cat(
        [torch.randint(0, c.semantic_codebook_size, (1, frames), generator=g), torch.randint(0, c.codebook_size, (c.n_codebooks, frames), generator=g)]
    )
    if name == "codes_short":
        out[0, 3], out[0, 7], out[2, 5], out[9, 11] = 4096, 9000, 1024, 5000
    return out.numpy()


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_codec(folder, "tiny", seed=SEED)
    (folder / "sizes.json").write_text(json.dumps(codec_config("tiny").yaml_overrides(), indent=1))
    for name, (rate, _, _) in CLIPS.items():
        write_wav(folder / f"{name}.wav", clip(name), rate)
    for name in CODES:
        np.save(folder / f"{name}.npy", codes(name))
    (folder / "state_sha256.txt").write_text(state_sha256(random_codec_state("tiny", SEED)) + "\n")
