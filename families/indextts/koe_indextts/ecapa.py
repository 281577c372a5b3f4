"""The speaker encoder inside IndexTTS 1.5's vocoder: an ECAPA-TDNN (Desplanques et al., 2020) in
SpeechBrain's layout, reference log-mel `(B, T, mels)` -> speaker embedding `(B, 1, dim)`.

Not koe's `koe.nn.speaker.ecapa` (Qwen3-TTS's): every TDNN block here ends in a batch norm (after
its ReLU), the pooled statistics go through one more batch norm, and each convolution sits one
level deeper (SpeechBrain's `Conv1d` wraps `nn.Conv1d`), so the names are the checkpoint's:

    blocks.0.conv.conv.{weight,bias}, blocks.0.norm.norm.{weight,bias,running_mean,running_var,num_batches_tracked}
    blocks.{1..3}.tdnn1 / res2net_block.blocks.{j} / tdnn2 (each .conv.conv, .norm.norm)
    blocks.{1..3}.se_block.conv{1,2}.conv, [blocks.{i}.shortcut.conv]
    mfa.conv.conv, mfa.norm.norm, asp.tdnn.conv.conv, asp.tdnn.norm.norm, asp.conv.conv,
    asp_bn.norm, fc.conv

The vocoder builds it with its defaults (channels 512, 512, 512, 512, 1536, ...): only the mel
count and the embedding size come from its config. Every convolution reflect-pads its input by
`dilation * (kernel - 1) // 2` on each side and convolves unpadded, as upstream; batch norms run
on their running statistics (the module must be in eval mode). All frames count (no lengths).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ECAPA", "SameConv", "TDNNBlock"]


class SameConv(nn.Module):
    """Conv1d on a reflect-padded input (stride 1): `(B, C_in, T) -> (B, C_out, T)`; the conv is `.conv`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1) -> None:
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"an ECAPA conv needs an odd kernel, got {kernel_size}")
        self.pad = dilation * (kernel_size - 1) // 2
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, [self.pad, self.pad], mode="reflect"))


class _Norm(nn.Module):
    """Batch norm one level deep (`.norm`), as SpeechBrain's `BatchNorm1d` names it."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(channels, eps=1e-5, momentum=0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class TDNNBlock(nn.Module):
    """Conv, ReLU, batch norm: `(B, C_in, T) -> (B, C_out, T)`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.conv = SameConv(in_channels, out_channels, kernel_size, dilation)
        self.activation = nn.ReLU()
        self.norm = _Norm(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.activation(self.conv(x)))


