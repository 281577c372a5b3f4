"""Building blocks shared by the speech tokenizer's decoder and encoder.

Op order follows upstream exactly, because float32 bits depend on it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def causal_extra_padding(length: int, kernel_size: int, stride: int, padding: int) -> int:
    """Right padding so that the last window of a causal strided conv is complete."""
    # ceil((length - kernel_size + padding) / stride) windows after the first one
    n_windows = -(-(length - kernel_size + padding) // stride)
    ideal_length = n_windows * stride + (kernel_size - padding)
    return ideal_length - length


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the last dimension."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE on q, k of shape (B, H, T, D) with cos, sin of shape (B|1, T, D)."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class RotaryEmbedding(nn.Module):
    """Default (unscaled) RoPE tables, computed in float32."""

    inv_freq: torch.Tensor

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta
        self.register_buffer("inv_freq", self._inv_freq(), persistent=False)

    def _inv_freq(self, device: torch.device | None = None) -> torch.Tensor:
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.int64, device=device).to(dtype=torch.float)
        return 1.0 / (self.theta ** (exponent / self.head_dim))

    def recompute(self, device: torch.device | str = "cpu") -> None:
        """Refill `inv_freq` (not stored in the weights) on `device`, e.g. after a meta-device build."""
        self.inv_freq = self._inv_freq(torch.device("cpu")).to(device)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape (B, T, head_dim) in x's dtype, for position_ids (B, T)."""
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
        pos = position_ids[:, None, :].float()
        freqs = (inv.float() @ pos.float()).transpose(1, 2)  # (B, T, head_dim/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * 1.0
        sin = emb.sin() * 1.0
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class CausalConv1d(nn.Module):
    """Conv1d padded on the left (kernel - stride) and on the right to complete the last window."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1,
                 stride: int = 1, groups: int = 1, bias: bool = True, pad_mode: str = "constant") -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation,
                              groups=groups, bias=bias)
        self.stride = stride
        self.kernel_size = (kernel_size - 1) * dilation + 1
        self.padding = self.kernel_size - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        extra = causal_extra_padding(x.shape[-1], self.kernel_size, self.stride, self.padding)
        if self.pad_mode == "constant":
            x = F.pad(x, (self.padding, extra), mode="constant", value=0)
        else:
            x = F.pad(x, (self.padding, extra), mode=self.pad_mode)
        return self.conv(x)


class CausalConvTranspose1d(nn.Module):
    """ConvTranspose1d with its (kernel - stride) trailing samples cut off."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)
        self.right_pad = kernel_size - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.right_pad > 0:
            x = x[..., : x.shape[-1] - self.right_pad]
        return x.contiguous()


class SnakeBeta(nn.Module):
    """x + sin(x * e^alpha)^2 / (e^beta + 1e-9), per channel, on (B, C, T)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = torch.exp(self.alpha.unsqueeze(0).unsqueeze(-1))  # (1, C, 1)
        beta = torch.exp(self.beta.unsqueeze(0).unsqueeze(-1))
        return x + (1.0 / (beta + 0.000000001)) * torch.pow(torch.sin(x * alpha), 2)


class LayerScale(nn.Module):
    """Per-channel residual scale."""

    def __init__(self, channels: int, initial: float = 0.01) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((channels,), initial))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x
