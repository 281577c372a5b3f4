"""Read an ONNX file's weights and graph facts into torch tensors, without onnx or onnxruntime.

Some releases ship parts as ONNX graphs (CosyVoice's `campplus.onnx` and
`speech_tokenizer_v2/v3.onnx`, GPT-SoVITS's G2PW `g2pW.onnx`); koe runs them as native PyTorch
modules and reads the graphs only for their weights. An ONNX file is
a protobuf `ModelProto`; this module decodes the few messages that matter with a small wire-format
reader of its own (no dependency, no code generated from `onnx.proto`):

    ModelProto      opset_import (8: OperatorSetIdProto: domain 1, version 2), graph (7)
    GraphProto      node (1), name (2), initializer (5), input (11), output (12)
    NodeProto       input (1), output (2), name (3), op_type (4), attribute (5), domain (7)
    AttributeProto  name (1), f (2), i (3), s (4), t (5), floats (7), ints (8), type (20)
    TensorProto     dims (1), data_type (2), float_data (4), int32_data (5), int64_data (7), name (8),
                    raw_data (9), double_data (10), data_location (14)
    ValueInfoProto  name (1), type (2) -> TypeProto.tensor_type (1) -> elem_type (1), shape (2) ->
                    dim (1) -> dim_value (1) | dim_param (2)

A weight reaches a node in one of three ways, and `Graph.static` follows all three: an initializer,
the output of a `Constant` node (its `value` attribute), or an `Identity` of either (the TorchScript
exporter shares equal constants that way). Weights stored outside the file (`data_location` =
EXTERNAL) are refused with a clear error: the released graphs hold theirs inline.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

__all__ = ["Graph", "Node", "OnnxFormatError", "ValueInfo", "read_graph"]


class OnnxFormatError(ValueError):
    """The file is not an ONNX model this reader understands (truncated, not protobuf, external data)."""


# TensorProto.DataType -> numpy dtype (the ones a weight can have)
_DTYPES = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}
_BFLOAT16 = 16


@dataclass(frozen=True)
class ValueInfo:
    """A graph input or output: its name, element type (TensorProto.DataType) and shape (an int per
    fixed dimension, the symbolic name of a dynamic one)."""

    name: str
    elem_type: int
    shape: tuple[int | str, ...]

    @property
    def dtype(self) -> torch.dtype:
        if self.elem_type == _BFLOAT16:
            return torch.bfloat16
        return torch.from_numpy(np.zeros(0, _DTYPES[self.elem_type])).dtype


@dataclass(frozen=True)
class Node:
    """One operator: name as the exporter wrote it (`/blocks.0/attn/query/MatMul`), op type, the
    names of its inputs and outputs, and its attributes (ints, floats, strings, lists, tensors)."""

    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: dict = field(default_factory=dict)
    domain: str = ""


@dataclass
class Graph:
    """An ONNX model's main graph: nodes in file order, initializers by name, inputs, outputs, opsets."""

    nodes: list[Node]
    initializers: dict[str, torch.Tensor]
    inputs: list[ValueInfo]
    outputs: list[ValueInfo]
    opsets: dict[str, int]
    name: str = ""

    def __post_init__(self) -> None:
        self._constants: dict[str, torch.Tensor] = {}
        self._aliases: dict[str, str] = {}
        for node in self.nodes:
            if node.op_type == "Constant" and "value" in node.attributes:
                self._constants[node.outputs[0]] = node.attributes["value"]
            elif node.op_type == "Identity" and len(node.inputs) == 1:
                self._aliases[node.outputs[0]] = node.inputs[0]
        # graph inputs that carry a default (old exporters list initializers as inputs too) are not weights
        self._runtime = {v.name for v in self.inputs if v.name not in self.initializers}

    @property
    def opset(self) -> int:
        """The default domain's opset version."""
        return self.opsets.get("", self.opsets.get("ai.onnx", 0))

    def static(self, name: str) -> torch.Tensor | None:
        """The weight a node input names (an initializer, a Constant's value, an Identity of either), or None."""
        seen = 0
        while name in self._aliases and seen < 64:
            name, seen = self._aliases[name], seen + 1
        if name in self._runtime:
            return None
        if name in self.initializers:
            return self.initializers[name]
        return self._constants.get(name)

    def node_weights(self, node: Node) -> list[torch.Tensor | None]:
        """`static` of each of `node`'s inputs, in order."""
        return [self.static(name) for name in node.inputs]

    def find(self, op_type: str | None = None, prefix: str = "") -> list[Node]:
        """The nodes of an op type (any when None) whose name starts with `prefix`, in file order."""
        return [n for n in self.nodes if (op_type is None or n.op_type == op_type) and n.name.startswith(prefix)]


