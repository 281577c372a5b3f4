"""ERes2NetV2 (3D-Speaker's speaker-verification network, Apache-2.0), as GPT-SoVITS v2Pro and
v2ProPlus run it: Kaldi filterbanks of a 16 kHz clip in, the (B, 20480) embedding of upstream's
`forward3` out (the pooled feature map before the network's statistics pooling and projection).

Upstream builds `ERes2NetV2(baseWidth=24, scale=4, expansion=4)` (3D-Speaker's
`eres2netv2w24s4ep4`): a 64-channel 3x3 stem (BN, ReLU), then four stages of 3, 4, 6 and 3
bottleneck blocks at 64, 128, 256 and 512 planes (the first block of stages 2-4 strides 2 in
frequency and time), each block's output planes x 4 wide. A block: a 1x1 conv to `width x scale`
channels (width = floor(planes x 24 / 64)), split into `scale` groups; each group, after the first
joined with the previous group's output, runs a 3x3 conv + BN + activation, and the outputs are
concatenated; a 1x1 conv + BN back to planes x 4, plus the shortcut (a strided 1x1 conv + BN where
the shape changes). Stages 1-2 join the groups by addition, stages 3-4 by attentional feature
fusion (`AFF`: 1 + tanh of a two-layer 1x1 conv on both inputs weighs one against the other).
The blocks' activation is Hardtanh(0, 20) (upstream's `ReLU` class); the stem's a plain ReLU.
Stage 3's output, downsampled by a strided 3x3 conv, is fused with stage 4's (`fuse34`, an AFF);
`forward3` flattens channels and frequency (2048 x 10 = 20480 at 80 mel bins) and averages over
time. The statistics pooling and `seg_1` projection after it (upstream's `forward`) are unused by
GPT-SoVITS; a released checkpoint holds `seg_1` anyway (the loader ignores it by name).

Batch norms are `nn.BatchNorm2d` in eval mode (running statistics). The ops and their order are
upstream's, down to the permuted (non-contiguous) input of the stem, so the bits are the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["AFF", "ERes2NetV2", "ERes2NetV2Config", "ERes2NetV2Block"]

HARDTANH_MAX = 20.0  # the blocks' "ReLU" clips at 20


@dataclass(frozen=True)
class ERes2NetV2Config:
    """The network's sizes; the defaults are GPT-SoVITS's (`baseWidth=24, scale=4, expansion=4`
    over 3D-Speaker's defaults: 80 mel bins, 64 stem channels, 3/4/6/3 blocks)."""

    feat_dim: int = 80
    m_channels: int = 64
    num_blocks: tuple[int, int, int, int] = (3, 4, 6, 3)
    base_width: int = 24
    scale: int = 4
    expansion: int = 4
    embedding_size: int = 192  # seg_1's width (held by released files, unused here)

    @property
    def channels(self) -> int:
        """Channels of the fused feature map (stage 4's planes x expansion)."""
        return self.m_channels * 8 * self.expansion

    @property
    def embedding_dim(self) -> int:
        """Width of `forward3`'s embedding: channels x the frequency bins left after 3 halvings."""
        return self.channels * math.ceil(math.ceil(math.ceil(self.feat_dim / 2) / 2) / 2)


class AFF(nn.Module):
    """Attentional feature fusion of two (B, C, F, T) maps: w = 1 + tanh(local_att([x; y])),
    x * w + y * (2 - w)."""

    def __init__(self, channels: int, r: int = 4) -> None:
        super().__init__()
        inter = channels // r
        self.local_att = nn.Sequential(
            nn.Conv2d(channels * 2, inter, kernel_size=1),
            nn.BatchNorm2d(inter),
            nn.SiLU(),
            nn.Conv2d(inter, channels, kernel_size=1),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor, ds_y: torch.Tensor) -> torch.Tensor:
        weight = 1.0 + torch.tanh(self.local_att(torch.cat((x, ds_y), dim=1)))
        return torch.mul(x, weight) + torch.mul(ds_y, 2.0 - weight)


class ERes2NetV2Block(nn.Module):
    """A bottleneck block with `scale` channel groups joined by addition or, `fuse=True`, by AFF."""

    def __init__(self, in_planes: int, planes: int, stride: int, config: ERes2NetV2Config, fuse: bool) -> None:
        super().__init__()
        c = config
        self.width = int(math.floor(planes * (c.base_width / 64.0)))
        self.scale = c.scale
        out_planes = planes * c.expansion
        self.conv1 = nn.Conv2d(in_planes, self.width * c.scale, kernel_size=1, stride=stride, bias=False)
        self.bn1 = nn.BatchNorm2d(self.width * c.scale)
        self.convs = nn.ModuleList(nn.Conv2d(self.width, self.width, kernel_size=3, padding=1, bias=False) for _ in range(c.scale))
        self.bns = nn.ModuleList(nn.BatchNorm2d(self.width) for _ in range(c.scale))
        self.fuse_models = nn.ModuleList(AFF(self.width) for _ in range(c.scale - 1)) if fuse else None
        self.conv3 = nn.Conv2d(self.width * c.scale, out_planes, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != out_planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False), nn.BatchNorm2d(out_planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.hardtanh(self.bn1(self.conv1(x)), 0.0, HARDTANH_MAX)
        groups = torch.split(out, self.width, 1)
        outs = []
        sp = groups[0]
        for i in range(self.scale):
            if i > 0:
                sp = self.fuse_models[i - 1](sp, groups[i]) if self.fuse_models is not None else sp + groups[i]
            sp = F.hardtanh(self.bns[i](self.convs[i](sp)), 0.0, HARDTANH_MAX)
            outs.append(sp)
        out = self.bn3(self.conv3(torch.cat(outs, 1)))
        return F.hardtanh(out + self.shortcut(x), 0.0, HARDTANH_MAX)


class ERes2NetV2(nn.Module):
    """Filterbanks (B, frames, feat_dim) -> the speaker embedding (B, embedding_dim) of upstream's
    `forward3`. Parameter names are 3D-Speaker's (`conv1`, `bn1`, `layer1..4`, `layer3_ds`, `fuse34`)."""

    def __init__(self, config: ERes2NetV2Config | None = None) -> None:
        super().__init__()
        c = self.config = config or ERes2NetV2Config()
        m = c.m_channels
        self.conv1 = nn.Conv2d(1, m, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(m)
        in_planes = m
        stages = []
        for i, (blocks, fuse) in enumerate(zip(c.num_blocks, (False, False, True, True))):
            planes = m * 2**i
            layer = []
            for j in range(blocks):
                layer.append(ERes2NetV2Block(in_planes, planes, 2 if i > 0 and j == 0 else 1, c, fuse))
                in_planes = planes * c.expansion
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.layer3_ds = nn.Conv2d(m * 4 * c.expansion, m * 8 * c.expansion, kernel_size=3, padding=1, stride=2, bias=False)
        self.fuse34 = AFF(m * 8 * c.expansion)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        x = feats.permute(0, 2, 1).unsqueeze(1)  # (B, 1, F, T), a view as upstream's
        out = F.relu(self.bn1(self.conv1(x)))
        out3 = self.layer3(self.layer2(self.layer1(out)))
        out4 = self.layer4(out3)
        fused = self.fuse34(out4, self.layer3_ds(out3))  # (B, C, F / 8, T / 8)
        return fused.flatten(start_dim=1, end_dim=2).mean(-1)
