"""CosyVoice's flow models against upstream's `flow.inference` (CosyVoice@ace7c47 in its own
venv), bit for bit on the CPU in float32 at one thread: v2 (upsampling conformer + causal U-Net)
and v3 (DiT), each built by upstream from the yaml's flow section and loading the fixture's
`flow.pt` strictly.

Cases: with and without a prompt, offline and chunk-causal (`streaming=True`) attention, and a
streamed chunk (`finalize=False`: the last 3 tokens are look-ahead). The flow draws nothing: its
start noise is the table upstream draws at build after reseeding with 0.
"""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.cosyvoice.fixtures_flow import flow_config, write_flow, yaml_sections
from koe.engines.cosyvoice.flow import load_flow

pytestmark = pytest.mark.oracle

SIZES = [(20, 8), (60, 30), (31, 0)]  # (new tokens, prompt tokens)
CASES = [
    {"input": 0},
    {"input": 1, "streaming": True},
    {"input": 1, "streaming": True, "finalize": False},
    {"input": 2},
    {"input": 0, "finalize": False},
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    g = torch.Generator().manual_seed(3)
    tensors = {}
    for i, (n, p) in enumerate(SIZES):
        tensors[f"token_{i}"] = torch.randint(0, 6561, (1, n), generator=g)
        tensors[f"prompt_token_{i}"] = torch.randint(0, 6561, (1, p), generator=g)
        tensors[f"prompt_feat_{i}"] = torch.randn(1, 2 * p, 80, generator=g) * 2 - 4
        tensors[f"embedding_{i}"] = torch.randn(1, 192, generator=g)
    path = tmp_path_factory.mktemp("cosyvoice-flow-in") / "inputs.safetensors"
    save_file(tensors, str(path))
    return tensors, path


@pytest.mark.parametrize("version", [2, 3])
def test_flow_inference_matches_upstream(version, inputs, tmp_path):
    tensors, path = inputs
    checkpoint = write_flow(tmp_path / "flow.pt", version)
    job = {"yaml": yaml_sections(version), "flow": str(checkpoint), "inputs": str(path), "cases": CASES}
    upstream, _ = run_oracle("flow_inference", job, tmp_path / "oracle", family="cosyvoice")
    model = load_flow(torch.load(checkpoint, weights_only=True), flow_config(version))
    for k, case in enumerate(CASES):
        i = case["input"]
        mel = model.inference(
            tensors[f"token_{i}"],
            tensors[f"prompt_token_{i}"],
            tensors[f"prompt_feat_{i}"],
            tensors[f"embedding_{i}"],
            streaming=case.get("streaming", False),
            finalize=case.get("finalize", True),
        )
        assert same(mel, upstream[f"mel_{k}"]), f"case {k} ({case})"
