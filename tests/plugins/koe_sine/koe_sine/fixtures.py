"""Sine model folders with random weights (tests, `koe bench`): the on-disk layout a release would have."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe.engines.spec import mark_random_weights

SPEAKERS = ("low", "high")
TERMS = "# koe-sine Tone Terms 1.0\n\nA test licence for koe's toy family: the tones are for tests only. Accepting it grants nothing.\n"


def write_random_model(folder: str | Path, variant: str = "base", size: str = "tiny", *, seed: int = 0) -> Path:
    """A sine model in `folder`: two speakers with random pitches (low: 100-200 Hz, high: 250-500 Hz) and levels."""
    if variant != "base" or size != "tiny":
        raise ValueError(f"the sine family has one model: variant base, size tiny (got {variant!r}, {size!r})")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    config = {"model_type": "koe_sine", "sample_rate": 16000, "speakers": list(SPEAKERS), "word_seconds": 0.2}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    weights = {
        "pitch": torch.tensor([100.0, 250.0]) * (1 + torch.rand(2, generator=g)),
        "amplitude": 0.2 + 0.3 * torch.rand(2, generator=g),
        "noise": 0.01 + 0.02 * torch.rand(1, generator=g),
    }
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "TERMS.md").write_text(TERMS)  # the licence's own file (spec.LICENSE), as a release under it carries
    mark_random_weights(folder, __name__)
    return folder
