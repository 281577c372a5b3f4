"""Inputs of the `sv` golden (koe's side): a random speaker-verification checkpoint in the released
format (`fixtures_sv.write_sv`: `sv/pretrained_eres2netv2w24s4ep4.ckpt`, full size, float16) and
16 kHz clips as `TTS.run` gives them to `SV.compute_embedding3`: (1, samples) float32 each, and one
batch of two clips of a length (upstream's method takes a batch).

- `clips.npz`: `clip.<name>` (rows, samples) float32: seeded voice-like tones (a gliding pitch with
  its harmonics, a loudness swell, a little noise); lengths of 0.03 s (the shortest that gives
  filterbanks: 400 samples), 0.6 s, 1.1 s, and two of 0.5 s. (Upstream's references are 3-10 s;
  the network is the same at every length, and full-size clips would cost the tests seconds each.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from koe.engines.gpt_sovits.fixtures_sv import sv_state_sha256, write_sv
from koe.engines.gpt_sovits.sv import SV_FILE

SEED = 17
CLIPS = {"edge": (1, 400), "short": (1, 9600), "mid": (1, 17600), "pair": (2, 8000)}
FULL = ("short", "pair")  # clips whose embeddings are kept whole; the others: hash, head and tail


def clip(name: str) -> np.ndarray:
    rows, n = CLIPS[name]
    g = np.random.default_rng(sum(map(ord, name)))
    t = np.arange(n) / 16000
    out = []
    for r in range(rows):
        f0 = 110 + 60 * r + 40 * np.sin(2 * np.pi * (0.5 + r) * t)
        phase = 2 * np.pi * np.cumsum(f0) / 16000
        tone = sum(np.sin(k * phase) / k for k in range(1, 10)) * (0.3 + 0.7 * np.sin(2 * np.pi * 1.7 * t) ** 2)
        out.append(0.25 * tone + 0.01 * g.standard_normal(n))
    return np.stack(out).astype(np.float32)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_sv(folder / SV_FILE, SEED)
    np.savez(folder / "clips.npz", **{f"clip.{name}": clip(name) for name in CLIPS})
    (folder / "state_sha256.txt").write_text(sv_state_sha256(SEED) + "\n")
