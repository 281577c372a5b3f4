"""`koe.compat.gpt_sovits` on GPT-SoVITS v4 (a LoRA over a random pretrained model, the full-size vocoder; marked slow as the engine's v4 test) against upstream's
`TTS(TTS_Config(...)).run(inputs)`, bit for bit, on the infer_v4 golden (compat_goldens.py; which cases: DROP_IN_CASES)."""

from __future__ import annotations

import pytest
from compat_goldens import DropIn, check_case
from sovits_goldens import fixtures_with, inputs

pytestmark = pytest.mark.slow

G = inputs("infer_v4")
# Every case of the golden runs through koe's engine in test_gpt_sovits_engine_v4.py, and the drop-in's
# reading of every input through every case of v1, v2 and v2Pro (test_gpt_sovits_compat*.py); the
# drop-in runs the same synthesis, so here one case (speed, serial synthesis, several steps) checks its
# v4 path, not each case's DiT steps again.
DROP_IN_CASES = ("speed",)
golden, folder, drop_in = fixtures_with("infer_v4", DropIn)


@pytest.mark.parametrize("name", DROP_IN_CASES)
def test_run_equals_upstream(name, golden, drop_in):
    check_case(drop_in, golden, name)
