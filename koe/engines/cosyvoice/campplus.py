"""CAM++ (3D-Speaker's context-aware masking speaker model), CosyVoice's `campplus.onnx`, as a native
PyTorch module: 80-bin Kaldi filterbanks in (`features.speaker_fbank`), a 192-d speaker embedding out.

The release is an ONNX graph (`input` `(1, frames, 80)` float32 -> `output` `(1, 192)` float32);
this module reads its weights by the exporter's node names (`koe.engines.cosyvoice.onnx_weights`),
so its submodules carry 3D-Speaker's names. The architecture (`CAMPPlus(feat_dim=80,
embedding_size=192)` at its defaults):

    head (FCM): the filterbank as a 1-channel image (80 frequencies x frames); conv 3x3 (32) + BN +
        ReLU; layer1, layer2: two residual blocks each (3x3 convs + BN; the first strides 2 over
        frequency, its shortcut a strided 1x1 conv + BN); conv 3x3 stride (2, 1) + BN + ReLU;
        flattened to (32 x 10) channels per frame
    xvector: tdnn (conv k5 stride 2 over time, BN, ReLU), then three dense blocks of 12, 24 and 16
        CAM layers (kernel 3, dilation 1, 2, 2; growth 32, bottleneck 128) each followed by a transit
        layer (BN, ReLU, 1x1 conv halving the channels); out_nonlinear (BN, ReLU); statistics
        pooling (mean and unbiased standard deviation over time); dense (1x1 conv to 192, BN
        without affine)
    a CAM layer: BN, ReLU, 1x1 conv to the bottleneck, BN, ReLU, then the context-aware mask: a
        local conv's output times sigmoid(linear2(relu(linear1(mean over the clip + the mean of its
        100-frame segment)))); its output is concatenated to its input

A TorchScript export in eval mode folds each batch norm that directly follows a conv into that
conv's weight and bias; the loader takes either form: a conv that arrives with a bias its module
lacks gains one, and the batch norm after it (left without weights) becomes an identity
(`CAMPPlus.conv_norm_pairs`). Sizes (channels, layers per block, kernels, dilations) are read from
the graph, so a smaller graph of the same structure loads the same way.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.cosyvoice.features import clip_16k, speaker_fbank
from koe.engines.cosyvoice.onnx_weights import Graph, graph_state, module_path, read_graph

__all__ = ["CAMPPlus", "CampPlusConfig", "from_graph", "load_campplus"]

SEGMENT = 100  # frames per segment of the CAM layer's segment pooling


@dataclass(frozen=True)
class CampPlusConfig:
    """CAM++'s sizes; the defaults are the release's."""

    feat_dim: int = 80
    m_channels: int = 32
    init_channels: int = 128
    growth_rate: int = 32
    bn_channels: int = 128
    block_layers: tuple[int, ...] = (12, 24, 16)
    kernel_sizes: tuple[int, ...] = (3, 3, 3)
    dilations: tuple[int, ...] = (1, 2, 2)
    embedding_size: int = 192


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
    """The 2-D front: (B, F, T) -> (B, m_channels * F / 8, T)."""

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
    """A local conv masked by a context gate from the clip's mean and its 100-frame segments' means."""

    def __init__(self, bn_channels: int, c_out: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.linear_local = nn.Conv1d(bn_channels, c_out, kernel, padding=(kernel - 1) // 2 * dilation, dilation=dilation, bias=False)
        self.linear1 = nn.Conv1d(bn_channels, bn_channels // 2, 1)
        self.relu = nn.ReLU()
        self.linear2 = nn.Conv1d(bn_channels // 2, c_out, 1)
        self.sigmoid = nn.Sigmoid()

        # torch's avg_pool1d (ceil_mode) divides the last, partial segment by the frames it holds,
        # as 3D-Speaker's module computes; its ONNX export (AveragePool with ceil_mode and
        # count_include_pad) divides it by the full 100 frames under onnxruntime. `from_graph` sets
        # this from the graph's pooling, so koe computes what the released graph computes.
        self.partial_over_segment = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear_local(x)
        context = x.mean(-1, keepdim=True) + self._segments(x)
        gate = self.sigmoid(self.linear2(self.relu(self.linear1(context))))
        return y * gate

    def _segments(self, x: torch.Tensor) -> torch.Tensor:
        """Each frame's 100-frame segment mean (the last segment's sum over 100, or over the frames
        it holds when `partial_over_segment` is off)."""
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
    """`forward(feats (B, frames, feat_dim)) -> (B, embedding_size)`."""

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
        return self.xvector(self.head(feats.permute(0, 2, 1)))

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

    @torch.inference_mode()
    def embed(self, speech: torch.Tensor) -> torch.Tensor:
        """The speaker embedding of a `(1, samples)` 16 kHz clip, as upstream's `_extract_spk_embedding`
        makes it: `(1, embedding_size)` float32."""
        return self(speaker_fbank(speech)).reshape(1, -1)

    def embed_clip(self, samples, sample_rate: int) -> torch.Tensor:
        """`embed` of a clip at any rate ≥ 16 kHz (channels averaged, resampled as upstream does)."""
        return self.embed(clip_16k(samples, sample_rate))


# -- from the graph -----------------------------------------------------------------------------------

_LAYER = re.compile(r"^xvector\.block(\d+)\.tdnnd(\d+)\.")


def config_from_graph(graph: Graph) -> CampPlusConfig:
    """CAM++'s sizes as a graph holds them (weights' shapes, conv attributes, the blocks' layers)."""
    convs = {module_path(n.name): n for n in graph.find("Conv")}

    def weight(path: str) -> torch.Tensor:
        node = convs.get(path)
        w = graph.static(node.inputs[1]) if node is not None else None
        if w is None:
            raise ValueError(f"the CAM++ graph has no conv weight for {path}: not a campplus.onnx graph")
        return w

    counts: dict[int, int] = {}
    for path in convs:
        if m := _LAYER.match(path + "."):
            counts[int(m.group(1))] = max(counts.get(int(m.group(1)), 0), int(m.group(2)))
    if not counts or sorted(counts) != list(range(1, len(counts) + 1)):
        raise ValueError("the CAM++ graph has no xvector.blockN.tdnndK layers in order")
    kernels, dilations = [], []
    for b in sorted(counts):
        local = convs[f"xvector.block{b}.tdnnd1.cam_layer.linear_local"]
        kernels.append(int(local.attributes.get("kernel_shape", [weight(module_path(local.name)).shape[-1]])[0]))
        dilations.append(int(local.attributes.get("dilations", [1])[0]))
    m_channels = weight("head.conv1").shape[0]
    return CampPlusConfig(
        feat_dim=weight("xvector.tdnn.linear").shape[1] // m_channels * 8,
        m_channels=m_channels,
        init_channels=weight("xvector.tdnn.linear").shape[0],
        growth_rate=weight("xvector.block1.tdnnd1.cam_layer.linear_local").shape[0],
        bn_channels=weight("xvector.block1.tdnnd1.linear1").shape[0],
        block_layers=tuple(counts[b] for b in sorted(counts)),
        kernel_sizes=tuple(kernels),
        dilations=tuple(dilations),
        embedding_size=weight("xvector.dense.linear").shape[0],
    )


