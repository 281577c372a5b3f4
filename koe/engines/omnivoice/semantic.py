"""HiggsAudio-v2's semantic branch: HuBERT at 16 kHz (`semantic_model.*`, `koe.nn.hubert.Hubert`,
shared with GPT-SoVITS), the mean of its hidden states, and the semantic encoder that brings them
to the RVQ. The features are the mean over the input of layer 0 and every layer's output, stacked
as upstream stacks them, every `semantic_downsample_factor`-th frame kept.

The semantic encoder (`encoder_semantic.*`): a conv, then per block residual units (ELU, dilated
conv, ELU, 1x1 conv, all without bias; plus the input) and a conv.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.omnivoice.config import AudioTokenizerConfig
from koe.nn.hubert import Hubert

__all__ = ["Hubert", "SemanticEncoder"]


class _ResidualUnit(nn.Module):
    def __init__(self, channels: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=(kernel - 1) // 2 * dilation, dilation=dilation, bias=False)
        self.conv2 = nn.Conv1d(channels, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class _EncoderBlock(nn.Module):
    def __init__(self, c: AudioTokenizerConfig, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.res_units = nn.ModuleList(_ResidualUnit(c_in, c.unit_kernel_size, d) for d in c.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    """`encoder_semantic`: (B, C, frames) HuBERT features -> (B, C', frames)."""

    def __init__(self, c: AudioTokenizerConfig) -> None:
        super().__init__()
        width = c.semantic.hidden_size
        self.conv = nn.Conv1d(width, width, c.kernel_size, padding=c.kernel_size // 2, bias=False)
        blocks, c_in = [], width
        for ratio, stride in zip(c.channel_ratios, c.strides, strict=True):
            c_out = int(width * ratio)
            blocks.append(_EncoderBlock(c, c_in, c_out, stride))
            c_in = c_out
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x
