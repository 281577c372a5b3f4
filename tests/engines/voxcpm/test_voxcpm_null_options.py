"""VoxCPM's `retry_badcase=None` is no retries (upstream tests the flag's truth; its default is True),
told from "not given" through the schema, `koe.load(...).generate` and the drop-in `VoxCPM.generate`.
The parity case against upstream itself is in test_voxcpm_parity.py (seed 14)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import koe
from koe.compat.voxcpm import VoxCPM
from koe.engines.voxcpm.fixtures import write_random_model
from koe.engines.voxcpm.spec import options_schema

BAD = {"retry_badcase_ratio_threshold": 0.8, "retry_badcase_max_times": 3}  # every run is a "bad case" on random weights


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("voxcpm-null"), "VoxCPM2")


def test_the_schema_keeps_retry_badcase_none():
    schema = options_schema()
    assert schema.validate({"retry_badcase": None}) == {"retry_badcase": None}
    assert schema.validate({"max_len": None, "normalize": None}) == {}  # None is upstream's default (or an error) there: "not given"
    described = {o["name"]: o for o in schema.describe()}
    assert described["retry_badcase"]["default"] is True and "no retries" in described["retry_badcase"]["null"]


def test_python_api_none_is_no_retries(folder):
    engine = koe.load(folder, device="cpu")
    assert not engine.engine.settings({"retry_badcase": None}).retry_badcase and engine.engine.settings({}).retry_badcase is True
    none = engine.generate("Hello.", seed=8, retry_badcase=None, **BAD)
    off = engine.generate("Hello.", seed=8, retry_badcase=False, **BAD)
    default = engine.generate("Hello.", seed=8, **BAD)
    assert none.metadata["segments"][0]["runs"] == off.metadata["segments"][0]["runs"] == 1
    assert default.metadata["segments"][0]["runs"] == 3
    np.testing.assert_array_equal(none.audio, off.audio)
    engine.close()


def test_the_drop_in_passes_none_as_upstream(folder):
    m = VoxCPM(str(folder), zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")
    got = {}
    for name, flag in (("none", None), ("off", False)):
        torch.manual_seed(8)
        got[name] = m.generate("Hello.", retry_badcase=flag, **BAD)
    np.testing.assert_array_equal(got["none"], got["off"])
