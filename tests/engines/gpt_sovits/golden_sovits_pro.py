"""Inputs of the `sovits_pro` golden (koe's side): tiny SoVITS v2Pro and v2ProPlus files in the
released format (`fixtures_sovits.write_sovits`, headers b"05" / b"06"), the random
speaker-verification checkpoint of the `sv` topic (its seed) where upstream looks for it, two
reference clips as WAV files, and decode cases as `TTS.run` makes them with SV: each reference's
spectrogram and 16 kHz audio from `_get_ref_spec`, the latter's `SV.compute_embedding3`, and
`decode(codes, phones, [specs], speed=..., sv_emb=[embeddings])`.

- `s2Gv2Pro.pth`, `s2Gv2ProPlus.pth`; `sv/pretrained_eres2netv2w24s4ep4.ckpt`.
- `a.wav` (24 kHz stereo, 1.6 s), `b.wav` (44.1 kHz mono, 1.2 s): voice-like tones, 16-bit PCM.
  (Upstream's window of 3-10 s is checked on the HuBERT path, not here; short clips keep the
  speaker model's share of the test time small.)
- `inputs.npz`: `codes.<name>` (1, 1, T) int64, `phones.<name>` (1, N) int64 of v2's 732 symbols.
- `cases.json`: per case the model, codes, phones, references, `speed`, `noise_scale` and the seed
  set right before the call.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from koe.audio.io import write_wav
from koe.engines.gpt_sovits.fixtures_sovits import random_sovits_state, write_sovits
from koe.engines.gpt_sovits.fixtures_sv import sv_state_sha256, write_sv
from koe.engines.gpt_sovits.sv import SV_FILE
from koe.runtime.weights import state_sha256

SEEDS = {"v2Pro": 21, "v2ProPlus": 22}
SV_SEED = 17  # the sv topic's
CLIPS = {"a": (24000, 2, 1.6), "b": (44100, 1, 1.2)}
CODES = {"short": 10, "mid": 27}
PHONES = {"short": 8, "mid": 21}
CASES = {
    "pro_one": {"model": "v2Pro", "codes": "short", "phones": "short", "refs": ["a"], "speed": 1.0, "noise_scale": 0.5, "seed": 1},
    "pro_two": {"model": "v2Pro", "codes": "mid", "phones": "mid", "refs": ["a", "b"], "speed": 1.0, "noise_scale": 0.5, "seed": 2},
    "pro_slow": {"model": "v2Pro", "codes": "short", "phones": "mid", "refs": ["b"], "speed": 0.8, "noise_scale": 0.7, "seed": 3},
    "plus_one": {"model": "v2ProPlus", "codes": "short", "phones": "short", "refs": ["b"], "speed": 1.0, "noise_scale": 0.5, "seed": 4},
    "plus_two": {"model": "v2ProPlus", "codes": "mid", "phones": "short", "refs": ["b", "a"], "speed": 1.25, "noise_scale": 0.3, "seed": 5},
}
FULL = ("pro_one",)  # cases whose whole waveform is kept; the others: hash, shape, head and tail


def pth(model: str) -> str:
    return f"s2G{model}.pth"


def clip(name: str) -> np.ndarray:
    """A seeded voice-like clip (n, channels) float32 under 0.6."""
    rate, channels, seconds = CLIPS[name]
    g = np.random.default_rng(sum(map(ord, name)) + 7)
    n = round(rate * seconds)
    t = np.arange(n) / rate
    f0 = (140 if name == "a" else 210) + 30 * np.sin(2 * np.pi * 0.8 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    tone = sum(np.sin(k * phase) / k**0.8 for k in range(1, 12)) * (0.35 + 0.65 * np.sin(2 * np.pi * 2.1 * t) ** 2)
    out = np.stack([0.2 * tone * (1 - 0.3 * c) + 0.015 * g.standard_normal(n) for c in range(channels)], axis=1)
    return np.clip(out, -0.6, 0.6).astype(np.float32)


def inputs() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(31)
    out: dict[str, np.ndarray] = {}
    for name, n in CODES.items():
        out[f"codes.{name}"] = torch.randint(0, 1024, (1, 1, n), generator=g).numpy()
    for name, n in PHONES.items():
        out[f"phones.{name}"] = torch.randint(0, 732, (1, n), generator=g).numpy()
    return out


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for model, seed in SEEDS.items():
        write_sovits(folder / pth(model), "tiny", seed=seed, version=model)
    write_sv(folder / SV_FILE, SV_SEED)
    for name, (rate, _, _) in CLIPS.items():
        write_wav(folder / f"{name}.wav", clip(name), rate, subtype="PCM_16")
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "cases.json").write_text(json.dumps({"cases": CASES, "full": FULL}, indent=1))
    lines = [f"{model} {state_sha256(random_sovits_state('tiny', seed, model))}" for model, seed in SEEDS.items()]
    (folder / "state_sha256.txt").write_text("\n".join([*lines, f"sv {sv_state_sha256(SV_SEED)}"]) + "\n")
