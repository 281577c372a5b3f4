"""F5-TTS precision modes: float32 is the default (exact); bf16 is opt-in and named in the metadata."""

from __future__ import annotations

import numpy as np
import pytest

import koe
from koe.engines.f5_tts.fixtures import write_random_model


def _clip(seconds: float = 3.0, sr: int = 24000):
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32), sr


def test_bf16_is_opt_in_and_named(tmp_path):
    folder = write_random_model(tmp_path / "m", "F5TTS_v1_Base")
    exact = koe.load(folder, device="cpu")
    fast = koe.load(folder, device="cpu", precision="bf16")
    voice = exact.prepare_voice(_clip(), ref_text="A reference clip for the test.")
    a = exact.generate("Hello world, this is a test.", voice=voice, seed=1, nfe_step=8)
    b = fast.generate("Hello world, this is a test.", voice=voice, seed=1, nfe_step=8)
    assert a.metadata["precision"] == "float32" and b.metadata["precision"] == "bfloat16"
    assert a.audio.shape == b.audio.shape and np.isfinite(b.audio).all() and not np.array_equal(a.audio, b.audio)
    assert koe.load(folder, device="cpu", dtype="float16").precision == "float16"


@pytest.mark.parametrize("kw", [{"precision": "int8"}, {"dtype": "float64"}])
def test_other_precisions_are_clear_errors(tmp_path, kw):
    folder = write_random_model(tmp_path / "m", "F5TTS_v1_Base")
    with pytest.raises(ValueError, match="not offered for F5-TTS"):
        koe.load(folder, device="cpu", **kw)
