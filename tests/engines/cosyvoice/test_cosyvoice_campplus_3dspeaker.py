"""koe's CAM++ against 3D-Speaker's own PyTorch CAMPPlus (as the modelscope package ships it, in the
CosyVoice oracle venv), the model campplus.onnx was exported from: at the released size, koe's
weights load into it strictly (the same module names) and the embeddings are bit-equal, with the
batch norms unfolded and the segment pooling as torch computes it (the module as 3D-Speaker wrote
it; loaded from a graph koe computes what the graph computes instead: test_cosyvoice_campplus.py)."""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.cosyvoice.fixtures_onnx import random_campplus

pytestmark = pytest.mark.oracle

FRAMES = (50, 200, 317, 1234)  # under one segment, whole segments, partial ones


def test_bit_equal_with_3dspeaker_campplus(tmp_path):
    model = random_campplus("real", seed=4)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "weights.safetensors"))
    g = torch.Generator().manual_seed(0)
    feats = {f"fbank_{i}": torch.randn(1, frames, 80, generator=g) for i, frames in enumerate(FRAMES)}
    save_file(feats, str(tmp_path / "feats.safetensors"))
    job = {"weights": str(tmp_path / "weights.safetensors"), "feats": str(tmp_path / "feats.safetensors")}
    tensors, info = run_oracle("onnx_campplus_3dspeaker", job, tmp_path / "work", family="cosyvoice")
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    with torch.inference_mode():
        for i, frames in enumerate(FRAMES):
            got = model(feats[f"fbank_{i}"])
            assert got.shape == (1, 192) and same(got, tensors[f"embedding_{i}"]), frames
