"""The flow and the vocoder of whole released folders (koe.engines.cosyvoice.token2wav.load_folder
on the folder's yaml as koe.engines.cosyvoice.config reads it) against upstream's
`AutoModel(model_dir=folder)`, bit for bit on the CPU in float32 at one thread.

This is the load path a user's folder takes: upstream builds the whole yaml (its LM first, from
CosyVoice-BlankEN), so v3's source tables are drawn from the state the real build leaves, which
koe replays from the folder's configs alone.
"""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.cosyvoice.config import read_config
from koe.engines.cosyvoice.fixtures import write_random_model
from koe.engines.cosyvoice.token2wav import load_folder

pytestmark = pytest.mark.oracle

CALLS = {
    "CosyVoice2-0.5B": [{"mel": 0, "seed": 1}, {"mel": 1, "seed": 2}],
    "Fun-CosyVoice3-0.5B-2512": [{"mel": 0}, {"mel": 1}, {"mel": 1, "finalize": False}],
}


@pytest.mark.parametrize("variant", list(CALLS))
def test_folder_flow_and_vocoder_match_upstream(variant, tmp_path):
    folder = write_random_model(tmp_path / "model", variant, "tiny", seed=3)
    g = torch.Generator().manual_seed(5)
    mels = {"mel_0": torch.randn(1, 80, 16, generator=g) * 2 - 5, "mel_1": torch.randn(1, 80, 45, generator=g) * 2 - 5}
    inputs = {
        "token": torch.randint(0, 6561, (1, 30), generator=g),
        "prompt_token": torch.randint(0, 6561, (1, 12), generator=g),
        "prompt_feat": torch.randn(1, 24, 80, generator=g) * 2 - 4,
        "embedding": torch.randn(1, 192, generator=g),
    }
    save_file(mels, str(tmp_path / "mels.safetensors"))
    save_file(inputs, str(tmp_path / "inputs.safetensors"))
    job = {"folder": str(folder), "mels": str(tmp_path / "mels.safetensors"), "inputs": str(tmp_path / "inputs.safetensors"), "calls": CALLS[variant]}
    upstream, _ = run_oracle("hift_folder", job, tmp_path / "oracle", family="cosyvoice")
    config, _ = read_config(folder)
    t2w = load_folder(folder, config)
    for k, call in enumerate(CALLS[variant]):
        generator = torch.Generator().manual_seed(call.get("seed", 0))
        audio, _ = t2w.hift.inference(mels[f"mel_{call['mel']}"], finalize=call.get("finalize", True), generator=generator)
        assert same(audio, upstream[f"audio_{k}"]), f"call {k} ({call})"
    mel = t2w.flow.inference(inputs["token"], inputs["prompt_token"], inputs["prompt_feat"], inputs["embedding"])
    assert same(mel, upstream["mel"])
