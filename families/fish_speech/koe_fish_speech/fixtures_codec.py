"""A random `codec.pth` in the released layout (Fish Speech S2's modded DAC), for tests and goldens.

`write_codec(folder, size)` writes `folder/codec.pth`: a plain state dict under upstream's names
(`codec_config.released_shapes`, in upstream's order), every tensor float32 drawn in that order from
one seeded `torch.Generator`, so the file's tensors are the same on every run. `tiny` keeps the
released rates (hop 512, 2048 samples a code frame), codebooks (4096 semantic entries, 9 x 1024,
8 wide) and windows, with narrow layers (encoder 8 -> 128 channels, decoder 128 -> 8, transformers
128 wide with 2 heads, one layer each): ~2.2 M parameters, a 9 MB file. `real` is the release's
architecture (391 M parameters, 1.6 GB): for timing, not for tests.

Scales: Snake `alpha` and norm weights near 1, weight norm's `g` near 0.7 (its `v` is only a
direction; at 1 the decoder's residual units grow the signal into tanh's rails), layer scales near 0.5, small biases, N(0, 1) codebooks, N(0, 1/fan_in) elsewhere:
random weights give finite, varied codes and audio that is neither silent nor stuck at tanh's rails.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from koe.runtime.weights import state_sha256

from .codec_config import CodecConfig, released_shapes

__all__ = ["CODEC_FILE", "SIZES", "codec_config", "random_codec_state", "write_codec"]

CODEC_FILE = "codec.pth"

SIZES = {
    "tiny": CodecConfig(
        encoder_dim=8, encoder_transformer_layers=(0, 0, 0, 1), decoder_dim=128, quantizer_layers=1, quantizer_heads=2, quantizer_intermediate_size=384
    ),
    "real": CodecConfig(),
}


def codec_config(size: str = "tiny") -> CodecConfig:
    if size not in SIZES:
        raise ValueError(f"unknown codec size {size!r}: one of {sorted(SIZES)}")
    return SIZES[size]


def _random(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    leaf = name.rsplit(".", 1)[-1]
    noise = torch.randn(shape, generator=g)
    if leaf in ("alpha",) or (leaf == "weight" and len(shape) == 1):  # Snake, norms
        return 1.0 + 0.05 * noise
    if leaf in ("original0", "weight_g"):  # weight norm's g: each layer's gain (1 would saturate tanh)
        return 0.7 * (1.0 + 0.05 * noise)
    if leaf == "gamma":
        return 0.5 + 0.05 * noise
    if leaf == "bias":
        return 0.05 * noise
    if "codebook" in name or leaf in ("original1", "weight_v"):
        return noise
    return noise / math.sqrt(math.prod(shape[1:]))


def random_codec_state(size: str = "tiny", seed: int = 0) -> dict[str, torch.Tensor]:
    """The state dict `write_codec` saves: released names and order, float32, seeded."""
    g = torch.Generator().manual_seed(seed)
    return {name: _random(name, shape, g) for name, shape in released_shapes(codec_config(size)).items()}


def write_codec(folder: str | Path, size: str = "tiny", seed: int = 0) -> Path:
    """Write `folder/codec.pth` (see the module docstring) and return its path; its `state_sha256`
    is `koe.runtime.weights.state_sha256(random_codec_state(size, seed))`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CODEC_FILE
    torch.save(random_codec_state(size, seed), path)
    return path


def codec_sha256(size: str = "tiny", seed: int = 0) -> str:
    return state_sha256(random_codec_state(size, seed))