# -- the protobuf wire format -------------------------------------------------------------------------


def _varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise OnnxFormatError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise OnnxFormatError("varint too long")


def _fields(buf, start: int = 0, end: int | None = None):
    """Yield (field number, wire type, value) of one message: an int for varint/fixed fields, a
    (start, end) span into `buf` for length-delimited ones."""
    pos, end = start, len(buf) if end is None else end
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = struct.unpack_from("<Q", buf, pos)[0], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = (pos, pos + size), pos + size
        elif wire == 5:
            value, pos = struct.unpack_from("<I", buf, pos)[0], pos + 4
        else:
            raise OnnxFormatError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise OnnxFormatError("truncated protobuf message")
        yield number, wire, value


def _text(buf, span: tuple[int, int]) -> str:
    return bytes(buf[span[0] : span[1]]).decode("utf-8")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _ints(buf, wire: int, value) -> list[int]:
    """A repeated int64 field's entries from one occurrence (packed or not)."""
    if wire == 0:
        return [_signed(value)]
    out, pos = [], value[0]
    while pos < value[1]:
        v, pos = _varint(buf, pos)
        out.append(_signed(v))
    return out


def _tensor(buf, start: int, end: int) -> tuple[str, torch.Tensor]:
    dims: list[int] = []
    name, data_type, raw, external = "", 0, None, False
    typed: dict[int, list] = {}
    for number, wire, value in _fields(buf, start, end):
        if number == 1:
            dims += _ints(buf, wire, value)
        elif number == 2:
            data_type = value
        elif number == 8:
            name = _text(buf, value)
        elif number == 9:
            raw = value
        elif number == 14:
            external = value == 1
        elif number in (4, 5, 7, 10):
            typed.setdefault(number, []).append((wire, value))
    if external:
        raise OnnxFormatError(f"tensor {name!r} keeps its data outside the file (external data is not supported)")
    if data_type == _BFLOAT16:
        np_dtype = np.uint16
    elif data_type in _DTYPES:
        np_dtype = _DTYPES[data_type]
    else:
        raise OnnxFormatError(f"tensor {name!r}: unsupported data type {data_type}")
    count = int(np.prod(dims)) if dims else 1
    if raw is not None:
        array = np.frombuffer(buf, dtype=np.dtype(np_dtype).newbyteorder("<"), count=count, offset=raw[0]).copy()
        if raw[1] - raw[0] != array.nbytes:
            raise OnnxFormatError(f"tensor {name!r}: raw_data holds {raw[1] - raw[0]} bytes, its shape needs {array.nbytes}")
    else:
        array = _typed_values(buf, typed, data_type, np_dtype, name)
    if array.size != count:
        raise OnnxFormatError(f"tensor {name!r}: {array.size} values for shape {dims}")
    array = array.reshape(tuple(dims))
    t = torch.from_numpy(array.copy(order="C") if not array.flags.c_contiguous else array)
    if data_type == _BFLOAT16:
        t = t.view(torch.bfloat16)
    return name, t


