"""`koe.compat.gpt_sovits` on GPT-SoVITS v4 (a LoRA over a random pretrained model, the full-size vocoder; marked slow as the engine's v4 test) against upstream's
`TTS(TTS_Config(...)).run(inputs)`, bit for bit: every case of the infer_v4 golden (compat_goldens.py)."""

from __future__ import annotations

import pytest
from compat_goldens import DropIn, check_case
from sovits_goldens import fixtures_with, inputs

pytestmark = pytest.mark.slow

G = inputs("infer_v4")
golden, folder, drop_in = fixtures_with("infer_v4", DropIn)


@pytest.mark.parametrize("name", list(G.CASES))
def test_run_equals_upstream(name, golden, drop_in):
    check_case(drop_in, golden, name)
