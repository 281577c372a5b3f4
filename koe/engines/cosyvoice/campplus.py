"""CosyVoice's speaker embedding: its `campplus.onnx` loaded into koe's CAM++ (`koe.nn.speaker.campplus`),
80-bin Kaldi filterbanks in (`features.speaker_fbank`), a 192-d speaker embedding out.

The release is an ONNX graph (`input` `(1, frames, 80)` float32 -> `output` `(1, 192)` float32) of
3D-Speaker's `CAMPPlus(feat_dim=80, embedding_size=192)`; this module reads its weights by the
exporter's node names (`koe.runtime.onnx_weights`), which are the network's module paths.

A TorchScript export in eval mode folds each batch norm that directly follows a conv into that
conv's weight and bias; the loader takes either form: a conv that arrives with a bias its module
lacks gains one, and the batch norm after it (left without weights) becomes an identity
(`CAMPPlus.conv_norm_pairs`). The graph's segment pooling divides the last, partial segment by 100
frames (`CAMLayer.partial_over_segment`). Sizes (channels, layers per block, kernels, dilations) are
read from the graph, so a smaller graph of the same structure loads the same way.
"""

from __future__ import annotations

import os
import re

import torch
from torch import nn

from koe.engines.cosyvoice.features import clip_16k, speaker_fbank
from koe.nn.speaker import campplus
from koe.nn.speaker.campplus import CAMLayer, CampPlusConfig
from koe.runtime.onnx_weights import Graph, graph_state, module_path, read_graph

__all__ = ["CAMPPlus", "CampPlusConfig", "from_graph", "load_campplus"]


class CAMPPlus(campplus.CAMPPlus):
    """koe's CAM++ with CosyVoice's embedding of a prompt clip."""

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
