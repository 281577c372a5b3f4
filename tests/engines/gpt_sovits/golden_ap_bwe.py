"""Inputs of the `ap_bwe` golden (koe's side): GPT-SoVITS v3's super-sampler, AP-BWE (24 -> 48 kHz),
on a random release folder at tiny widths (`fixtures_ap_bwe.write_ap_bwe`: the release's STFT and
rates), as a component and at the end of upstream's `audio_postprocess(super_sampling=True)`.

- `24kto48k/`: `config.json`, `g_24kto48k.zip`; `state_sha256.txt`: its generator's weights.
- `inputs.npz`: `input`, a 0.3 s seeded noisy tone at 24 kHz (the component's input); per case of
  `cases.json` its fragments `<case>.<i>` (24 kHz float32), which `audio_postprocess` joins with
  `fragment_interval` s of zeros (counted at 32 kHz, as upstream counts them) before super-sampling:
  `two` (two fragments, a short interval), `loud` (one fragment peaking over 1: normalised before
  and, if the model's output peaks over 1, after).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.fixtures_ap_bwe import TINY, random_ap_bwe_state, write_ap_bwe
from koe.runtime.weights import state_sha256

SEED = 11
RATE = 24000
FOLDER = "24kto48k"
CASES = {"two": {"seconds": (0.2, 0.15), "peak": 0.6, "fragment_interval": 0.05}, "loud": {"seconds": (0.25,), "peak": 1.6, "fragment_interval": 0.0}}


def tone(seconds: float, pitch: float, peak: float, seed: int) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    wave = np.sin(2 * np.pi * pitch * t) + 0.1 * np.random.default_rng(seed).standard_normal(t.shape)
    return (peak * wave / np.abs(wave).max()).astype(np.float32)


def arrays() -> dict[str, np.ndarray]:
    out = {"input": tone(0.3, 220.0, 0.5, SEED)}
    for name, case in CASES.items():
        for i, seconds in enumerate(case["seconds"]):
            out[f"{name}.{i}"] = tone(seconds, 180.0 + 60 * i, case["peak"], SEED + 1 + i)
    return out


def fragments(folder: Path, name: str) -> tuple[list[torch.Tensor], int]:
    """A case's fragments as written, and its silence in samples (`fragment_interval` at 32 kHz)."""
    case = json.loads((folder / "cases.json").read_text(encoding="utf-8"))[name]
    arrays = np.load(folder / "inputs.npz")
    return [torch.from_numpy(arrays[f"{name}.{i}"].copy()) for i in range(case["fragments"])], int(32000 * case["fragment_interval"])


def state() -> dict:
    return random_ap_bwe_state(TINY, SEED)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_ap_bwe(folder / FOLDER, TINY, SEED)
    np.savez(folder / "inputs.npz", **arrays())
    cases = {name: {"fragments": len(c["seconds"]), "fragment_interval": c["fragment_interval"]} for name, c in CASES.items()}
    (folder / "cases.json").write_text(json.dumps(cases, indent=1), encoding="utf-8")
    (folder / "state_sha256.txt").write_text(state_sha256(state()) + "\n")
