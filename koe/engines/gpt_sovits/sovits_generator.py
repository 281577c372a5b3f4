"""SoVITS's waveform generator `dec` (upstream's HiFi-GAN `Generator`): latent (B, 192, T) and the
reference embedding -> waveform (B, 1, T * prod(upsample_rates)) in [-1, 1].

conv_pre (kernel 7) plus the embedding's 1x1 projection (`cond`); per upsampling stage a leaky
ReLU (0.1), a transposed conv (`ups.i`, padding (k - u) / 2), and the mean of the stage's
multi-receptive-field residual blocks (`resblocks.{i * n + j}`: ResBlock1, two convs per dilation,
or ResBlock2, one); a leaky ReLU (0.01), conv_post (kernel 7, no bias), tanh. The weight-normed
convs (ups, resblocks) hold their folded weight; conv_pre, conv_post and cond never had weight norm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.gpt_sovits.sovits_config import SoVITSConfig

__all__ = ["Generator", "HifiGan"]

SLOPE = 0.1


def _padding(kernel: int, dilation: int) -> int:
    return (kernel * dilation - dilation) // 2


class ResBlock1(nn.Module):
    """Per dilation d: x += conv(lrelu(conv_d(lrelu(x)))) (`convs1.i` dilated, `convs2.i` not)."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList([nn.Conv1d(channels, channels, kernel, dilation=d, padding=_padding(kernel, d)) for d in dilations])
        self.convs2 = nn.ModuleList([nn.Conv1d(channels, channels, kernel, padding=_padding(kernel, 1)) for _ in dilations])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c1, c2 in zip(self.convs1, self.convs2):
            x = c2(F.leaky_relu(c1(F.leaky_relu(x, SLOPE)), SLOPE)) + x
        return x


class ResBlock2(nn.Module):
    """Per dilation d: x += conv_d(lrelu(x)) (`convs.i`)."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(channels, channels, kernel, dilation=d, padding=_padding(kernel, d)) for d in dilations])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c in self.convs:
            x = c(F.leaky_relu(x, SLOPE)) + x
        return x


class HifiGan(nn.Module):
    """Upstream's `Generator` with its arguments: (x (B, in_channels, T), g (B, gin, 1) or None) ->
    waveform. `gin_channels` 0 builds no `cond` (v4's vocoder); `post_bias` is upstream's `is_bias`."""

    def __init__(
        self,
        in_channels: int,
        resblock: str,
        resblock_kernel_sizes: tuple[int, ...],
        resblock_dilation_sizes: tuple[tuple[int, ...], ...],
        upsample_rates: tuple[int, ...],
        upsample_initial_channel: int,
        upsample_kernel_sizes: tuple[int, ...],
        gin_channels: int = 0,
        post_bias: bool = False,
    ) -> None:
        super().__init__()
        ch = upsample_initial_channel
        self.n_kernels = len(resblock_kernel_sizes)
        self.conv_pre = nn.Conv1d(in_channels, ch, 7, padding=3)
        self.cond = nn.Conv1d(gin_channels, ch, 1) if gin_channels else None
        block = ResBlock1 if resblock == "1" else ResBlock2
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for i, (u, k) in enumerate(zip(upsample_rates, upsample_kernel_sizes)):
            self.ups.append(nn.ConvTranspose1d(ch // 2**i, ch // 2 ** (i + 1), k, u, padding=(k - u) // 2))
            for kernel, dilations in zip(resblock_kernel_sizes, resblock_dilation_sizes):
                self.resblocks.append(block(ch // 2 ** (i + 1), kernel, dilations))
        self.conv_post = nn.Conv1d(ch // 2 ** len(upsample_rates), 1, 7, padding=3, bias=post_bias)

    def forward(self, x: torch.Tensor, g: torch.Tensor | None = None) -> torch.Tensor:
        x = self.conv_pre(x)
        if self.cond is not None:
            x = x + self.cond(g)
        n = self.n_kernels
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, SLOPE))
            xs = self.resblocks[i * n](x)
            for j in range(1, n):
                xs += self.resblocks[i * n + j](x)
            x = xs / n
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


class Generator(HifiGan):
    """`dec`: (z (B, inter, T), g (B, gin, 1)) -> waveform (B, 1, T * prod(upsample_rates))."""

    def __init__(self, config: SoVITSConfig) -> None:
        c = config
        super().__init__(
            c.inter_channels,
            c.resblock,
            c.resblock_kernel_sizes,
            c.resblock_dilation_sizes,
            c.upsample_rates,
            c.upsample_initial_channel,
            c.upsample_kernel_sizes,
            gin_channels=c.gin_channels,
        )
