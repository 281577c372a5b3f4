"""Normalisation and residual scaling: RMSNorm and LayerScale."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32, scaled by a learned weight."""

    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


class LayerScale(nn.Module):
    """Per-channel residual scale on the last dimension."""

    def __init__(self, channels: int, initial: float = 0.01) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((channels,), initial))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x
