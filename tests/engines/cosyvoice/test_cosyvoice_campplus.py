"""CosyVoice's CAM++ speaker embedding (koe.engines.cosyvoice.campplus) and its Kaldi filterbank
input on koe's side alone: the ONNX fixture loads back (folded norms included), the released
sizes, the segment pooling as the graph computes it, the clip rules. Parity with onnxruntime and
upstream's frontend: test_cosyvoice_onnx_parity.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from koe.audio.kaldi import kaldi_fbank
from koe.engines.cosyvoice.campplus import CAMLayer, CAMPPlus, CampPlusConfig, load_campplus
from koe.engines.cosyvoice.features import ClipError, speaker_fbank
from koe.engines.cosyvoice.fixtures_onnx import CAMPPLUS_SIZES, random_campplus, write_campplus, write_onnx_parts
from koe.engines.cosyvoice.speech_tokenizer import load_speech_tokenizer
from koe.runtime.onnx_weights import read_graph


@pytest.fixture(scope="module")
def graph_path(tmp_path_factory):
    return write_campplus(tmp_path_factory.mktemp("campplus") / "campplus.onnx", "tiny", seed=3)


def test_fixture_structure_as_released(graph_path):
    g = read_graph(graph_path)
    assert [(v.name, v.dtype, v.shape[-1]) for v in g.inputs] == [("input", torch.float32, 80)]
    assert [(v.name, v.shape[-1]) for v in g.outputs] == [("output", 192)]
    names = {n.name for n in g.nodes}
    for name in (
        "/head/conv1/Conv",
        "/head/layer1/layer1.0/shortcut/shortcut.0/Conv",
        "/xvector/tdnn/linear/Conv",
        "/xvector/block1/tdnnd1/cam_layer/linear_local/Conv",
        "/xvector/transit3/linear/Conv",
        "/xvector/dense/linear/Conv",
    ):
        assert name in names, name
    assert not g.find("BatchNormalization", "/head/")  # folded into the convs before them
    assert g.find("BatchNormalization", "/xvector/block1/tdnnd1/nonlinear1/")  # a norm after a concatenation stays
    for name in ("/head/Relu_1", "/xvector/block1/tdnnd1/cam_layer/Slice", "/xvector/block1/tdnnd1/cam_layer/Mul_1", "/xvector/out_nonlinear/relu/Relu"):
        assert name in names, name  # as ports of the released file name them
    (last,) = g.find("BatchNormalization", "/xvector/dense/")  # after a Squeeze: not folded; affine-free
    assert [n for n in last.inputs[1:3] if n in g.initializers] == []
    assert torch.equal(g.static(last.inputs[1]), torch.ones(192)) and torch.equal(g.static(last.inputs[2]), torch.zeros(192))
    pools = g.find("AveragePool")
    assert pools and all(p.attributes["ceil_mode"] == 1 and p.attributes["count_include_pad"] == 1 for p in pools)


def test_fixture_loads_back(graph_path):
    want = random_campplus("tiny", seed=3)
    got = load_campplus(graph_path)
    assert got.config == CAMPPLUS_SIZES["tiny"]
    assert isinstance(got.head.bn1, nn.Identity) and got.head.conv1.bias is not None  # the fold, taken as the graph has it
    assert isinstance(got.xvector.block1.tdnnd1.nonlinear1.batchnorm, nn.BatchNorm1d)
    assert all(m.partial_over_segment for m in got.modules() if isinstance(m, CAMLayer))
    with torch.no_grad():
        for frames in (200, 400):  # whole 100-frame segments after the stride-2 tdnn: both poolings agree
            x = torch.randn(1, frames, 80)
            assert (want(x) - got(x)).abs().max() < 1e-5


def test_partial_segment_over_the_whole_segment():
    """The graph's pooling divides the last, partial segment's sum by 100, torch's by the frames it has."""
    layer = CAMLayer(4, 2, 3, 1)
    x = torch.randn(1, 4, 130)
    torch_mean = layer._segments(x)
    layer.partial_over_segment = True
    graph_mean = layer._segments(x)
    assert torch.equal(torch_mean[..., :100], graph_mean[..., :100])
    assert torch.allclose(graph_mean[..., 100:], x[..., 100:].sum(-1, keepdim=True) / 100)
    assert torch.allclose(torch_mean[..., 100:], x[..., 100:].mean(-1, keepdim=True))


def test_released_size():
    model = CAMPPlus(CampPlusConfig()).eval()
    count = sum(p.numel() for p in model.parameters())
    # 6.85 M weights; exported at this size (folded norms, the rest's statistics) the graph is
    # 28,280,812 bytes, the released campplus.onnx 28,303,423
    assert 6.8e6 < count < 6.9e6, count
    assert model(torch.randn(1, 150, 80)).shape == (1, 192)


def test_embedding_of_a_clip_and_its_rules(graph_path):
    model = load_campplus(graph_path)
    speech = torch.randn(1, 16000) * 0.1
    feat = speaker_fbank(speech)
    assert feat.shape == (1, 98, 80) and kaldi_fbank(speech).shape == (98, 80)  # 1 + (16000 - 400) // 160
    assert torch.allclose(feat.mean(dim=1), torch.zeros(1, 80), atol=1e-5)
    assert model.embed(speech).shape == (1, 192)
    with pytest.raises(ClipError, match="too short for the speaker embedding: 399 samples"):
        model.embed(torch.zeros(1, 399))


@pytest.mark.parametrize("version", [2, 3])
def test_a_release_folders_onnx_parts(tmp_path, version):
    parts = write_onnx_parts(tmp_path, version, "tiny", seed=7)
    assert sorted(parts) == ["campplus.onnx", f"speech_tokenizer_v{version}.onnx"]
    assert all(p.parent == tmp_path and p.is_file() for p in parts.values())
    assert load_campplus(parts["campplus.onnx"]).config == CAMPPLUS_SIZES["tiny"]
    assert len(load_speech_tokenizer(parts[f"speech_tokenizer_v{version}.onnx"]).blocks) == {2: 2, 3: 3}[version]
