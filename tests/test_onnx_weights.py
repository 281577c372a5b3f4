"""koe's ONNX reader (koe.runtime.onnx_weights) against files written by `onnx.helper`."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from koe.runtime.onnx_weights import OnnxFormatError, read_graph


def _model(tmp_path, *, external: bool = False):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    inits = [
        numpy_helper.from_array(w, "w_raw"),  # raw_data
        helper.make_tensor("w_typed", TensorProto.FLOAT, [2, 2], [1.5, -2.0, 3.25, 0.0]),  # float_data
        helper.make_tensor("shape", TensorProto.INT64, [3], [1, -1, 4]),  # int64_data
        numpy_helper.from_array(rng.standard_normal(5).astype(np.float16), "half"),
        numpy_helper.from_array(np.array([3, -7], dtype=np.int32), "i32"),
        helper.make_tensor("half_typed", TensorProto.FLOAT16, [2], np.array([1.0, -0.5], np.float16).view(np.uint16).tolist()),
        numpy_helper.from_array(np.array(2.5, dtype=np.float64), "scalar64"),
    ]
    const = helper.make_node(
        "Constant", [], ["c_out"], name="/blocks.0/Constant", value=numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "c")
    )
    ident = helper.make_node("Identity", ["w_raw"], ["w_alias"], name="Identity_3")
    matmul = helper.make_node("MatMul", ["feats", "w_alias"], ["y"], name="/blocks.0/attn/query/MatMul")
    add = helper.make_node("Add", ["y", "c_out"], ["z"], name="/blocks.0/attn/query/Add")
    conv = helper.make_node("Conv", ["z", "w_typed"], ["indices"], name="/conv1/Conv", kernel_shape=[3], pads=[1, 1], strides=[2], group=1, auto_pad="NOTSET")
    ln = helper.make_node("LayerNormalization", ["z", "half", "half"], ["ln"], name="/ln/LayerNormalization", epsilon=1e-5, axis=-1)
    graph = helper.make_graph(
        [const, ident, matmul, add, conv, ln],
        "main_graph",
        [helper.make_tensor_value_info("feats", TensorProto.FLOAT, [1, 128, "T"]), helper.make_tensor_value_info("feats_length", TensorProto.INT32, [1])],
        [helper.make_tensor_value_info("indices", TensorProto.INT64, [1, "T2"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    path = tmp_path / "m.onnx"
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return model, path


def test_initializers_equal_onnx_numpy_helper(tmp_path):
    model, path = _model(tmp_path)
    g = read_graph(path)
    assert set(g.initializers) == {t.name for t in model.graph.initializer}
    for t in model.graph.initializer:
        want = numpy_helper.to_array(t)
        got = g.initializers[t.name]
        assert got.shape == want.shape and got.numpy().dtype == want.dtype, t.name
        assert np.array_equal(got.numpy(), want), t.name


def test_nodes_attributes_inputs_outputs(tmp_path):
    _, path = _model(tmp_path)
    g = read_graph(path)
    assert g.opset == 17 and g.opsets["com.microsoft"] == 1 and g.name == "main_graph"
    assert [n.op_type for n in g.nodes] == ["Constant", "Identity", "MatMul", "Add", "Conv", "LayerNormalization"]
    conv = g.find("Conv")[0]
    assert conv.name == "/conv1/Conv" and conv.inputs == ("z", "w_typed") and conv.outputs == ("indices",)
    assert conv.attributes == {"kernel_shape": [3], "pads": [1, 1], "strides": [2], "group": 1, "auto_pad": b"NOTSET"}
    assert g.find("LayerNormalization")[0].attributes["epsilon"] == pytest.approx(1e-5)
    assert [(v.name, v.elem_type, v.shape) for v in g.inputs] == [("feats", 1, (1, 128, "T")), ("feats_length", 6, (1,))]
    assert g.inputs[0].dtype == torch.float32 and g.inputs[1].dtype == torch.int32 and g.outputs[0].dtype == torch.int64
    assert g.outputs[0].shape == (1, "T2")
    assert [n.name for n in g.find(prefix="/blocks.0/")] == ["/blocks.0/Constant", "/blocks.0/attn/query/MatMul", "/blocks.0/attn/query/Add"]


def test_static_follows_constants_and_identities(tmp_path):
    _, path = _model(tmp_path)
    g = read_graph(path)
    matmul, add = g.find("MatMul")[0], g.find("Add")[0]
    x, w = g.node_weights(matmul)
    assert x is None and torch.equal(w, g.initializers["w_raw"])  # through Identity
    y, c = g.node_weights(add)
    assert y is None and torch.equal(c, torch.arange(6, dtype=torch.float32).reshape(2, 3))  # a Constant's value
    assert g.static("feats") is None and g.static("nothing") is None


def test_refuses_what_it_cannot_read(tmp_path):
    _, path = _model(tmp_path)
    data = path.read_bytes()
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxFormatError, match="cut.onnx"):
        read_graph(bad)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(OnnxFormatError, match="empty file"):
        read_graph(empty)
    text = tmp_path / "text.onnx"
    text.write_bytes(b"not an onnx model at all\n")
    with pytest.raises(OnnxFormatError):
        read_graph(text)
    ext_dir = tmp_path / "ext"
    ext_dir.mkdir()
    _, ext = _model(ext_dir, external=True)
    with pytest.raises(OnnxFormatError, match="external data"):
        read_graph(ext)
