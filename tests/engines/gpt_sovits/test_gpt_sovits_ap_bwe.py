"""v3's super-sampler (AP-BWE, 24 -> 48 kHz) against upstream's, bit for bit.

The golden (goldens/ap_bwe.npz, tests/oracle_gpt_sovits/golden_ap_bwe.py) is upstream's `AP_BWE`
(tools/audio_sr.py over its vendored AP-BWE, as `TTS.init_sr_model` builds it) on koe's random
release folder at tiny widths (golden_ap_bwe.py): its 48 kHz samples of a fixed 24 kHz input, and
`TTS.audio_postprocess(super_sampling=True)` on fixed fragments (joined with their silences, then
super-sampled, then normalised where they peak over 1), and without the model (upstream goes on at
24 kHz). koe reads the folder with its own reader (weights_only) and runs its own modules.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sovits_goldens import array_sha256, check_state, fixtures, inputs

from koe.engines.gpt_sovits import ap_bwe
from koe.engines.gpt_sovits.ap_bwe import APBWEConfig, load_ap_bwe
from koe.engines.gpt_sovits.fixtures_ap_bwe import TINY, write_ap_bwe
from koe.engines.gpt_sovits.synthesis import postprocess, to_int16
from koe.runtime.weights import WeightsError

G = inputs("ap_bwe")
golden, folder = fixtures("ap_bwe")


@pytest.fixture(scope="module")
def model(folder):
    return load_ap_bwe(folder / G.FOLDER)


def joined(folder, name: str) -> np.ndarray:
    """The case's fragments as `audio_postprocess` joins them (koe's `postprocess`, float32)."""
    fragments, interval = G.fragments(folder, name)
    return postprocess([fragments], None, interval).numpy()


def test_fixture_is_the_goldens(golden):
    check_state(golden, G.state())


def test_super_sampling_equals_upstream(golden, folder, model):
    audio = torch.from_numpy(np.load(folder / "inputs.npz")["input"]).unsqueeze(0)
    wide, rate = model.super_sample(audio, G.RATE)
    assert rate == int(golden["sr"]) == 48000
    assert np.array_equal(wide.squeeze().numpy(), golden["output"])


@pytest.mark.parametrize("name", list(G.CASES))
def test_postprocess_equals_upstreams(name, golden, folder, model):
    """The joined fragments super-sampled, normalised where they peak over 1 (`loud`), as int16."""
    audio, rate = ap_bwe.postprocess(model, joined(folder, name), G.RATE)
    pcm = to_int16(audio)
    assert rate == int(golden[f"{name}.sr"]) and len(pcm) == int(golden[f"{name}.length"])
    np.testing.assert_array_equal(pcm[:32], golden[f"{name}.head"])
    np.testing.assert_array_equal(pcm[-32:], golden[f"{name}.tail"])
    assert array_sha256(pcm) == str(golden[f"{name}.int16"])


def test_without_the_model_upstream_goes_on_at_24_khz(golden, folder):
    assert int(golden["missing.sr"]) == G.RATE
    assert array_sha256(to_int16(joined(folder, "two"))) == str(golden["missing.int16"])


def test_config_reads_the_release_json(folder):
    data = json.loads((folder / G.FOLDER / ap_bwe.CONFIG).read_text())
    assert APBWEConfig.from_json(data) == TINY and "learning_rate" in data
    assert APBWEConfig.from_json({**data, "ConvNeXt_channels": 512, "ConvNeXt_layers": 8}) == APBWEConfig()  # the release's
    with pytest.raises(ValueError, match="AP-BWE config"):
        APBWEConfig.from_json({k: v for k, v in data.items() if k != "n_fft"})


def test_bad_folders_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no AP-BWE config.json"):
        load_ap_bwe(tmp_path)
    write_ap_bwe(tmp_path / "other", APBWEConfig(channels=8, layers=1))
    (tmp_path / "other" / ap_bwe.CONFIG).write_text(json.dumps(TINY.to_json()))
    with pytest.raises(WeightsError, match="does not match its config.json: .*misshapen"):
        load_ap_bwe(tmp_path / "other")
    torch.save({"g": {}}, tmp_path / "other" / ap_bwe.CHECKPOINT)
    with pytest.raises(WeightsError, match="no 'generator' state"):
        load_ap_bwe(tmp_path / "other")
