"""Blocks of WeNet / ESPnet Conformers that several families run, under the checkpoints' names.

- `RelPositionAttention` (`RelPositionMultiHeadedAttention`): multi-head self-attention with
  Transformer-XL relative positions: content scores (q + u) k^T and position scores (q + v) p^T, p
  the projected positional table, their sum over sqrt(d_k), a masked softmax (masked entries zeroed
  after it), then the output projection. Positions of 2T - 1 rows (ESPnet's `rel_pos_espnet`:
  CosyVoice's flow encoder) get ESPnet's relative shift; positions of T rows (IndexTTS's
  conditioning Conformer, whose upstream drops the shift) are used as they are.
- `FeedForward` (`PositionwiseFeedForward` with SiLU): w_2(silu(w_1(x))).

Exactness: the ops are upstream's in upstream's order and shapes (two matmuls for the two score
terms, the division by sqrt(d_k), `masked_fill` before and after the softmax), so CPU float32 gives
upstream's bits.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FeedForward", "RelPositionAttention"]


class RelPositionAttention(nn.Module):
    """Self-attention with relative positions; see the module docstring."""

    def __init__(self, heads: int, dim: int) -> None:
        super().__init__()
        self.h, self.d_k = heads, dim // heads
        self.linear_q = nn.Linear(dim, dim)
        self.linear_k = nn.Linear(dim, dim)
        self.linear_v = nn.Linear(dim, dim)
        self.linear_out = nn.Linear(dim, dim)
        self.linear_pos = nn.Linear(dim, dim, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.zeros(heads, self.d_k))

    @staticmethod
    def rel_shift(x: torch.Tensor) -> torch.Tensor:
        """(B, H, T, 2T-1) scores against positions T-1 .. -(T-1) -> (B, H, T, T) against each key."""
        b, h, t, n = x.shape
        padded = torch.cat([x.new_zeros(b, h, t, 1), x], dim=-1).view(b, h, n + 1, t)
        return padded[:, :, 1:].reshape(b, h, t, n)[:, :, :, : n // 2 + 1]

    def forward(self, x: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x (B, T, C); mask bool (B, 1, T) or (B, T, T), True = attend; pos (1, 2T-1, C) or (1, T, C)."""
        b = x.size(0)
        q = self.linear_q(x).view(b, -1, self.h, self.d_k)  # (B, T, H, D)
        k = self.linear_k(x).view(b, -1, self.h, self.d_k).transpose(1, 2)  # (B, H, T, D)
        v = self.linear_v(x).view(b, -1, self.h, self.d_k).transpose(1, 2)
        p = self.linear_pos(pos).view(pos.size(0), -1, self.h, self.d_k).transpose(1, 2)  # (1, H, 2T-1 or T, D)
        content = torch.matmul((q + self.pos_bias_u).transpose(1, 2), k.transpose(-2, -1))
        position = torch.matmul((q + self.pos_bias_v).transpose(1, 2), p.transpose(-2, -1))
        if position.size(-1) != content.size(-1):  # 2T - 1 positions (at T = 1 the shift changes nothing)
            position = self.rel_shift(position)
        scores = (content + position) / math.sqrt(self.d_k)  # (B, H, T, T)
        hidden = mask.unsqueeze(1).eq(0)[:, :, :, : scores.size(-1)]  # (B, 1, T|1, T)
        attn = torch.softmax(scores.masked_fill(hidden, -float("inf")), dim=-1).masked_fill(hidden, 0.0)
        out = torch.matmul(attn, v).transpose(1, 2).contiguous().view(b, -1, self.h * self.d_k)
        return self.linear_out(out)


class FeedForward(nn.Module):
    """w_2(silu(w_1(x)))."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(dim, hidden)
        self.w_2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(F.silu(self.w_1(x)))
