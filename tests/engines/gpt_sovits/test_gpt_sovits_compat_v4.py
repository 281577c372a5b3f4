"""`koe.compat.gpt_sovits` on GPT-SoVITS v4 (a LoRA over a random pretrained model, the full-size vocoder; marked slow as the engine's v4 test) against upstream's
`TTS(TTS_Config(...)).run(inputs)`, bit for bit: every case of the infer_v4 golden (compat_goldens.py)."""

from __future__ import annotations

import pytest
from compat_goldens import DropIn, check_equals_golden
from sovits_goldens import fixtures, inputs

pytestmark = pytest.mark.slow

G = inputs("infer_v4")
golden, folder = fixtures("infer_v4")


@pytest.fixture(scope="module")
def drop_in(folder):
    return DropIn(folder)


@pytest.mark.parametrize("name", list(G.CASES))
def test_run_equals_upstream(name, golden, drop_in):
    check_equals_golden(drop_in.run(name), golden, name)
    model = G.CASES[name]["model"]
    assert drop_in.model(model).configs.version == str(golden[f"{model}.version"])
