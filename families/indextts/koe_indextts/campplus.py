"""IndexTTS 2's speaker style encoder: 3D-Speaker's CAM++ (context-aware masking), `campplus_cn_common.bin`
loaded into `CAMPPlus(feat_dim=80, embedding_size=192)`: Kaldi filterbanks of the reference clip at
16 kHz (`koe_indextts.fbank.style_features`) in, the `style` vector `(1, 192)` out. Also the pick of
an emotion matrix's row by the style (`most_similar_cosine`).

Parameter names are the checkpoint's (3D-Speaker's module tree), so it loads strictly:

    head (FCM): the filterbank as a 1-channel image (feat_dim x frames): conv1 3x3 (32) + bn1 + ReLU;
        layer1, layer2: two residual blocks each (3x3 convs + BN; the first strides 2 over
        frequency, its shortcut a strided 1x1 conv + BN); conv2 3x3 stride (2, 1) + bn2 + ReLU;
        flattened to 32 * feat_dim / 8 channels per frame
    xvector: tdnn (conv k5 stride 2 over time, BN, ReLU); block1..3 of 12, 24, 16 CAM layers
        (kernel 3, dilation 1, 2, 2; each adds growth_rate channels) each followed by transit1..3
        (BN, ReLU, 1x1 conv halving the channels); out_nonlinear (BN, ReLU); statistics pooling
        (mean and unbiased std over time); dense (1x1 conv to embedding_size, BN without affine)
    a CAM layer: BN, ReLU, 1x1 conv to bn_size * growth_rate, BN, ReLU, then a local conv times
        sigmoid(linear2(relu(linear1(clip mean + its 100-frame segment's mean)))), concatenated to
        its input

The widths upstream's constructor takes (`feat_dim`, `embedding_size`, `growth_rate`, `bn_size`,
`init_channels`) are `CampPlusConfig`'s; the 32 channels of the head and the block depths are fixed
there and here. Batch norms run in eval mode (their running statistics).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .fbank import style_features

__all__ = ["CAMPPlus", "CampPlusConfig", "load_campplus", "most_similar_cosine"]

SEGMENT = 100  # frames per segment of a CAM layer's context pooling
HEAD_CHANNELS = 32
BLOCKS = ((12, 3, 1), (24, 3, 2), (16, 3, 2))  # (layers, kernel, dilation) of block1..3


@dataclass(frozen=True)
class CampPlusConfig:
    """CAM++'s widths, named as upstream's constructor names them; the defaults but `embedding_size`
    are its defaults, IndexTTS 2's are `feat_dim=80, embedding_size=192`."""

    feat_dim: int = 80
    embedding_size: int = 192
    growth_rate: int = 32
    bn_size: int = 4
    init_channels: int = 128

    def __post_init__(self) -> None:
        for name in ("feat_dim", "embedding_size", "growth_rate", "bn_size", "init_channels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"campplus config: {name} must be a positive int, got {value!r}")
        if self.feat_dim % 8:
            raise ValueError(f"campplus config: feat_dim must be a multiple of 8, got {self.feat_dim}")


def _bn_relu(channels: int) -> nn.Sequential:
    return nn.Sequential(OrderedDict(batchnorm=nn.BatchNorm1d(channels), relu=nn.ReLU()))


class BasicResBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=(stride, 1), bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class FCM(nn.Module):
    """The 2-D front: `(B, feat_dim, T)` -> `(B, 32 * feat_dim / 8, T)`."""

    def __init__(self, feat_dim: int, channels: int = HEAD_CHANNELS) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.layer1 = nn.Sequential(BasicResBlock(channels, channels, 2), BasicResBlock(channels, channels, 1))
        self.layer2 = nn.Sequential(BasicResBlock(channels, channels, 2), BasicResBlock(channels, channels, 1))
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.out_channels = channels * (feat_dim // 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x.unsqueeze(1))))  # (B, C, F, T)
        out = self.layer2(self.layer1(out))
        out = F.relu(self.bn2(self.conv2(out)))
        b, c, f, t = out.shape
        return out.reshape(b, c * f, t)


class TDNNLayer(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(c_in, c_out, kernel, stride=stride, padding=(kernel - 1) // 2, bias=False)
        self.nonlinear = _bn_relu(c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x))


class CAMLayer(nn.Module):
    """A local conv masked by a gate from the clip's mean plus each frame's 100-frame segment mean."""

    def __init__(self, bn_channels: int, c_out: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.linear_local = nn.Conv1d(bn_channels, c_out, kernel, padding=(kernel - 1) // 2 * dilation, dilation=dilation, bias=False)
        self.linear1 = nn.Conv1d(bn_channels, bn_channels // 2, 1)
        self.relu = nn.ReLU()
        self.linear2 = nn.Conv1d(bn_channels // 2, c_out, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear_local(x)
        context = x.mean(-1, keepdim=True) + self._segments(x)
        return y * self.sigmoid(self.linear2(self.relu(self.linear1(context))))

    @staticmethod
    def _segments(x: torch.Tensor) -> torch.Tensor:
        """Each frame's segment mean (the last, partial segment averaged over the frames it holds)."""
        seg = F.avg_pool1d(x, kernel_size=SEGMENT, stride=SEGMENT, ceil_mode=True)  # (B, C, S)
        shape = seg.shape
        seg = seg.unsqueeze(-1).expand(*shape, SEGMENT).reshape(*shape[:-1], -1)
        return seg[..., : x.shape[-1]]


class CAMDenseTDNNLayer(nn.Module):
    def __init__(self, c_in: int, c_out: int, bn_channels: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.nonlinear1 = _bn_relu(c_in)
        self.linear1 = nn.Conv1d(c_in, bn_channels, 1, bias=False)
        self.nonlinear2 = _bn_relu(bn_channels)
        self.cam_layer = CAMLayer(bn_channels, c_out, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class CAMDenseTDNNBlock(nn.ModuleList):
    def __init__(self, layers: int, c_in: int, c_out: int, bn_channels: int, kernel: int, dilation: int) -> None:
        super().__init__()
        for i in range(layers):
            self.add_module(f"tdnnd{i + 1}", CAMDenseTDNNLayer(c_in + i * c_out, c_out, bn_channels, kernel, dilation))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            x = torch.cat([x, layer(x)], dim=1)
        return x


class TransitLayer(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.nonlinear = _bn_relu(c_in)
        self.linear = nn.Conv1d(c_in, c_out, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.nonlinear(x))


class StatsPool(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.mean(dim=-1), x.std(dim=-1, unbiased=True)], dim=-1)


class DenseLayer(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(c_in, c_out, 1, bias=False)
        self.nonlinear = nn.Sequential(OrderedDict(batchnorm=nn.BatchNorm1d(c_out, affine=False)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x.unsqueeze(dim=-1)).squeeze(dim=-1))


class CAMPPlus(nn.Module):
    """`forward(feats (B, frames, feat_dim)) -> (B, embedding_size)` (float32; eval mode for inference)."""

    def __init__(self, config: CampPlusConfig = CampPlusConfig()) -> None:
        super().__init__()
        self.config = config
        self.head = FCM(config.feat_dim)
        channels = config.init_channels
        self.xvector = nn.Sequential(OrderedDict(tdnn=TDNNLayer(self.head.out_channels, channels, 5, stride=2)))
        bn_channels = config.bn_size * config.growth_rate
        for i, (layers, kernel, dilation) in enumerate(BLOCKS):
            self.xvector.add_module(f"block{i + 1}", CAMDenseTDNNBlock(layers, channels, config.growth_rate, bn_channels, kernel, dilation))
            channels += layers * config.growth_rate
            self.xvector.add_module(f"transit{i + 1}", TransitLayer(channels, channels // 2))
            channels //= 2
        self.xvector.add_module("out_nonlinear", _bn_relu(channels))
        self.xvector.add_module("stats", StatsPool())
        self.xvector.add_module("dense", DenseLayer(channels * 2, config.embedding_size))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        if feats.dim() != 3 or feats.shape[-1] != self.config.feat_dim:
            raise ValueError(f"CAM++ takes features (batch, frames, {self.config.feat_dim}), got shape {tuple(feats.shape)}")
        return self.xvector(self.head(feats.permute(0, 2, 1)))

    @torch.inference_mode()
    def style(self, audio_16k: torch.Tensor) -> torch.Tensor:
        """IndexTTS 2's `style` of a reference clip at 16 kHz `(1, samples)`: `(1, embedding_size)`."""
        return self(style_features(audio_16k))


def load_campplus(source: str | os.PathLike | Mapping[str, torch.Tensor], config: CampPlusConfig = CampPlusConfig()) -> CAMPPlus:
    """CAM++ from `campplus_cn_common.bin` (a state dict) or the state itself, strictly, in eval mode."""
    state = source if isinstance(source, Mapping) else torch.load(source, map_location="cpu", weights_only=True)
    with torch.device("meta"):
        model = CAMPPlus(config)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


def most_similar_cosine(query: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """The index (a 0-d int64 tensor) of `matrix`'s row `(N, D)` most cosine-similar to `query`
    `(1, D)`, the first on a tie, as upstream's `find_most_similar_cosine` picks an emotion
    matrix's row by the speaker's style."""
    return torch.argmax(F.cosine_similarity(query.float(), matrix.float(), dim=1))
