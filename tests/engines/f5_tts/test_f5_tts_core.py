"""The F5-TTS core pieces alone against upstream f5-tts==1.1.22: `CFM.sample` on a given mel and
token list (DiT + Euler + sway + CFG), and Vocos decoding a given mel, bit for bit."""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.f5_tts.fixtures import write_random_model
from koe.engines.f5_tts.sampler import PRUNED_STEPS, FlowSettings, sample_mel, time_grid
from koe.engines.registry import load_engine

pytestmark = pytest.mark.oracle

TOKENS = list("Hello world. ") + [" ", "ni3", " ", "hao3", " "] + list("Unknown: ") + ["zzz9"]
CASES = [
    # id, frames, nfe, cfg, sway, seed
    ("cfg-sway", 90, 8, 2.0, -1.0, 7),
    ("pruned16", 70, 16, 2.0, -1.0, 8),
    ("nocfg", 70, 6, 0.0, None, 9),
    ("short", 10, 7, 1.5, 0.5, 10),  # fewer frames than tokens: raised to tokens + 1
]


@pytest.fixture(scope="module", params=["F5TTS_v1_Base", "F5TTS_Base"])
def compared(request, tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp(request.param), request.param)
    g = torch.Generator().manual_seed(5)
    given = {"ref": torch.randn(1, 40, 100, generator=g), "mel": torch.randn(1, 100, 57, generator=g)}
    save_file(given, str(folder.parent / "given.safetensors"))
    cases = [
        dict(id=cid, kind="sample", ref_mel="ref", tokens=TOKENS, frames=frames, nfe_step=nfe, cfg_strength=cfg, sway_sampling_coef=sway, seed=seed)
        for cid, frames, nfe, cfg, sway, seed in CASES
    ] + [dict(id="vocos", kind="vocos", mel="mel")]
    tensors, _ = run_oracle(
        "generate", dict(model=str(folder), tensors=str(folder.parent / "given.safetensors"), cases=cases), tmp_path_factory.mktemp("oracle"), family="f5_tts"
    )
    engine = load_engine(folder, device="cpu")
    yield engine, given, tensors
    engine.close()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_sampled_mel_and_waveform_equal_upstream(compared, case):
    engine, given, tensors = compared
    cid, frames, nfe, cfg, sway, seed = case
    ids = torch.tensor([engine.vocab.ids(TOKENS)])
    mel = sample_mel(engine.model.transformer, given["ref"], ids, frames, FlowSettings(nfe, cfg, sway), generator=torch.Generator().manual_seed(seed))
    assert same(mel, tensors[f"{cid}.mel"])
    with torch.inference_mode():
        wave = engine.vocoder(mel[:, given["ref"].shape[1] :, :].permute(0, 2, 1))
    assert same(wave, tensors[f"{cid}.wav"])


def test_vocos_alone_equals_upstream(compared):
    engine, given, tensors = compared
    with torch.inference_mode():
        assert same(engine.vocoder(given["mel"]), tensors["vocos.wav"])


def test_time_grid():
    for n, table in PRUNED_STEPS.items():
        assert torch.equal(time_grid(n, None), torch.tensor(table, dtype=torch.float32) / 32)
    t = time_grid(9, -1.0)
    assert len(t) == 10 and t[0] == 0 and abs(float(t[-1]) - 1) < 1e-6 and bool((t[1:] > t[:-1]).all())
