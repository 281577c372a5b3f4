"""`koe.compat.gpt_sovits` on GPT-SoVITS v1 (its Chinese through upstream's v1 front end, no G2PW) against upstream's
`TTS(TTS_Config(...)).run(inputs)`, bit for bit: every case of the infer_v1 golden (compat_goldens.py)."""

from __future__ import annotations

import pytest
from compat_goldens import DropIn, check_case
from sovits_goldens import fixtures_with, inputs

G = inputs("infer_v1")
golden, folder, drop_in = fixtures_with("infer_v1", DropIn)


@pytest.mark.parametrize("name", list(G.CASES))
def test_run_equals_upstream(name, golden, drop_in):
    check_case(drop_in, golden, name)


def test_the_drop_in_runs_the_gpt_on_the_precision_layer(drop_in):
    """The engine the drop-in builds (`from_layout`, fp32): the GPT's blocks on koe's exact kernel where
    the CPU gives torch's bits there (else torch's products), and the result's metadata names it."""
    engine = drop_in.model("v1").engine
    meta = engine.result_metadata()
    assert meta["precision"] == "float32" and meta.get("kernel") == engine.models.t2s.kernel
    assert engine.models.t2s.kernel in (None, "koe-exact-fp32")
