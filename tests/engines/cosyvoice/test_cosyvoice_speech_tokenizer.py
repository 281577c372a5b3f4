"""CosyVoice's S3 speech tokenizer (koe.engines.cosyvoice.speech_tokenizer) and its features, on koe's
side alone: the ONNX fixtures load back into the same weights, the released sizes, the FSQ ids, the
clip rules. Parity with onnxruntime and upstream's frontend: test_cosyvoice_onnx_parity.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from koe.engines.cosyvoice.features import ClipError, clip_16k, tokenizer_log_mel
from koe.engines.cosyvoice.fixtures_onnx import TOKENIZER_OPSETS, random_speech_tokenizer, write_speech_tokenizer
from koe.engines.cosyvoice.speech_tokenizer import CODEBOOK_SIZE, S3Tokenizer, from_graph, load_speech_tokenizer
from koe.runtime.onnx_weights import read_graph


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    d = tmp_path_factory.mktemp("s3")
    return {v: write_speech_tokenizer(d / f"speech_tokenizer_v{v}.onnx", v, "tiny", seed=v) for v in (2, 3)}


@pytest.mark.parametrize("version", [2, 3])
def test_fixture_loads_back_into_the_same_weights(graphs, version):
    want = random_speech_tokenizer(version, "tiny", seed=version)
    got = load_speech_tokenizer(graphs[version])
    assert len(got.blocks) == len(want.blocks) == {2: 2, 3: 3}[version] and got.width == 128
    a, b = want.state_dict(), got.state_dict()
    assert set(a) == set(b)
    assert all(torch.equal(a[k], b[k]) for k in a)
    feats = torch.randn(1, 128, 173)
    ids = got(feats, torch.tensor([173], dtype=torch.int32))
    assert ids.dtype == torch.int32 and ids.shape == (1, 44)  # ceil(173 / 4)
    assert torch.equal(ids, want(feats, torch.tensor([173], dtype=torch.int32)))


def test_graph_structure_as_released(graphs):
    """The names s3tokenizer maps the released files by; v2's layer norms as nodes, v3's decomposed."""
    for version, path in graphs.items():
        g = read_graph(path)
        assert g.opset == TOKENIZER_OPSETS[version]
        assert [(v.name, v.dtype) for v in g.inputs] == [("feats", torch.float32), ("feats_length", torch.int32)]
        assert [v.name for v in g.outputs] == ["indices"] and g.inputs[0].shape[1] == 128
        names = {n.name for n in g.nodes}
        for name in (
            "/conv1/Conv",
            "/conv2/Conv",
            "/blocks.0/attn/query/MatMul",
            "/blocks.0/attn/key/MatMul",
            "/blocks.0/attn/fsmn_block/Conv",
            "/blocks.0/mlp/mlp.0/MatMul",
            "/quantizer/project_in/MatMul",
        ):
            assert name in names, name
        assert "quantizer.project_in.bias" in g.initializers and "blocks.0.attn.fsmn_block.weight" in g.initializers
        assert ("/blocks.0/attn_ln/LayerNormalization" in names) == (version == 2)
        assert ("/blocks.0/attn_ln/Mul" in names) == (version == 3)


def test_released_sizes():
    v2, v3 = S3Tokenizer(1280, 6), S3Tokenizer(1280, 12)
    assert v2.blocks[0].attn.heads == 20
    assert v2.conv1.weight.shape == (1280, 128, 3) and v2.blocks[0].attn.fsmn_block.weight.shape == (1280, 1, 31)
    assert v2.quantizer.project_in.weight.shape == (8, 1280)
    count = sum(p.numel() for p in v2.parameters())
    assert 120e6 < count < 126e6, count  # 496 MB of float32 in speech_tokenizer_v2.onnx
    assert 240e6 < sum(p.numel() for p in v3.parameters()) < 246e6  # 969 MB in _v3


def test_fsq_ids_are_base3_digits():
    model = S3Tokenizer(64, 1)
    q = model.quantizer
    with torch.no_grad():
        q.project_in.weight.zero_()
        q.project_in.bias.copy_(torch.tensor([5.0, -5.0, 0.0, 0.4, -0.6, 0.6, 5.0, 5.0]))
    ids = q(torch.zeros(1, 1, 64))
    digits = [2, 0, 1, 1, 0, 2, 2, 2]  # round(tanh(b) * 0.999) + 1
    assert ids.item() == sum(d * 3**i for i, d in enumerate(digits))
    ids = q(torch.randn(1, 50, 64) * 10)
    assert ids.min() >= 0 and ids.max() < CODEBOOK_SIZE


def test_padded_rows_match_their_own_length(graphs):
    """Frames past a row's length never reach the valid ones (masks before each conv, keys and FSMN)."""
    model = load_speech_tokenizer(graphs[2])
    feats = torch.randn(1, 128, 90)
    alone = model(feats, torch.tensor([90], dtype=torch.int32))
    padded = torch.cat([feats, torch.randn(1, 128, 30)], dim=-1)
    both = model(torch.cat([padded, padded]), torch.tensor([90, 120], dtype=torch.int32))
    assert torch.equal(both[0, :23], alone[0])