def from_graph(graph: Graph) -> CAMPPlus:
    """A CAMPPlus shaped and filled from a CAM++ graph, strictly (every weight placed, every module
    weight found; a batch norm is absent only where the conv before it carries its fold)."""
    model = CAMPPlus(config_from_graph(graph))
    pools = {(bool(n.attributes.get("ceil_mode", 0)), bool(n.attributes.get("count_include_pad", 0))) for n in graph.find("AveragePool")}
    if len(pools) > 1:
        raise ValueError(f"the CAM++ graph's segment poolings disagree: {sorted(pools)}")
    for layer in model.modules():
        if isinstance(layer, CAMLayer):
            layer.partial_over_segment = pools != {(True, False)}  # ceil_mode without count_include_pad: torch's own divisor
    state, unclaimed = graph_state(graph, model)
    if unclaimed:
        raise ValueError(f"the CAM++ graph has weights koe does not place: {unclaimed[:5]}")
    modules = dict(model.named_modules())
    for conv, norm in model.conv_norm_pairs():
        folded = f"{conv}.bias" in state and modules[conv].bias is None
        has_norm = any(k.startswith(f"{norm}.") for k in state)
        if folded and not has_norm:
            modules[conv].bias = nn.Parameter(torch.zeros(modules[conv].out_channels))
            parent, _, leaf = norm.rpartition(".")
            setattr(modules[parent], leaf, nn.Identity())
        elif folded:
            raise ValueError(f"the CAM++ graph gives {conv} a bias and {norm} its own weights")
    norm = model.xvector.dense.nonlinear.batchnorm
    if isinstance(norm, nn.BatchNorm1d) and not norm.affine:  # the exporter writes unit scale and zero shift
        for key, neutral in (("weight", 1.0), ("bias", 0.0)):
            value = state.pop(f"xvector.dense.nonlinear.batchnorm.{key}", None)
            if value is not None and not torch.all(value == neutral):
                raise ValueError(f"the CAM++ graph's last batch norm has a {key}; the release's has none")
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise ValueError(f"the CAM++ graph does not fit the module: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval()


def load_campplus(path: str | os.PathLike) -> CAMPPlus:
    """CAM++ from a released `campplus.onnx`, in float32, eval mode."""
    return from_graph(read_graph(path))
