"""SoVITS v3/v4's flow matching (the DiT's velocity, Euler steps with the reference mel as prompt)
against upstream's, bit for bit.

The golden (goldens/cfm.npz) is upstream's `CFM.inference` over its own `DiT` built at koe's small
sizes (golden_cfm.py; upstream's DiT class takes any size, only `SynthesizerTrnV3` fixes the
released 1024 x 22), loaded from koe's seeded state, run right after `torch.manual_seed(seed)`
(tests/oracle_gpt_sovits/golden_cfm.py): one row and a batch of three, 1, 2, 4 and 7 steps, a
temperature, classifier-free guidance. koe draws its noise from a generator seeded the same.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sovits_goldens import check_state, fixtures, inputs

from koe.engines.gpt_sovits.cfm import CFM
from koe.engines.gpt_sovits.dit import DiT, DiTConfig
from koe.engines.gpt_sovits.fixtures_v3 import random_cfm_state

G = inputs("cfm")
golden, folder = fixtures("cfm")


@pytest.fixture(scope="module")
def cfm(folder):
    model = CFM(G.CONFIG)
    model.load_state_dict(torch.load(folder / "cfm.pt", weights_only=True), strict=True)
    return model.eval()


@pytest.fixture(scope="module")
def arrays(folder):
    return {k: torch.from_numpy(v) for k, v in np.load(folder / "inputs.npz").items()}


def test_fixture_is_the_goldens(golden):
    check_state(golden, random_cfm_state(G.CONFIG, G.SEED))


@pytest.mark.parametrize("case", list(G.CASES))
def test_inference_equals_upstream(golden, cfm, arrays, case):
    c = G.CASES[case]
    mel = cfm.inference(
        arrays[f"mu.{c['inputs']}"],
        arrays[f"prompt.{c['inputs']}"],
        c["n_timesteps"],
        temperature=c["temperature"],
        cfg_rate=c["cfg_rate"],
        generator=torch.Generator().manual_seed(c["seed"]),
    )
    assert np.array_equal(mel.numpy(), golden[f"{case}.mel"])


def test_prompt_frames_stay_zero(golden):
    mel = golden["batch.mel"]
    assert not mel[..., : G.INPUTS["batch"][2]].any() and np.abs(mel[..., G.INPUTS["batch"][2] :]).min() > 0


def test_bad_inputs_are_refused(cfm):
    with pytest.raises(ValueError, match="prompt mel"):
        cfm.inference(torch.zeros(1, 5, G.CONFIG.text_dim), torch.zeros(1, 3, 2), 1)
    with pytest.raises(ValueError, match="n_timesteps"):
        cfm.inference(torch.zeros(1, 5, G.CONFIG.text_dim), torch.zeros(1, G.CONFIG.mel_dim, 2), 0)


def test_released_dit_sizes():
    with torch.device("meta"):  # shapes only
        dit = DiT()
    assert dit.config == DiTConfig(1024, 22, 16, 64, 2, 100, 512, 4)
    assert sum(p.numel() for p in dit.parameters()) > 300_000_000
    with pytest.raises(ValueError, match="even"):
        DiTConfig(text_dim=33)
