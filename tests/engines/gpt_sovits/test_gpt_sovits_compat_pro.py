"""`koe.compat.gpt_sovits` on GPT-SoVITS v2Pro and v2ProPlus (one speaker-verification embedding per clip) against upstream's
`TTS(TTS_Config(...)).run(inputs)`, bit for bit: every case of the infer_pro golden (compat_goldens.py)."""

from __future__ import annotations

import pytest
from compat_goldens import DropIn, check_case
from sovits_goldens import fixtures_with, inputs

G = inputs("infer_pro")
golden, folder, drop_in = fixtures_with("infer_pro", DropIn)


@pytest.mark.parametrize("name", list(G.CASES))
def test_run_equals_upstream(name, golden, drop_in):
    check_case(drop_in, golden, name)
