"""Inputs of the `campplus` golden (koe's side): IndexTTS 2's style path, Kaldi filterbanks of a 16 kHz
reference clip into CAM++ (`style`, `(1, 192)`), and the pick of an emotion matrix's row by cosine.

- clips: three synthetic voiced clips at 16 kHz (1 s; 2.37 s with a stretch of digital silence,
  an odd length; 5 s), `(1, samples)` float32, as `audio_16k`;
- models: CAM++ as IndexTTS 2 builds it (`CAMPPlus(feat_dim=80, embedding_size=192)`, upstream's
  widths; about 7 M weights, written at test time) and a narrow one (growth 8, bottleneck 16, 32
  channels in, 64 out), each a state dict file like `campplus_cn_common.bin`, batch norms' running
  variances kept positive;
- cosine: queries (the release model's styles are the oracle's own; here, seeded vectors, one
  matched by a scaled row, one by two equal rows: the first is picked) against a matrix split into
  parts, as `spk_matrix` is split by `emo_num`, one part stored in float16.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from koe_indextts.campplus import CAMPPlus, CampPlusConfig
from koe_indextts.fixtures import random_state, state_sha256_1d

RATE = 16000
CLIPS = {"one": RATE, "gap": 37957, "five": 5 * RATE}  # name -> samples
MODELS = {
    "release": {"feat_dim": 80, "embedding_size": 192},
    "narrow": {"feat_dim": 80, "embedding_size": 64, "growth_rate": 8, "bn_size": 2, "init_channels": 32},
}
SEEDS = {"release": 61, "narrow": 62}
SPLITS = (3, 17, 2, 8)  # rows per part of the matrix
DIM = 192


def config(name: str) -> CampPlusConfig:
    return CampPlusConfig(**MODELS[name])


def clip(name: str) -> torch.Tensor:
    """A voiced clip `(1, samples)`: harmonics of a wavering pitch under a syllable envelope, light noise."""
    n = CLIPS[name]
    g = torch.Generator().manual_seed(500 + n)
    t = torch.arange(n, dtype=torch.float64) / RATE
    f0 = 110.0 + 25.0 * torch.sin(2 * math.pi * 2.7 * t) + 10.0 * len(name)
    phase = torch.cumsum(2 * math.pi * f0 / RATE, 0)
    voice = sum(torch.sin(k * phase + 0.3 * k) / k for k in range(1, 10))
    envelope = 0.5 + 0.5 * torch.sin(2 * math.pi * 3.1 * t) ** 2
    x = 0.15 * envelope * voice + 0.01 * torch.randn(n, generator=g, dtype=torch.float64)
    if name == "gap":
        x[12000:16800] = 0.0  # 0.3 s of digital silence: frames at the log floor
    return x.to(torch.float32).unsqueeze(0)


def model_state(name: str) -> dict[str, torch.Tensor]:
    """Seeded weights in the module's order; running variances made positive (|v| + 0.5)."""
    with torch.device("meta"):
        module = CAMPPlus(config(name))
    state = random_state(module, SEEDS[name])
    for key in state:
        if key.endswith("running_var"):
            state[key] = state[key].abs() + 0.5
    return state


def cosine_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """(queries (Q, 1, DIM), matrix (sum(SPLITS), DIM)) float32: query 0 matches part 1's row 5
    (3 x itself), query 1 part 3's rows 2 and 6 (equal), the rest are free."""
    g = torch.Generator().manual_seed(77)
    queries = torch.randn(4, 1, DIM, generator=g)
    matrix = torch.randn(sum(SPLITS), DIM, generator=g)
    start = [sum(SPLITS[:i]) for i in range(len(SPLITS))]
    matrix[start[1] + 5] = 3.0 * queries[0, 0]
    matrix[start[3] + 2] = queries[1, 0] + 0.01
    matrix[start[3] + 6] = queries[1, 0] + 0.01
    return queries, matrix


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in CLIPS:
        np.save(folder / f"clip_{name}.npy", clip(name).numpy())
    lines = []
    for name in MODELS:
        state = model_state(name)
        torch.save(state, folder / f"campplus_{name}.bin")
        lines.append(f"{name} {state_sha256_1d(state)}")
    queries, matrix = cosine_inputs()
    np.save(folder / "queries.npy", queries.numpy())
    np.save(folder / "matrix.npy", matrix.numpy())
    (folder / "setup.json").write_text(json.dumps({"clips": list(CLIPS), "models": MODELS, "splits": SPLITS, "half_part": 1}))
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")
