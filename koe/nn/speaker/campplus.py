"""CAM++ (3D-Speaker's context-aware masking speaker model): Kaldi filterbanks in (`(B, frames,
feat_dim)`, e.g. `koe.audio.kaldi.mean_normalized_fbank`), a speaker embedding `(B, embedding_size)`
out. CosyVoice's speaker embedding (`campplus.onnx`) and IndexTTS 2's style encoder
(`campplus_cn_common.bin`) are this network at `feat_dim=80, embedding_size=192`.

Submodules carry 3D-Speaker's names, so a 3D-Speaker state dict loads strictly (`CAMPPlus.from_state`):

    head (FCM): the filterbank as a 1-channel image (feat_dim x frames): conv1 3x3 + bn1 + ReLU;
        layer1, layer2: two residual blocks each (3x3 convs + BN; the first strides 2 over
        frequency, its shortcut a strided 1x1 conv + BN); conv2 3x3 stride (2, 1) + bn2 + ReLU;
        flattened to m_channels * feat_dim / 8 channels per frame
    xvector: tdnn (conv k5 stride 2 over time, BN, ReLU); blockN of CAM layers (each adds
        growth_rate channels), each block followed by transitN (BN, ReLU, 1x1 conv halving the
        channels); out_nonlinear (BN, ReLU); statistics pooling (mean and unbiased std over time);
        dense (1x1 conv to embedding_size, BN without affine)
    a CAM layer: BN, ReLU, 1x1 conv to the bottleneck, BN, ReLU, then a local conv times
        sigmoid(linear2(relu(linear1(clip mean + its 100-frame segment's mean)))), concatenated to
        its input

Batch norms run in eval mode (their running statistics). An eval-mode export may fold a batch norm
that directly follows a conv into that conv (`CAMPPlus.conv_norm_pairs` lists those pairs); a loader
of such a file replaces the norm by an identity and gives the conv a bias.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CAMLayer", "CAMPPlus", "CampPlusConfig", "ResBlock"]

SEGMENT = 100  # frames per segment of a CAM layer's context pooling


@dataclass(frozen=True)
class CampPlusConfig:
    """CAM++'s sizes; the defaults are 3D-Speaker's `CAMPPlus(feat_dim=80, embedding_size=192)`
    (bottleneck `bn_channels` = its `bn_size` 4 x `growth_rate`)."""

    feat_dim: int = 80
    m_channels: int = 32
    init_channels: int = 128
    growth_rate: int = 32
    bn_channels: int = 128
    block_layers: tuple[int, ...] = (12, 24, 16)
    kernel_sizes: tuple[int, ...] = (3, 3, 3)
    dilations: tuple[int, ...] = (1, 2, 2)
    embedding_size: int = 192

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            for v in value if isinstance(value, tuple) else (value,):
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                    raise ValueError(f"CAM++ config: {f.name} must be a positive int (or a tuple of them), got {value!r}")
        if self.feat_dim % 8:
            raise ValueError(f"CAM++ config: feat_dim must be a multiple of 8, got {self.feat_dim}")
        if not len(self.block_layers) == len(self.kernel_sizes) == len(self.dilations) > 0:
            raise ValueError(
                f"CAM++ config: block_layers, kernel_sizes and dilations must be as long (one per block), got {self.block_layers}, {self.kernel_sizes}, {self.dilations}"
            )


def _bn_relu(channels: int) -> nn.Sequential:
    return nn.Sequential(OrderedDict(batchnorm=nn.BatchNorm1d(channels), relu=nn.ReLU()))


class ResBlock(nn.Module):
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
        return F.relu(out + self.shortcut(x))


class FCM(nn.Module):
    """The 2-D front: `(B, feat_dim, T)` -> `(B, m_channels * feat_dim / 8, T)`."""

    def __init__(self, m_channels: int, feat_dim: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, m_channels, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(m_channels)
        self.layer1 = nn.Sequential(ResBlock(m_channels, m_channels, 2), ResBlock(m_channels, m_channels, 1))
        self.layer2 = nn.Sequential(ResBlock(m_channels, m_channels, 2), ResBlock(m_channels, m_channels, 1))
        self.conv2 = nn.Conv2d(m_channels, m_channels, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(m_channels)
        self.out_channels = m_channels * (feat_dim // 8)

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

        # torch's avg_pool1d (ceil_mode) divides the last, partial segment by the frames it holds, as
        # 3D-Speaker's module computes; an ONNX export of it (AveragePool with ceil_mode and
        # count_include_pad) divides it by the full 100 frames under onnxruntime. A loader of such a
        # graph turns this on, so koe computes what the graph computes.
        self.partial_over_segment = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear_local(x)
        context = x.mean(-1, keepdim=True) + self._segments(x)
        return y * self.sigmoid(self.linear2(self.relu(self.linear1(context))))

    def _segments(self, x: torch.Tensor) -> torch.Tensor:
        """Each frame's 100-frame segment mean (the last segment's sum over 100 with
        `partial_over_segment`, else over the frames it holds)."""
        if self.partial_over_segment:
            seg = F.avg_pool1d(F.pad(x, (0, -x.shape[-1] % SEGMENT)), kernel_size=SEGMENT, stride=SEGMENT)  # (B, C, S)
        else:
            seg = F.avg_pool1d(x, kernel_size=SEGMENT, stride=SEGMENT, ceil_mode=True)
        shape = seg.shape
        seg = seg.unsqueeze(-1).expand(*shape, SEGMENT).reshape(*shape[:-1], -1)  # (B, C, S * 100)
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
        self.head = FCM(config.m_channels, config.feat_dim)
        channels = config.init_channels
        self.xvector = nn.Sequential(OrderedDict(tdnn=TDNNLayer(self.head.out_channels, channels, 5, stride=2)))
        blocks = zip(config.block_layers, config.kernel_sizes, config.dilations, strict=True)
        for i, (layers, kernel, dilation) in enumerate(blocks):
            self.xvector.add_module(f"block{i + 1}", CAMDenseTDNNBlock(layers, channels, config.growth_rate, config.bn_channels, kernel, dilation))
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

    @classmethod
    def from_state(cls, state: Mapping[str, torch.Tensor], config: Any = None) -> CAMPPlus:
        """`cls(config)` (`cls()` without one) holding `state`'s tensors, loaded strictly (every key,
        every shape), in eval mode."""
        with torch.device("meta"):
            model = cls() if config is None else cls(config)
        model.load_state_dict(state, strict=True, assign=True)
        return model.eval()

    def conv_norm_pairs(self) -> list[tuple[str, str]]:
        """(conv, batch norm) module paths where the norm directly follows the conv: the pairs an
        eval-mode export may fold into one conv."""
        pairs = [("head.conv1", "head.bn1"), ("head.conv2", "head.bn2")]
        for name, block in self.head.named_modules(prefix="head"):
            if isinstance(block, ResBlock):
                pairs += [(f"{name}.conv1", f"{name}.bn1"), (f"{name}.conv2", f"{name}.bn2")]
                if len(block.shortcut):
                    pairs.append((f"{name}.shortcut.0", f"{name}.shortcut.1"))
        pairs.append(("xvector.tdnn.linear", "xvector.tdnn.nonlinear.batchnorm"))
        for name, layer in self.xvector.named_modules(prefix="xvector"):
            if isinstance(layer, CAMDenseTDNNLayer):
                pairs.append((f"{name}.linear1", f"{name}.nonlinear2.batchnorm"))
        last = len(self.config.block_layers)
        pairs.append((f"xvector.transit{last}.linear", "xvector.out_nonlinear.batchnorm"))  # the last transit feeds only that norm
        pairs.append(("xvector.dense.linear", "xvector.dense.nonlinear.batchnorm"))
        return pairs
