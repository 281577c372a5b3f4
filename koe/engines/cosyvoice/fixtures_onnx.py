"""Random-weight stand-ins for CosyVoice's ONNX parts, written as ONNX graphs in the released
graphs' structure: `campplus.onnx`, `speech_tokenizer_v2.onnx`, `speech_tokenizer_v3.onnx`.

Each is koe's own module (`campplus.CAMPPlus`, `speech_tokenizer.S3Tokenizer`) with random weights,
deterministic from a seed, exported by torch's TorchScript ONNX exporter (`torch.onnx.export(...,
dynamo=False)`, which needs the `onnx` package: koe's dev extra has it) in eval mode with constant
folding, as the releases were exported. That exporter names nodes by module path
(`/blocks.0/attn/query/MatMul`), keeps parameter names for initializers it does not rewrite
(`blocks.0.attn.fsmn_block.weight`, `quantizer.project_in.bias`) and gives rewritten ones anonymous
names (`onnx::MatMul_N` for transposed Linear weights, `onnx::Conv_N` for convs with a batch norm
folded in); koe's loader reads weights by node names, never by initializer names.

What is known of the releases (the files cannot be fetched here; how sure we are):
* Inputs and outputs, as upstream's frontend feeds them and ports of the releases name them (sure):
  the tokenizer `feats` (1, 128, T) float32 and `feats_length` (1,) int32 -> `indices` (1, ceil(T / 4));
  CAM++ `input` (1, frames, 80) float32 -> `output` (1, 192) float32. The index dtype is not
  known (upstream flattens it to Python ints); these write int32.
* The tokenizers' node names (sure: the `s3tokenizer` package maps the released v2 and v3 files by
  them): `/conv1/Conv`, `/conv2/Conv`, `/blocks.N/attn/{query,key,value,out}/{MatMul,Add}`,
  `/blocks.N/attn/fsmn_block/Conv`, `/blocks.N/{attn_ln,mlp_ln}/...`, `/blocks.N/mlp/mlp.{0,2}/...`,
  `/quantizer/project_in/...`; v2's layer norms are `LayerNormalization` nodes (opset 17 or later),
  v3's decomposed (`.../attn_ln/Mul`, `.../Add_1`: an older opset). These export v2 at opset 17, v3
  at opset 14. Released sizes: width 1280, 20 heads of 64, 6 (v2) / 12 (v3) blocks. Written at
  those sizes these graphs are 496,043,754 (v2) and 969,376,700 (v3) bytes, the releases
  496,082,973 and 969,451,503 (0.01 % apart); the released v2 keeps its conv weights under
  anonymous names (`onnx::Conv_2216`...: casts folded away), these under `conv1.weight`...
* CAM++'s names (very likely: what public ports of the released file report of it matches):
  3D-Speaker's module tree (`head.*`, `xvector.tdnn`, `xvector.blockN.tdnndK.*`, `xvector.transitN`,
  `xvector.dense`) exported in eval mode, so the batch norms right after a conv are folded into it
  (anonymous `onnx::Conv_N` weights), the others kept under their names: 56 BatchNormalization
  nodes, the last (`xvector.dense.nonlinear.batchnorm`, affine-free) with Constant scale and shift;
  node names such as `/head/Relu_1`, `/xvector/block1/tdnnd1/cam_layer/Slice`, `.../Mul_1`;
  segment pooling as AveragePool (kernel and stride 100, ceil_mode). Written at the released
  size this graph is 28,280,812 bytes, the released `campplus.onnx` 28,303,423 (0.08 % apart:
  names and constants). koe's loader also takes unfolded norms.

Sizes: "tiny" (fast tests: the tokenizer 128 wide with 2 / 3 blocks; CAM++ with narrow channels and
2-3 layers per block) and "real" (the released sizes).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch
from torch import nn

from koe.engines.cosyvoice.campplus import CAMPPlus, CampPlusConfig
from koe.engines.cosyvoice.speech_tokenizer import S3Tokenizer

__all__ = [
    "CAMPPLUS_SIZES",
    "SIZES",
    "TOKENIZER_SIZES",
    "random_campplus",
    "random_speech_tokenizer",
    "write_campplus",
    "write_onnx_parts",
    "write_speech_tokenizer",
]

SIZES = ("tiny", "real")
TOKENIZER_SIZES = {  # (width, blocks) per size and version
    "tiny": {2: (128, 2), 3: (128, 3)},
    "real": {2: (1280, 6), 3: (1280, 12)},
}
TOKENIZER_OPSETS = {2: 17, 3: 14}  # v2 keeps LayerNormalization nodes, v3's are decomposed
CAMPPLUS_SIZES = {
    "tiny": CampPlusConfig(m_channels=8, init_channels=32, growth_rate=8, bn_channels=16, block_layers=(2, 3, 2)),
    "real": CampPlusConfig(),
}
CAMPPLUS_OPSET = 13


def _fill(model: nn.Module, seed: int, gains: dict[str, float] | None = None) -> nn.Module:
    """Random weights in place, deterministic from `seed` (parameter order): matrices and kernels
    ~ N(0, 1/fan_in) (times a per-name gain), norm scales ~ 1 ± 0.1, shifts and biases ~ N(0, 0.1²),
    batch-norm statistics (mean ~ N(0, 0.1²), variance in [0.5, 1.5))."""
    g = torch.Generator().manual_seed(seed)
    gains = gains or {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) * gains.get(name, 1.0) / fan_in**0.5)
            elif name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.running_mean.copy_(0.1 * torch.randn(module.running_mean.shape, generator=g))
                module.running_var.copy_(0.5 + torch.rand(module.running_var.shape, generator=g))
    return model.eval()


def random_speech_tokenizer(version: int = 2, size: str = "tiny", seed: int = 0) -> S3Tokenizer:
    """An S3 tokenizer of `version` (2 or 3) at `size` with random weights; the quantizer's input
    projection is drawn 3x wider so the ids spread over the codebook."""
    width, blocks = TOKENIZER_SIZES[size][version]
    return _fill(S3Tokenizer(width=width, layers=blocks), seed, {"quantizer.project_in.weight": 3.0})


def random_campplus(size: str = "tiny", seed: int = 0) -> CAMPPlus:
    """CAM++ at `size` with random weights."""
    return _fill(CAMPPlus(CAMPPLUS_SIZES[size]), seed)


def _export(model: nn.Module, example: tuple, path: Path, opset: int, inputs: list[str], outputs: list[str], axes: dict) -> Path:
    try:
        import onnx  # noqa: F401  (torch's TorchScript exporter needs it)
    except ImportError as e:
        raise RuntimeError("writing ONNX fixtures needs the `onnx` package (koe's dev extra: pip install -e '.[dev]')") from e
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation notice and tracer warnings
        torch.onnx.export(
            model,
            example,
            str(path),
            dynamo=False,
            export_params=True,
            do_constant_folding=True,
            opset_version=opset,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
        )
    return path


def write_speech_tokenizer(path: str | os.PathLike, version: int = 2, size: str = "tiny", seed: int = 0) -> Path:
    """`speech_tokenizer_v{version}.onnx` with random weights at `path`; returns the path."""
    if version not in (2, 3):
        raise ValueError(f"speech tokenizer version {version}: 2 or 3")
    model = random_speech_tokenizer(version, size, seed)
    example = (torch.zeros(1, 128, 64), torch.tensor([64], dtype=torch.int32))
    axes = {"feats": {0: "batch", 2: "frames"}, "feats_length": {0: "batch"}, "indices": {0: "batch", 1: "tokens"}}
    return _export(model, example, Path(path), TOKENIZER_OPSETS[version], ["feats", "feats_length"], ["indices"], axes)


def write_campplus(path: str | os.PathLike, size: str = "tiny", seed: int = 0) -> Path:
    """`campplus.onnx` with random weights at `path`; returns the path."""
    model = random_campplus(size, seed)
    example = (torch.zeros(1, 200, 80),)
    axes = {"input": {0: "batch", 1: "frames"}, "output": {0: "batch"}}
    return _export(model, example, Path(path), CAMPPLUS_OPSET, ["input"], ["output"], axes)


def write_onnx_parts(folder: str | os.PathLike, version: int, size: str = "tiny", seed: int = 0) -> dict[str, Path]:
    """A release folder's ONNX files for CosyVoice `version` (2 or 3): `campplus.onnx` and
    `speech_tokenizer_v{version}.onnx` (seeds `seed` and `seed + 1`); returns {file name: path}."""
    folder = Path(folder)
    tokenizer = f"speech_tokenizer_v{version}.onnx"
    return {
        "campplus.onnx": write_campplus(folder / "campplus.onnx", size, seed),
        tokenizer: write_speech_tokenizer(folder / tokenizer, version, size, seed + 1),
    }
