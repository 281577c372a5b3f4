"""Rotary position embeddings: inverse frequencies, cos/sin tables, multimodal sections, apply.

Tables are computed as the reference implementations do (float32 frequencies, duplicated over
both halves before cos/sin), so float32 results are bit-identical to them.
"""

from __future__ import annotations

import torch
from torch import nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the last dimension."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (B, H, T, D) by tables broadcastable to it, e.g. (B|1, 1, T, D)."""
    return x * cos + rotate_half(x) * sin


def inverse_frequencies(head_dim: int, theta: float) -> torch.Tensor:
    """Rotary inverse frequencies, float32, computed as the reference does (`theta ** (2i / d)`).

    Always computed on the CPU (modules move it with `.to()`): under `torch.device("meta")` the
    same ops would run torch's Python reference kernels, whose first use imports torch._dynamo
    (~3 s of a model load), and a buffer built on the CPU needs no refill after a meta build."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").to(dtype=torch.float) / head_dim))


def rotary_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables for `positions` (..., T) -> (..., T, head_dim), in `dtype`.

    Frequencies are `position * inv_freq` in float32 (a product with one term, so exact whatever
    the batching, and equal to the reference's `inv_freq @ positions`), duplicated over both
    halves before cos/sin as the reference does.
    """
    freqs = positions.to(torch.float32)[..., :, None] * inv_freq.to(torch.float32)  # (..., T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def multimodal_cos_sin(cos: torch.Tensor, sin: torch.Tensor, sections: list[int], interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge per-axis tables (3, B, T, D) into (B, 1, T, D) following multimodal rotary sections.

    Interleaved layout: frequency i takes axis `i % 3` for the first `3 * sections[k]` slots of
    axis k > 0; otherwise axis 0. Contiguous layout: consecutive blocks of `sections` sizes.
    """

    def merge(table: torch.Tensor) -> torch.Tensor:
        if interleaved:
            half = table[..., : table.shape[-1] // 2]
            merged = half[0].clone()
            n = len(sections)
            for axis, size in enumerate(sections[1:], 1):
                merged[..., axis : size * n : n] = half[axis, ..., axis : size * n : n]
            return torch.cat([merged, merged], dim=-1).unsqueeze(1)
        parts = table.split(sections * 2, dim=-1)
        return torch.cat([part[i % 3] for i, part in enumerate(parts)], dim=-1).unsqueeze(1)

    return merge(cos), merge(sin)


class RotaryEmbedding(nn.Module):
    """Default (unscaled) rotary tables; `inv_freq` is not part of the weights."""

    inv_freq: torch.Tensor

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.register_buffer("inv_freq", inverse_frequencies(head_dim, theta), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (B, T) -> cos, sin (B, 1, T, head_dim) in `dtype`, ready for `apply_rotary`."""
        cos, sin = rotary_cos_sin(self.inv_freq, positions, dtype)
        return cos.unsqueeze(1), sin.unsqueeze(1)
