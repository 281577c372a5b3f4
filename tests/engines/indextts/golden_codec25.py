"""Inputs of the `codec25` golden (koe's side): IndexTTS 2.5's semantic codec (`codec.pth` and
config.yaml's `semantic_codec:` section) with koe's seeded weights, frames to quantize and codes to
decode, and the hashes the oracle copies into the npz.

Cases, one folder each: `tiny` (fixtures25's tiny codec: one factorised quantizer, downsampling by
2), `stages` (three residual stages), `identity` (codebook as wide as the frames: no projections)
and `nodown` (`downsample_scale: null`: no strided conv; upstream's `decode` has no output then, so
only `quantize` is compared and the oracle records that `decode` fails). Each quantizes a batch of
one with an odd frame count and a batch of two (the second item louder), and decodes its codes,
GPT-like codes `(1, T)` (one quantizer; upstream's decode reads 2-D codes as one stage) or, for
`stages`, stage-major codes with a stage more than it has.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import yaml
from koe_indextts.codec25 import CODEC_FILE
from koe_indextts.fixtures import random_state, state_sha256
from koe_indextts.fixtures25 import codec_section, write_codec

SECTIONS = {
    "tiny": codec_section("tiny"),
    "stages": {
        "codebook_size": 32,
        "hidden_size": 12,
        "codebook_dim": 6,
        "vocos_dim": 16,
        "vocos_intermediate_dim": 24,
        "vocos_num_layers": 1,
        "num_quantizers": 3,
        "downsample_scale": 2,
    },
    "identity": {"codebook_size": 40, "hidden_size": 8, "codebook_dim": 8, "vocos_dim": 12, "vocos_intermediate_dim": 20, "vocos_num_layers": 1},
    "nodown": {
        "codebook_size": 24,
        "hidden_size": 8,
        "codebook_dim": 4,
        "vocos_dim": 12,
        "vocos_intermediate_dim": 16,
        "vocos_num_layers": 1,
        "downsample_scale": None,
    },
}
SEEDS = {"tiny": 91, "stages": 92, "identity": 93, "nodown": 94}
BATCHES = {"one": (1, 37), "two": (2, 20)}  # (batch, frames)
GPT_CODES = 23  # frames of the GPT-like codes decoded
DRAW_SEED = 1234  # the generator's seed before each quantize; the oracle records the next draws


def case_state(case: str) -> dict[str, torch.Tensor]:
    from koe_indextts.codec25 import Codec25, Codec25Config

    with torch.device("meta"):
        codec = Codec25(Codec25Config.from_dict(SECTIONS[case]))
    return random_state(codec, SEEDS[case])


def case_inputs(case: str) -> dict[str, np.ndarray]:
    """name -> array: frames (B, T, D) float32 per batch; codes int64: `gpt` (1, T) for one
    quantizer, else `extra`, stage-major with a stage more than the codec has (4, 2, T)."""
    section = SECTIONS[case]
    g = torch.Generator().manual_seed(SEEDS[case] + 1000)
    out = {}
    for name, (b, t) in BATCHES.items():
        frames = torch.randn(b, t, section["hidden_size"], generator=g)
        frames[1:] *= 3.0
        out[name] = frames.numpy()
    if section.get("num_quantizers", 1) == 1:
        out["gpt"] = torch.randint(0, section["codebook_size"], (1, GPT_CODES), generator=g).numpy()
    else:
        out["extra"] = torch.randint(0, section["codebook_size"], (4, 2, 9), generator=g).numpy()
    return out


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    manifest, hashes = {}, []
    for case, section in SECTIONS.items():
        sub = folder / case
        if case == "tiny":
            digest = write_codec(sub, seed=SEEDS[case], size="tiny")
        else:
            sub.mkdir(parents=True, exist_ok=True)
            state = case_state(case)
            torch.save({"model": state}, sub / CODEC_FILE)
            (sub / "config.yaml").write_text(yaml.safe_dump({"semantic_codec": section}, sort_keys=False))
            digest = state_sha256(state)
        arrays = case_inputs(case)
        for name, array in arrays.items():
            np.save(sub / f"{name}.npy", array)
        manifest[case] = {"batches": list(BATCHES), "codes": [n for n in arrays if n not in BATCHES]}
        hashes.append(f"{case} {digest}\n")
    (folder / "cases.json").write_text(json.dumps(manifest, indent=1))
    (folder / "draw_seed.txt").write_text(str(DRAW_SEED))
    (folder / "state_sha256.txt").write_text("".join(hashes))