def test_strict_loading(graphs, tmp_path):
    model = onnx.load(str(graphs[2]))
    for node in model.graph.node:
        if node.name == "/blocks.0/attn/value/MatMul":
            node.name = "/blocks.0/attn/values/MatMul"
    bad = tmp_path / "renamed.onnx"
    onnx.save(model, str(bad))
    with pytest.raises(ValueError, match="does not place.*values"):
        load_speech_tokenizer(bad)
    g = read_graph(graphs[2])
    g.nodes = [n for n in g.nodes if n.name != "/blocks.1/attn/out/Add"]
    with pytest.raises(ValueError, match="missing.*blocks.1.attn.out.bias"):
        from_graph(g)
    g = read_graph(graphs[3])
    g.nodes = [n for n in g.nodes if n.name != "/blocks.0/mlp_ln/Add_1"]  # a norm without a shift (its graph would lack the Add)
    assert torch.equal(from_graph(g).blocks[0].mlp_ln.bias, torch.zeros(128))
    g.nodes = [n for n in g.nodes if n.name != "/blocks.0/mlp_ln/Mul"]
    with pytest.raises(ValueError, match="missing.*blocks.0.mlp_ln.weight"):
        from_graph(g)
    with pytest.raises(ValueError, match="not an S3 speech tokenizer"):
        from_graph(read_graph(write_tiny_other(tmp_path)))


def write_tiny_other(tmp_path):
    """A graph with the tokenizer's inputs and none of its nodes."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["feats"], ["indices"], name="/Identity")],
        "g",
        [helper.make_tensor_value_info("feats", TensorProto.FLOAT, [1, 128, "T"]), helper.make_tensor_value_info("feats_length", TensorProto.INT32, [1])],
        [helper.make_tensor_value_info("indices", TensorProto.FLOAT, [1, 128, "T"])],
    )
    path = tmp_path / "other.onnx"
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_clip_rules(graphs):
    model = load_speech_tokenizer(graphs[3])
    with pytest.raises(ClipError, match=r"30\.01 s long.*at most 30 s"):
        model.tokenize(torch.zeros(1, 30 * 16000 + 160))
    ids = model.tokenize(torch.randn(1, 30 * 16000) * 0.1)  # 30 s exactly is taken
    assert ids.shape == (1, 750)
    with pytest.raises(ClipError, match="too short for the speech tokenizer"):
        tokenizer_log_mel(torch.zeros(1, 200))
    with pytest.raises(ClipError, match="8000 Hz; CosyVoice needs at least 16000 Hz"):
        model.tokenize_clip(np.zeros(8000, np.float32), 8000)
    stereo = np.random.default_rng(0).standard_normal((24000, 2)).astype(np.float32) * 0.1
    assert clip_16k(stereo, 24000).shape == (1, 16000)
    assert torch.equal(clip_16k(stereo[:, 0], 16000), torch.from_numpy(stereo[:, 0]).unsqueeze(0))