def _typed_values(buf, typed: dict, data_type: int, np_dtype, name: str) -> np.ndarray:
    """Values stored in TensorProto's typed fields instead of raw_data."""
    if 4 in typed:  # float_data: packed fixed32 floats (or one per field)
        parts = [
            np.frombuffer(buf, "<f4", (v[1] - v[0]) // 4, v[0]) if w == 2 else np.array([struct.unpack("<f", struct.pack("<I", v))[0]], "<f4")
            for w, v in typed[4]
        ]
        return np.concatenate(parts).astype(np_dtype)
    if 10 in typed:  # double_data
        parts = [
            np.frombuffer(buf, "<f8", (v[1] - v[0]) // 8, v[0]) if w == 2 else np.array([struct.unpack("<d", struct.pack("<Q", v))[0]]) for w, v in typed[10]
        ]
        return np.concatenate(parts).astype(np_dtype)
    if 7 in typed:  # int64_data
        return np.array([x for w, v in typed[7] for x in _ints(buf, w, v)], dtype=np.int64).astype(np_dtype)
    if 5 in typed:  # int32_data (also holds int8/16, uint8/16, bool and float16 bit patterns)
        values = np.array([x for w, v in typed[5] for x in _ints(buf, w, v)], dtype=np.int64)
        if data_type in (10, _BFLOAT16):
            return values.astype(np.uint16).view(np.float16 if data_type == 10 else np.uint16)
        return values.astype(np_dtype)
    return np.zeros(0, dtype=np_dtype)


def _attribute(buf, start: int, end: int) -> tuple[str, object]:
    name, value, floats, ints, strings = "", None, [], [], []
    attr_type = 0
    for number, wire, v in _fields(buf, start, end):
        if number == 1:
            name = _text(buf, v)
        elif number == 2:
            value = struct.unpack("<f", struct.pack("<I", v))[0]
        elif number == 3:
            value = _signed(v)
        elif number == 4:
            value = bytes(buf[v[0] : v[1]])
        elif number == 5:
            value = _tensor(buf, *v)[1]
        elif number == 7:
            if wire == 2:
                floats += np.frombuffer(buf, "<f4", (v[1] - v[0]) // 4, v[0]).tolist()
            else:
                floats.append(struct.unpack("<f", struct.pack("<I", v))[0])
        elif number == 8:
            ints += _ints(buf, wire, v)
        elif number == 9:
            strings.append(bytes(buf[v[0] : v[1]]))
        elif number == 20:
            attr_type = v
    if attr_type == 6 or (value is None and floats):  # FLOATS
        value = floats
    elif attr_type == 7 or (value is None and ints):  # INTS
        value = ints
    elif attr_type == 8 or (value is None and strings):  # STRINGS
        value = strings
    return name, value


def _node(buf, start: int, end: int) -> Node:
    inputs, outputs, attributes = [], [], {}
    name = op_type = domain = ""
    for number, _, v in _fields(buf, start, end):
        if number == 1:
            inputs.append(_text(buf, v))
        elif number == 2:
            outputs.append(_text(buf, v))
        elif number == 3:
            name = _text(buf, v)
        elif number == 4:
            op_type = _text(buf, v)
        elif number == 5:
            key, value = _attribute(buf, *v)
            attributes[key] = value
        elif number == 7:
            domain = _text(buf, v)
    return Node(name, op_type, tuple(inputs), tuple(outputs), attributes, domain)


def _value_info(buf, start: int, end: int) -> ValueInfo:
    name, elem_type, shape = "", 0, []
    for number, _, v in _fields(buf, start, end):
        if number == 1:
            name = _text(buf, v)
        elif number == 2:
            for tn, _, tv in _fields(buf, *v):
                if tn != 1:  # tensor_type only
                    continue
                for fn, _, fv in _fields(buf, *tv):
                    if fn == 1:
                        elem_type = fv
                    elif fn == 2:
                        for dn, _, dv in _fields(buf, *fv):
                            if dn != 1:
                                continue
                            dim: int | str = "?"
                            for kn, _, kv in _fields(buf, *dv):
                                if kn == 1:
                                    dim = _signed(kv)
                                elif kn == 2:
                                    dim = _text(buf, kv)
                            shape.append(dim)
    return ValueInfo(name, elem_type, tuple(shape))


def _graph(buf, start: int, end: int, opsets: dict[str, int]) -> Graph:
    nodes, initializers, inputs, outputs, name = [], {}, [], [], ""
    for number, _, v in _fields(buf, start, end):
        if number == 1:
            nodes.append(_node(buf, *v))
        elif number == 2:
            name = _text(buf, v)
        elif number == 5:
            key, tensor = _tensor(buf, *v)
            initializers[key] = tensor
        elif number == 11:
            inputs.append(_value_info(buf, *v))
        elif number == 12:
            outputs.append(_value_info(buf, *v))
    return Graph(nodes, initializers, inputs, outputs, opsets, name)


def read_graph(path: str | os.PathLike) -> Graph:
    """The main graph of the ONNX model at `path`, its weights as torch tensors (copies: the file is
    not kept open). Raises OnnxFormatError on a file that is not an ONNX model."""
    path = Path(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise OnnxFormatError(f"{path}: empty file, not an ONNX model")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                return _model(buf, path)
            except (struct.error, UnicodeDecodeError, ValueError, IndexError) as e:
                if isinstance(e, OnnxFormatError):
                    raise OnnxFormatError(f"{path}: {e}") from None
                raise OnnxFormatError(f"{path}: not a readable ONNX model ({e})") from None


def _model(buf, path: Path) -> Graph:
    opsets: dict[str, int] = {}
    graph_span = None
    for number, _, v in _fields(buf):
        if number == 8:
            domain, version = "", 0
            for on, _, ov in _fields(buf, *v):
                if on == 1:
                    domain = _text(buf, ov)
                elif on == 2:
                    version = ov
            opsets[domain] = version
        elif number == 7:
            graph_span = v
    if graph_span is None:
        raise OnnxFormatError("no graph in the file")
    return _graph(buf, *graph_span, opsets)


# -- from a graph's nodes to a torch module's parameters ----------------------------------------------


def module_path(node_name: str) -> str:
    """The module a TorchScript-exported node belongs to, from its name: `/blocks.0/mlp/mlp.0/MatMul`
    -> `blocks.0.mlp.0` (the last part is the op; a called container's child repeats its name as
    a prefix, `mlp` then `mlp.0`, and counts once)."""
    parts: list[str] = []
    for part in node_name.strip("/").split("/")[:-1]:
        if parts and part.startswith(parts[-1] + "."):
            parts[-1] = part
        else:
            parts.append(part)
    return ".".join(parts)


_NORM_STATS = ("weight", "bias", "running_mean", "running_var")


def graph_state(graph: Graph, module: torch.nn.Module) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The weights of `graph` in `module`'s parameter and buffer names, found through the nodes' names:
    a node's module path (`module_path`) names one of `module`'s submodules, and its kind says which
    of the node's static inputs is which weight:

        Linear      MatMul: the weight, transposed (the exporter stores it as `(in, out)`);
                    Gemm: the weight (`transB` set) or its transpose; Add: the bias
        Conv1d/2d   Conv: weight, and bias when the node has one
        LayerNorm   LayerNormalization: scale, bias; decomposed (opset < 17): the Mul's operand is the
                    weight, the Add whose operand has more than one value the bias
        BatchNorm   BatchNormalization: scale, bias, mean, variance

    Returns (state, unclaimed): the weights found, and the names of weight-carrying nodes (Conv,
    MatMul, Gemm, LayerNormalization, BatchNormalization with a static weight) that name no submodule
    of `module` or carry what their submodule lacks."""
    modules = dict(module.named_modules())
    state: dict[str, torch.Tensor] = {}
    unclaimed: list[str] = []
    for node in graph.nodes:
        weights = graph.node_weights(node)
        if not any(w is not None for w in weights):
            continue
        path = module_path(node.name)
        target = modules.get(path)
        found = _node_state(node, weights, target)
        if found is None:
            if node.op_type in ("Conv", "MatMul", "Gemm", "LayerNormalization", "BatchNormalization"):
                unclaimed.append(node.name)
            continue
        prefix = f"{path}." if path else ""
        for key, value in found.items():
            state[prefix + key] = value
    return state, unclaimed


def _first(weights: list[torch.Tensor | None], *, many: bool = False) -> torch.Tensor | None:
    for w in weights:
        if w is not None and (not many or w.numel() > 1):
            return w
    return None


def _node_state(node: Node, weights: list[torch.Tensor | None], target: torch.nn.Module | None) -> dict[str, torch.Tensor] | None:
    op = node.op_type
    if isinstance(target, torch.nn.Linear):
        if op == "MatMul" and weights[1] is not None:
            return {"weight": weights[1].t()}
        if op == "Gemm" and weights[1] is not None:
            w = weights[1] if node.attributes.get("transB", 0) else weights[1].t()
            out = {"weight": w}
            if len(weights) > 2 and weights[2] is not None:
                out["bias"] = weights[2]
            return out
        if op == "Add" and (bias := _first(weights)) is not None:
            return {"bias": bias}
    elif isinstance(target, torch.nn.modules.conv._ConvNd) and op == "Conv":
        out = {"weight": weights[1]}
        if len(weights) > 2 and weights[2] is not None:
            out["bias"] = weights[2]
        return out
    elif isinstance(target, torch.nn.LayerNorm):
        if op == "LayerNormalization":
            out = {"weight": weights[1]}
            if len(weights) > 2 and weights[2] is not None:
                out["bias"] = weights[2]
            return out
        if op == "Mul" and (w := _first(weights, many=True)) is not None:
            return {"weight": w}
        if op == "Add" and (b := _first(weights, many=True)) is not None:
            return {"bias": b}
        if op in ("Add", "Mul", "Div", "Pow", "Sqrt", "ReduceMean", "Sub"):
            return {}  # the decomposition's own constants (eps, the exponent 2)
    elif isinstance(target, torch.nn.modules.batchnorm._BatchNorm) and op == "BatchNormalization":
        return dict(zip(_NORM_STATS, weights[1:5], strict=True))
    return None
