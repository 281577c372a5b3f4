"""Key/value caches for autoregressive decoding.

Strategy: `ConcatCache` grows by concatenation along the sequence axis, exactly as the reference
implementation's dynamic cache does, so attention sees tensors of the same shape and layout and
the float bits match. A preallocated cache (written in place, one shape for every step) is what a
captured decode graph needs; it lives beside this one and is used where it keeps the bits.
"""

from __future__ import annotations

from typing import Protocol

import torch


class LayerCache(Protocol):
    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k/v (B, Hkv, T, D) and return the full (B, Hkv, S, D) keys and values."""
        ...


class ConcatLayerCache:
    """One layer's cache that grows by `torch.cat` on the sequence axis."""

    __slots__ = ("keys", "values")

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys is None:
            self.keys, self.values = k, v
        else:
            self.keys = torch.cat([self.keys, k], dim=-2)
            self.values = torch.cat([self.values, v], dim=-2)
        return self.keys, self.values

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]


class ConcatCache:
    """A stack of `ConcatLayerCache`, one per decoder layer."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [ConcatLayerCache() for _ in range(num_layers)]

    @property
    def length(self) -> int:
        return self.layers[0].length
