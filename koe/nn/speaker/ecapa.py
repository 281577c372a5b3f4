"""ECAPA-TDNN speaker encoder (Desplanques et al., 2020) as used by Qwen3-TTS Base models.

Parameter names equal upstream's `speaker_encoder.*` keys with that prefix removed, so a released
state dict loads with `strict=True`:

    blocks.0.conv.{weight,bias}                                  first TDNN
    blocks.{1..}.tdnn1.conv / res2net_block.blocks.{j}.conv / tdnn2.conv / se_block.conv{1,2}
    mfa.conv, asp.tdnn.conv, asp.conv, fc

Every convolution is a `Conv1d` with `padding="same"` and reflect padding; float bits follow from
using the same ops in the same order and shapes as upstream (see the forward methods).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

__all__ = [
    "SpeakerEncoderConfig",
    "TDNNBlock",
    "Res2NetBlock",
    "SEBlock",
    "SERes2NetBlock",
    "AttentiveStatsPool",
    "SpeakerEncoder",
]


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    """Shape of the speaker encoder (`speaker_encoder_config` in a Base model's config.json)."""

    mel_dim: int = 128
    enc_dim: int = 1024
    enc_channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    enc_kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    enc_dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    enc_attention_channels: int = 128
    enc_res2net_scale: int = 8
    enc_se_channels: int = 128
    sample_rate: int = 24000

    def __post_init__(self) -> None:
        for name in ("enc_channels", "enc_kernel_sizes", "enc_dilations"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        positive = ("mel_dim", "enc_dim", "enc_attention_channels", "enc_res2net_scale", "enc_se_channels", "sample_rate")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"speaker encoder config: {name} must be a positive int, got {value!r}")
        n = len(self.enc_channels)
        if n < 2 or len(self.enc_kernel_sizes) != n or len(self.enc_dilations) != n:
            raise ValueError("speaker encoder config: enc_channels, enc_kernel_sizes and enc_dilations need the same length (>= 2)")
        if any(v <= 0 for v in self.enc_channels + self.enc_kernel_sizes + self.enc_dilations):
            raise ValueError("speaker encoder config: channels, kernel sizes and dilations must be positive")
        for c in self.enc_channels[1:-1]:
            if c % self.enc_res2net_scale:
                raise ValueError(f"speaker encoder config: channels {c} not divisible by res2net scale {self.enc_res2net_scale}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpeakerEncoderConfig:
        """Build from a config dict; unknown keys are ignored (HF configs carry extras), types checked."""
        if not isinstance(data, Mapping):
            raise ValueError(f"speaker encoder config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key in known & set(data):
            value = data[key]
            if key in ("enc_channels", "enc_kernel_sizes", "enc_dilations"):
                if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    raise ValueError(f"speaker encoder config: {key} must be a list of ints, got {value!r}")
            kwargs[key] = value
        return cls(**kwargs)


def _conv(in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1) -> nn.Conv1d:
    """Conv1d with 'same' reflect padding, as every convolution of the encoder has."""
    return nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation, padding="same", padding_mode="reflect")


class TDNNBlock(nn.Module):
    """Conv1d ('same', reflect) followed by ReLU: `(B, C_in, T) -> (B, C_out, T)`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.conv = _conv(in_channels, out_channels, kernel_size, dilation)
        self.activation = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.conv(x))


class Res2NetBlock(nn.Module):
    """Split channels into `scale` groups; group 0 passes through, group i > 0 goes through a TDNN
    after adding the previous group's output (hierarchical residual). `(B, C, T) -> (B, C, T)`."""

    def __init__(self, in_channels: int, out_channels: int, scale: int = 8, kernel_size: int = 3, dilation: int = 1) -> None:
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(TDNNBlock(in_channels // scale, out_channels // scale, kernel_size, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        groups = torch.chunk(x, self.scale, dim=1)  # scale views of (B, C / scale, T)
        outs: list[torch.Tensor] = [groups[0]]
        prev = None
        for i in range(1, len(groups)):
            inp = groups[i] if prev is None else groups[i] + prev
            prev = self.blocks[i - 1](inp)
            outs.append(prev)
        return torch.cat(outs, dim=1)


class SEBlock(nn.Module):
    """Squeeze-excitation: scale each channel by a gate computed from the time-mean."""

    def __init__(self, in_channels: int, se_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = _conv(in_channels, se_channels, 1)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv(se_channels, out_channels, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = x.mean(dim=2, keepdim=True)  # (B, C, 1)
        gate = self.sigmoid(self.conv2(self.relu(self.conv1(gate))))
        return x * gate


class SERes2NetBlock(nn.Module):
    """TDNN(1x1) -> Res2Net -> TDNN(1x1) -> SE, plus the block input (residual)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        res2net_scale: int = 8,
        se_channels: int = 128,
        kernel_size: int = 1,
        dilation: int = 1,
    ) -> None:
        super().__init__()
        self.out_channels = out_channels
        self.tdnn1 = TDNNBlock(in_channels, out_channels, 1, 1)
        self.res2net_block = Res2NetBlock(out_channels, out_channels, res2net_scale, kernel_size, dilation)
        self.tdnn2 = TDNNBlock(out_channels, out_channels, 1, 1)
        self.se_block = SEBlock(out_channels, se_channels, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))
        return h + x


def _weighted_stats(x: torch.Tensor, weights: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted mean and std over time: x (B, C, T), weights broadcastable to it -> two (B, C)."""
    mean = (weights * x).sum(2)
    var = (weights * (x - mean.unsqueeze(2)).pow(2)).sum(2)
    return mean, torch.sqrt(var.clamp(eps))


class AttentiveStatsPool(nn.Module):
    """Attentive statistics pooling: `(B, C, T) -> (B, 2C, 1)` (attention-weighted mean ‖ std).

    The attention sees each frame together with the utterance's global mean and std. All frames are
    valid here (one unpadded utterance), so the uniform weights are `1 / T` as a float32 division.
    """

    def __init__(self, channels: int, attention_channels: int = 128) -> None:
        super().__init__()
        self.eps = 1e-12
        self.tdnn = TDNNBlock(channels * 3, attention_channels, 1, 1)
        self.tanh = nn.Tanh()
        self.conv = _conv(attention_channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, frames = x.shape
        valid = torch.ones(batch, 1, frames, dtype=x.dtype, device=x.device)  # (B, 1, T)
        uniform = valid / valid.sum(dim=2, keepdim=True)  # (B, 1, T), each 1 / T

        mean, std = _weighted_stats(x, uniform, self.eps)  # (B, C) each
        context = torch.cat([x, mean.unsqueeze(2).repeat(1, 1, frames), std.unsqueeze(2).repeat(1, 1, frames)], dim=1)  # (B, 3C, T)
        scores = self.conv(self.tanh(self.tdnn(context)))  # (B, C, T)
        attention = torch.softmax(scores, dim=2)

        mean, std = _weighted_stats(x, attention, self.eps)
        return torch.cat((mean, std), dim=1).unsqueeze(2)  # (B, 2C, 1)


class SpeakerEncoder(nn.Module):
    """ECAPA-TDNN: log-mels `(B, T, mel_dim)` -> speaker embedding `(B, enc_dim)`."""

    def __init__(self, config: SpeakerEncoderConfig) -> None:
        super().__init__()
        self.config = config
        ch, ks, dil = config.enc_channels, config.enc_kernel_sizes, config.enc_dilations
        self.channels = list(ch)
        self.blocks = nn.ModuleList([TDNNBlock(config.mel_dim, ch[0], ks[0], dil[0])])
        for i in range(1, len(ch) - 1):
            self.blocks.append(
                SERes2NetBlock(
                    ch[i - 1],
                    ch[i],
                    res2net_scale=config.enc_res2net_scale,
                    se_channels=config.enc_se_channels,
                    kernel_size=ks[i],
                    dilation=dil[i],
                )
            )
        self.mfa = TDNNBlock(ch[-1], ch[-1], ks[-1], dil[-1])  # multi-layer feature aggregation
        self.asp = AttentiveStatsPool(ch[-1], attention_channels=config.enc_attention_channels)
        self.fc = _conv(ch[-1] * 2, config.enc_dim, 1)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        h = mels.transpose(1, 2)  # (B, T, mel) -> (B, mel, T)
        per_block: list[torch.Tensor] = []
        for block in self.blocks:
            h = block(h)
            per_block.append(h)
        h = torch.cat(per_block[1:], dim=1)  # SE-Res2Net outputs stacked on channels
        h = self.mfa(h)
        h = self.asp(h)  # (B, 2C, 1)
        return self.fc(h).squeeze(-1)  # (B, enc_dim)
