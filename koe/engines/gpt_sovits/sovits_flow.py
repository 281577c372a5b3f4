"""SoVITS's flow (upstream's `ResidualCouplingBlock`), run in reverse at inference: a sample of
the prior -> the latent the generator decodes.

Four mean-only affine couplings (`flows.0`, `.2`, `.4`, `.6`; the odd entries are channel flips,
which hold no weights), each a WaveNet (`WN`: dilated gated convs conditioned on the reference
embedding, with residual and skip paths) over half the channels predicting a shift of the other
half. Reversed: flip, undo coupling 3, flip, ..., undo coupling 0. Upstream's weight-normed convs
are plain convs here, holding the folded weight (`sovits_weights` folds them as upstream's hook
computes them).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Flow", "WaveNet", "gated"]

FLOWS = 4
WN_LAYERS = 4
WN_KERNEL = 5


def gated(x: torch.Tensor, g: torch.Tensor, channels: int) -> torch.Tensor:
    """tanh(a) * sigmoid(b) of (a, b) = x + g split at `channels` (upstream's fused_add_tanh_sigmoid_multiply)."""
    s = x + g
    return torch.tanh(s[:, :channels, :]) * torch.sigmoid(s[:, channels:, :])


class WaveNet(nn.Module):
    """`WN`: n_layers of dilated conv (`in_layers`) + conditioning slice (`cond_layer`), gated,
    then a 1x1 conv (`res_skip_layers`) split into a residual and a skip (the last: skip only)."""

    def __init__(self, channels: int, kernel_size: int, n_layers: int, gin_channels: int) -> None:
        super().__init__()
        self.channels = channels
        self.cond_layer = nn.Conv1d(gin_channels, 2 * channels * n_layers, 1)
        self.in_layers = nn.ModuleList([nn.Conv1d(channels, 2 * channels, kernel_size, padding=(kernel_size - 1) // 2) for _ in range(n_layers)])
        self.res_skip_layers = nn.ModuleList([nn.Conv1d(channels, 2 * channels if i < n_layers - 1 else channels, 1) for i in range(n_layers)])

    def forward(self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """x (B, C, T), mask (B, 1, T), g (B, gin, 1) -> the skip sum (B, C, T)."""
        c = self.channels
        out = torch.zeros_like(x)
        g = self.cond_layer(g)
        last = len(self.in_layers) - 1
        for i, (conv, res_skip) in enumerate(zip(self.in_layers, self.res_skip_layers)):
            acts = res_skip(gated(conv(x), g[:, i * 2 * c : (i + 1) * 2 * c, :], c))
            if i < last:
                x = (x + acts[:, :c, :]) * mask
                out = out + acts[:, c:, :]
            else:
                out = out + acts
        return out * mask


class _Coupling(nn.Module):
    """A mean-only coupling: x1 -= post(WN(pre(x0))) (`pre`, `enc`, `post`)."""

    def __init__(self, channels: int, hidden: int, gin_channels: int) -> None:
        super().__init__()
        self.half = channels // 2
        self.pre = nn.Conv1d(self.half, hidden, 1)
        self.enc = WaveNet(hidden, WN_KERNEL, WN_LAYERS, gin_channels)
        self.post = nn.Conv1d(hidden, self.half, 1)

    def reverse(self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x0, x1 = torch.split(x, [self.half, self.half], 1)
        h = self.enc(self.pre(x0) * mask, mask, g)
        m = self.post(h) * mask
        # upstream multiplies by exp(-logs) with logs = 0 (mean-only): a multiplication by 1.0, exact
        return torch.cat([x0, (x1 - m) * mask], 1)


class Flow(nn.Module):
    """`flow`: z_p (B, C, T) -> z (B, C, T), given the mask and the reference embedding g."""

    def __init__(self, channels: int, hidden: int, gin_channels: int) -> None:
        super().__init__()
        self.flows = nn.ModuleDict({str(2 * i): _Coupling(channels, hidden, gin_channels) for i in range(FLOWS)})

    def reverse(self, z: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        for i in reversed(range(FLOWS)):
            z = self.flows[str(2 * i)].reverse(torch.flip(z, [1]), mask, g)
        return z
