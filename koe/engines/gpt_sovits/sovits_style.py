"""SoVITS's reference encoder `ref_enc` (upstream's `MelStyleEncoder`): a reference clip's linear
spectrogram -> one timbre embedding `ge` (B, gin_channels, 1).

Two linear layers with Mish (written out as x tanh(softplus(x)), which is not `F.mish`'s
rounding), two gated convs (kernel 5) with residuals, a 2-head self-attention with its own
residual, a linear layer, and the average over frames (each frame divided by the frame count,
then summed, as upstream pools). v2 reads the spectrogram's first 704 bins, v1 all of them.
Upstream runs the masked form of every step with an all-ones mask (the whole reference); so does
this module.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["StyleEncoder"]

HIDDEN = 128
KERNEL = 5
HEADS = 2


def _mish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.tanh(F.softplus(x))


class _Linear(nn.Module):
    """A linear layer under upstream's wrapper name (`<name>.fc.weight`)."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.fc = nn.Linear(c_in, c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class _Conv(nn.Module):
    """A conv under upstream's wrapper name (`<name>.conv.weight`), same padding."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel_size, padding=(kernel_size - 1) // 2)


class _GatedConv(nn.Module):
    """x + a * sigmoid(b), (a, b) = conv(x) (kernel 5, same padding; `conv1.conv`)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.channels = channels
        self.conv1 = _Conv(channels, 2 * channels, KERNEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.split(self.conv1.conv(x), self.channels, dim=1)
        return x + a * torch.sigmoid(b)


class _SelfAttention(nn.Module):
    """Multi-head self-attention on (B, T, C) with a residual (`w_qs`, `w_ks`, `w_vs`, `fc`); scores
    divided by sqrt(C), the model width (upstream's temperature), not the head width."""

    def __init__(self, channels: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, channels // n_heads
        self.temperature = math.sqrt(channels)
        self.w_qs = nn.Linear(channels, channels)
        self.w_ks = nn.Linear(channels, channels)
        self.w_vs = nn.Linear(channels, channels)
        self.fc = nn.Linear(channels, channels)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        x = x.view(b, t, self.n_heads, self.head_dim)
        return x.permute(2, 0, 1, 3).contiguous().view(-1, t, self.head_dim)  # (H B, T, D)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, T, C), mask (B, T, T) True where a key is padding."""
        b, t, _ = x.shape
        q, k, v = self._heads(self.w_qs(x)), self._heads(self.w_ks(x)), self._heads(self.w_vs(x))
        scores = torch.bmm(q, k.transpose(1, 2)) / self.temperature
        scores = scores.masked_fill(mask.repeat(self.n_heads, 1, 1), -math.inf)
        out = torch.bmm(torch.softmax(scores, dim=2), v)
        out = out.view(self.n_heads, b, t, self.head_dim).permute(1, 2, 0, 3).contiguous().view(b, t, -1)
        return self.fc(out) + x


class StyleEncoder(nn.Module):
    """`ref_enc`: spectrogram (B, bins, T) -> ge (B, out_channels, 1)."""

    def __init__(self, bins: int, out_channels: int) -> None:
        super().__init__()
        self.bins = bins
        self.spectral = nn.ModuleDict({"0": _Linear(bins, HIDDEN), "3": _Linear(HIDDEN, HIDDEN)})
        self.temporal = nn.ModuleList([_GatedConv(HIDDEN), _GatedConv(HIDDEN)])
        self.slf_attn = _SelfAttention(HIDDEN, HEADS)
        self.fc = _Linear(HIDDEN, out_channels)

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        """spec (B, >= bins, T): the reference's linear spectrogram; its first `bins` are read."""
        mask = torch.ones(spec.shape[0], 1, spec.shape[2], dtype=spec.dtype, device=spec.device)
        x = (spec[:, : self.bins] * mask).transpose(1, 2)  # (B, T, bins)
        padding = (mask.int() == 0).squeeze(1)  # (B, T), all False
        t = x.shape[1]
        x = _mish(self.spectral["3"](_mish(self.spectral["0"](x))))
        x = x.transpose(1, 2)
        for conv in self.temporal:
            x = conv(x)
        x = x.transpose(1, 2).masked_fill(padding.unsqueeze(-1), 0)
        x = self.fc(self.slf_attn(x, padding.unsqueeze(1).expand(-1, t, -1)))
        # average over the frames as upstream pools: each frame / count, then the sum
        count = (~padding).sum(dim=1).unsqueeze(1)  # (B, 1)
        x = torch.div(x.masked_fill(padding.unsqueeze(-1), 0).float(), count.unsqueeze(1)).sum(dim=1)
        return x.unsqueeze(-1)
