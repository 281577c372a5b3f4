"""Inputs of the `semantic_codec` golden (koe's side): tiny MaskGCT semantic codecs with koe's seeded
weights, frames to quantize, and the hashes the oracle copies into the npz.

Cases: `single` (release 2's structure: one factorised quantizer projecting to a narrower
codebook, no downsampling), `stages` (three residual stages, `downsample_scale` 2: the strided conv
and GELU before the encoder) and `identity` (codebook as wide as the frames: no projections).
Each quantizes a batch of one and a batch of two (frames at two scales, so the nearest rows vary).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from koe_indextts.fixtures import random_state, state_sha256
from koe_indextts.semantic_codec import SemanticCodec, SemanticCodecConfig
from safetensors.torch import save_file

CASES = {
    "single": SemanticCodecConfig(codebook_size=96, hidden_size=16, codebook_dim=4, vocos_dim=24, vocos_intermediate_dim=40, vocos_num_layers=2),
    "stages": SemanticCodecConfig(
        codebook_size=32, hidden_size=12, codebook_dim=6, vocos_dim=16, vocos_intermediate_dim=24, vocos_num_layers=1, num_quantizers=3, downsample_scale=2
    ),
    "identity": SemanticCodecConfig(codebook_size=40, hidden_size=8, codebook_dim=8, vocos_dim=12, vocos_intermediate_dim=20, vocos_num_layers=1),
}
SEEDS = {"single": 81, "stages": 82, "identity": 83}
BATCHES = {"one": (1, 37), "two": (2, 21)}  # (batch, frames)


def case_state(case: str) -> dict[str, torch.Tensor]:
    with torch.device("meta"):
        codec = SemanticCodec(CASES[case])
    return random_state(codec, SEEDS[case])


def case_inputs(case: str) -> dict[str, np.ndarray]:
    """name -> frames (B, T, D) float32: w2v-BERT-like normalised frames, a second item louder."""
    g = torch.Generator().manual_seed(SEEDS[case] + 1000)
    out = {}
    for name, (b, t) in BATCHES.items():
        frames = torch.randn(b, t, CASES[case].hidden_size, generator=g)
        frames[1:] *= 3.0
        out[name] = frames.numpy()
    return out


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    manifest, hashes = {}, []
    for case, config in CASES.items():
        state = case_state(case)
        save_file(state, str(folder / f"{case}.safetensors"))
        for name, frames in case_inputs(case).items():
            np.save(folder / f"{case}.{name}.npy", frames)
        manifest[case] = {"config": dataclasses.asdict(config), "inputs": list(BATCHES)}
        hashes.append(f"{case} {state_sha256(state)}\n")
    (folder / "cases.json").write_text(json.dumps(manifest, indent=1))
    (folder / "state_sha256.txt").write_text("".join(hashes))
