"""A random-weight Fish Speech S2 folder in the released layout: `config.json` and
`model.safetensors` (the dual-AR transformer, `fixtures_lm`), the tokenizer files with the released
ids (`fixtures_tokenizer`) and `codec.pth` (`fixtures_codec`), each written deterministically from
`seed`. "tiny" is for tests (upstream loads it with no missing or unexpected keys); "real" has the
released sizes and dtype (bfloat16), for benchmarks.
"""

from __future__ import annotations

from pathlib import Path

import torch

from koe.engines.spec import mark_random_weights
from koe_fish_speech.fixtures_codec import write_codec
from koe_fish_speech.fixtures_lm import write_lm
from koe_fish_speech.fixtures_tokenizer import write_tokenizer
from koe_fish_speech.spec import VARIANT

__all__ = ["SIZES", "VARIANTS", "write_random_model"]

VARIANTS = (VARIANT,)
SIZES = ("tiny", "real")


def write_random_model(folder: str | Path, variant: str = VARIANT, size: str = "tiny", seed: int = 0, layers: int | None = None) -> Path:
    """Write a random-weight S2 folder of `size` into `folder`; returns it. `layers`: the slow
    transformer's depth at the real size (fewer than the released 36, for a benchmark that must fit
    twice in memory)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dtype = torch.bfloat16 if size == "real" else torch.float32
    write_lm(folder, size=size, seed=seed, dtype=dtype, layers=layers)
    write_tokenizer(folder)
    write_codec(folder, size=size, seed=seed)
    mark_random_weights(folder, __name__)
    return folder