class Res2NetBlock(nn.Module):
    """`scale` channel groups: the first passes, group i > 0 goes through a TDNN block after adding
    the previous group's output. `(B, C, T) -> (B, C, T)`."""

    def __init__(self, channels: int, scale: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(TDNNBlock(channels // scale, channels // scale, kernel_size, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        prev: torch.Tensor | None = None
        for i, group in enumerate(torch.chunk(x, self.scale, dim=1)):
            if i == 0:
                prev = group
            elif i == 1:
                prev = self.blocks[0](group)
            else:
                prev = self.blocks[i - 1](group + prev)
            outs.append(prev)
        return torch.cat(outs, dim=1)


class SEBlock(nn.Module):
    """Squeeze-excitation: each channel scaled by a sigmoid gate of the time-mean."""

    def __init__(self, channels: int, se_channels: int) -> None:
        super().__init__()
        self.conv1 = SameConv(channels, se_channels, 1)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = SameConv(se_channels, channels, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean(dim=2, keepdim=True)  # (B, C, 1)
        s = self.sigmoid(self.conv2(self.relu(self.conv1(s))))
        return s * x


class SERes2NetBlock(nn.Module):
    """TDNN (1x1), Res2Net, TDNN (1x1), SE, plus the input (through a 1x1 conv when widths differ)."""

    def __init__(self, in_channels: int, out_channels: int, scale: int, se_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.out_channels = out_channels
        self.tdnn1 = TDNNBlock(in_channels, out_channels, 1, 1)
        self.res2net_block = Res2NetBlock(out_channels, scale, kernel_size, dilation)
        self.tdnn2 = TDNNBlock(out_channels, out_channels, 1, 1)
        self.se_block = SEBlock(out_channels, se_channels)
        self.shortcut = SameConv(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = self.shortcut(x) if self.shortcut is not None else x
        x = self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))
        return x + residual


def _weighted_stats(x: torch.Tensor, weights: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted mean and std over time of `(B, C, T)`: two `(B, C)`."""
    mean = (weights * x).sum(2)
    std = torch.sqrt((weights * (x - mean.unsqueeze(2)).pow(2)).sum(2).clamp(eps))
    return mean, std


class AttentiveStatsPool(nn.Module):
    """Attention-weighted mean and std of each channel, the attention seeing each frame beside the
    clip's global mean and std: `(B, C, T) -> (B, 2C, 1)`."""

    def __init__(self, channels: int, attention_channels: int) -> None:
        super().__init__()
        self.eps = 1e-12
        self.tdnn = TDNNBlock(channels * 3, attention_channels, 1, 1)
        self.tanh = nn.Tanh()
        self.conv = SameConv(attention_channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = x.shape[-1]
        # every frame valid: a (B, 1, T) mask of ones, each weight 1 / T as a float32 division
        mask = torch.ones(x.shape[0], 1, frames, dtype=x.dtype, device=x.device)
        total = mask.sum(dim=2, keepdim=True)
        mean, std = _weighted_stats(x, mask / total, self.eps)
        context = torch.cat([x, mean.unsqueeze(2).repeat(1, 1, frames), std.unsqueeze(2).repeat(1, 1, frames)], dim=1)  # (B, 3C, T)
        scores = self.conv(self.tanh(self.tdnn(context)))  # (B, C, T)
        attention = F.softmax(scores, dim=2)
        mean, std = _weighted_stats(x, attention, self.eps)
        return torch.cat((mean, std), dim=1).unsqueeze(2)  # (B, 2C, 1)


class ECAPA(nn.Module):
    """ECAPA-TDNN: log-mel `(B, T, n_mels)` -> embedding `(B, 1, embedding_dim)`."""

    def __init__(
        self,
        n_mels: int,
        embedding_dim: int = 192,
        channels: Sequence[int] = (512, 512, 512, 512, 1536),
        kernel_sizes: Sequence[int] = (5, 3, 3, 3, 1),
        dilations: Sequence[int] = (1, 2, 3, 4, 1),
        attention_channels: int = 128,
        res2net_scale: int = 8,
        se_channels: int = 128,
    ) -> None:
        super().__init__()
        if not len(channels) == len(kernel_sizes) == len(dilations) >= 3:
            raise ValueError("ECAPA: channels, kernel_sizes and dilations need one entry per block (at least 3)")
        self.blocks = nn.ModuleList([TDNNBlock(n_mels, channels[0], kernel_sizes[0], dilations[0])])
        for i in range(1, len(channels) - 1):
            self.blocks.append(SERes2NetBlock(channels[i - 1], channels[i], res2net_scale, se_channels, kernel_sizes[i], dilations[i]))
        self.mfa = TDNNBlock(channels[-2] * (len(channels) - 2), channels[-1], kernel_sizes[-1], dilations[-1])
        self.asp = AttentiveStatsPool(channels[-1], attention_channels)
        self.asp_bn = _Norm(channels[-1] * 2)
        self.fc = SameConv(channels[-1] * 2, embedding_dim, 1)
        # reflect padding needs more frames than it pads
        self.min_frames = 1 + max(d * (k - 1) // 2 for k, d in zip(kernel_sizes, dilations))

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        if mel.shape[1] < self.min_frames:
            raise ValueError(f"the reference mel has {mel.shape[1]} frames; the speaker encoder needs at least {self.min_frames}")
        x = mel.transpose(1, 2)  # (B, T, mels) -> (B, mels, T)
        outs: list[torch.Tensor] = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        x = self.mfa(torch.cat(outs[1:], dim=1))  # the SE-Res2Net blocks' outputs, stacked on channels
        x = self.asp_bn(self.asp(x))  # (B, 2C, 1)
        return self.fc(x).transpose(1, 2)  # (B, 1, embedding_dim)
