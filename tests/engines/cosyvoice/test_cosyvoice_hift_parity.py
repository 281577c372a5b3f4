"""CosyVoice's HiFT vocoders against upstream's (`HiFTGenerator` / `CausalHiFTGenerator`
`.inference`, CosyVoice@ace7c47 in its own venv), bit for bit on the CPU in float32 at one thread.

Upstream builds the vocoder from the yaml as CosyVoice2/3 do (after the flow, so v3's source
tables are drawn from the generator state the flow's build leaves) and loads the fixture's
`hift.pt` strictly; v2's calls run after `torch.manual_seed(seed)`, koe's with a generator seeded
alike; v3 draws nothing at inference. Cases: short and longer mels, and v3's streamed call
(`finalize=False`).
"""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.cosyvoice.fixtures_flow import hift_config, write_hift, yaml_sections
from koe.engines.cosyvoice.hift import hift_tables, load_hift, v3_draws_before_source

pytestmark = pytest.mark.oracle

MEL_FRAMES = (12, 40, 57)
CALLS = {
    2: [{"mel": 0, "seed": 1}, {"mel": 1, "seed": 7}, {"mel": 2, "seed": 0}],
    3: [{"mel": 0}, {"mel": 1}, {"mel": 2}, {"mel": 1, "finalize": False}, {"mel": 2, "finalize": False}],
}


@pytest.fixture(scope="module")
def mels(tmp_path_factory):
    g = torch.Generator().manual_seed(3)
    mels = {f"mel_{i}": torch.randn(1, 80, n, generator=g) * 2 - 4 for i, n in enumerate(MEL_FRAMES)}
    path = tmp_path_factory.mktemp("cosyvoice-mels") / "mels.safetensors"
    save_file(mels, str(path))
    return mels, path


@pytest.mark.parametrize("version", [2, 3])
def test_hift_inference_matches_upstream(version, mels, tmp_path):
    mel_tensors, mel_path = mels
    checkpoint = write_hift(tmp_path / "hift.pt", version)
    job = {"yaml": yaml_sections(version), "hift": str(checkpoint), "version": version, "mels": str(mel_path), "calls": CALLS[version]}
    upstream, info = run_oracle("hift_inference", job, tmp_path / "oracle", family="cosyvoice")
    assert info["keys"] == 328
    config = hift_config(version)
    tables = hift_tables(v3_draws_before_source(6561, 80, 192, 80, config)) if version == 3 else None
    model = load_hift(torch.load(checkpoint, weights_only=True), config, tables)
    for k, call in enumerate(CALLS[version]):
        generator = torch.Generator().manual_seed(call.get("seed", 0))
        audio, source = model.inference(mel_tensors[f"mel_{call['mel']}"], finalize=call.get("finalize", True), generator=generator)
        assert same(source, upstream[f"source_{k}"]), f"call {k}: source"
        assert same(audio, upstream[f"audio_{k}"]), f"call {k}: audio"
