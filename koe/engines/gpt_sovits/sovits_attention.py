"""The VITS transformer SoVITS's text encoder is made of (upstream's `module/attentions.py`):
channels-first post-norm layers of multi-head attention with windowed relative positions (keys
and values get a learned embedding per offset in [-4, 4], shared by the heads) and a conv
feed-forward, every step masked by the sequence mask.

Parameter names are the released ones (`attn_layers.N.conv_q`, `norm_layers_1.N.gamma`, ...).
Ops run in upstream's order and form (the mask multiplications, explicit padding before
padding-free convs, the query divided by sqrt(d) before each product), since float32 bits depend
on it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ChannelLayerNorm", "ConvFeedForward", "MultiHeadAttention", "RelativeEncoder"]

WINDOW = 4  # relative positions -4..4 (upstream's default window_size)


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channels of (B, C, T) (`gamma`, `beta`; eps 1e-5)."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.channels, self.eps = channels, eps
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.layer_norm(x.transpose(1, -1), (self.channels,), self.gamma, self.beta, self.eps)
        return x.transpose(1, -1)


class MultiHeadAttention(nn.Module):
    """Attention of `x` (B, C, Tq) over `c` (B, C, Tk) with 1x1-conv projections (`conv_q/k/v/o`);
    with `window`, self-attention with relative-position keys and values (`emb_rel_k/v`,
    (1, 2 window + 1, C / heads))."""

    def __init__(self, channels: int, n_heads: int, window: int | None = None) -> None:
        super().__init__()
        self.n_heads, self.head_dim, self.window = n_heads, channels // n_heads, window
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        if window is not None:
            self.emb_rel_k = nn.Parameter(torch.zeros(1, 2 * window + 1, self.head_dim))
            self.emb_rel_v = nn.Parameter(torch.zeros(1, 2 * window + 1, self.head_dim))

    def forward(self, x: torch.Tensor, c: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, C, Tq), c (B, C, Tk), mask (B, 1, Tq, Tk) of 0/1 -> (B, C, Tq)."""
        q, k, v = self.conv_q(x), self.conv_k(c), self.conv_v(c)
        b, d, t_k = k.shape
        t_q = q.shape[2]
        q = q.view(b, self.n_heads, self.head_dim, t_q).transpose(2, 3)  # (B, H, Tq, D)
        k = k.view(b, self.n_heads, self.head_dim, t_k).transpose(2, 3)
        v = v.view(b, self.n_heads, self.head_dim, t_k).transpose(2, 3)
        scale = math.sqrt(self.head_dim)
        scores = torch.matmul(q / scale, k.transpose(-2, -1))  # (B, H, Tq, Tk)
        if self.window is not None:
            rel_k = self._offsets(self.emb_rel_k, t_k)  # (1, 2T - 1, D)
            scores = scores + _relative_to_absolute(torch.matmul(q / scale, rel_k.unsqueeze(0).transpose(-2, -1)))
        scores = scores.masked_fill(mask == 0, -1e4)
        p = F.softmax(scores, dim=-1)
        out = torch.matmul(p, v)
        if self.window is not None:
            out = out + torch.matmul(_absolute_to_relative(p), self._offsets(self.emb_rel_v, t_k).unsqueeze(0))
        out = out.transpose(2, 3).contiguous().view(b, d, t_q)
        return self.conv_o(out)

    def _offsets(self, table: torch.Tensor, length: int) -> torch.Tensor:
        """The table's rows for offsets -(length - 1)..length - 1, zero rows past the window."""
        pad = max(length - (self.window + 1), 0)
        start = max(self.window + 1 - length, 0)
        if pad > 0:
            table = F.pad(table, [0, 0, pad, pad, 0, 0])
        return table[:, start : start + 2 * length - 1]


def _relative_to_absolute(x: torch.Tensor) -> torch.Tensor:
    """(B, H, L, 2L - 1) by offset -> (B, H, L, L) by key position (the pad-and-reshape skew)."""
    b, h, n, _ = x.shape
    x = F.pad(x, [0, 1, 0, 0, 0, 0, 0, 0]).view(b, h, n * 2 * n)
    x = F.pad(x, [0, n - 1, 0, 0, 0, 0])
    return x.view(b, h, n + 1, 2 * n - 1)[:, :, :n, n - 1 :]


def _absolute_to_relative(x: torch.Tensor) -> torch.Tensor:
    """(B, H, L, L) by key position -> (B, H, L, 2L - 1) by offset."""
    b, h, n, _ = x.shape
    x = F.pad(x, [0, n - 1, 0, 0, 0, 0, 0, 0]).view(b, h, n * n + n * (n - 1))
    x = F.pad(x, [n, 0, 0, 0, 0, 0])
    return x.view(b, h, n, 2 * n)[:, :, :, 1:]


class ConvFeedForward(nn.Module):
    """conv (kernel k, same padding), ReLU, conv, each on the masked input (`conv_1`, `conv_2`)."""

    def __init__(self, channels: int, filter_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel_size)
        self.pad = [(kernel_size - 1) // 2, kernel_size // 2]

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, [*self.pad, 0, 0, 0, 0]) if self.pad[1] else x

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv_1(self._padded(x * mask)))
        return self.conv_2(self._padded(x * mask)) * mask


class RelativeEncoder(nn.Module):
    """`n_layers` post-norm layers: x = norm(x + attention(x)); x = norm(x + feed_forward(x))."""

    def __init__(self, channels: int, filter_channels: int, n_heads: int, n_layers: int, kernel_size: int) -> None:
        super().__init__()
        self.attn_layers = nn.ModuleList([MultiHeadAttention(channels, n_heads, window=WINDOW) for _ in range(n_layers)])
        self.norm_layers_1 = nn.ModuleList([ChannelLayerNorm(channels) for _ in range(n_layers)])
        self.ffn_layers = nn.ModuleList([ConvFeedForward(channels, filter_channels, kernel_size) for _ in range(n_layers)])
        self.norm_layers_2 = nn.ModuleList([ChannelLayerNorm(channels) for _ in range(n_layers)])

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, C, T), mask (B, 1, T) -> (B, C, T)."""
        attn_mask = mask.unsqueeze(2) * mask.unsqueeze(-1)  # (B, 1, T, T)
        x = x * mask
        for attn, norm_1, ffn, norm_2 in zip(self.attn_layers, self.norm_layers_1, self.ffn_layers, self.norm_layers_2):
            x = norm_1(x + attn(x, x, attn_mask))
            x = norm_2(x + ffn(x, mask))
        return x * mask
