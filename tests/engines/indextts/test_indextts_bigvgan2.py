"""IndexTTS 2's vocoder (BigVGAN v2, 22.05 kHz) against upstream's, bit for bit.

The golden (goldens/bigvgan2.npz) is upstream's `BigVGAN.from_pretrained` on released-style folders
(config.json + bigvgan_generator.pt, koe's seeded weights at tiny widths: golden_bigvgan2.py), weight
norm removed, called as `infer` calls it (tests/oracle_indextts/golden_bigvgan2.py). koe loads the
same folders with `load_bigvgan2` and must give the same waveform and PCM-scale samples.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from goldens import check_state, inputs, load_golden, written
from koe_indextts.bigvgan import kaiser_sinc_filter
from koe_indextts.bigvgan2 import BigVGAN2, BigVGAN2Config, load_bigvgan2, to_pcm_scale

G = inputs("bigvgan2")
CASES = list(G.CONFIGS)


@pytest.fixture(scope="module")
def golden():
    return load_golden("bigvgan2")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return written("bigvgan2")


@pytest.fixture(scope="module")
def vocoders(folder):
    """case -> koe's vocoder, loaded from the folder upstream loaded."""
    return {case: load_bigvgan2(folder / case) for case in CASES}


@pytest.mark.parametrize("case", CASES)
def test_fixture_is_the_goldens(golden, case):
    check_state(golden, G.case_state(case), name=case)


@pytest.mark.parametrize("case", CASES)
def test_filters_are_upstreams(golden, case):
    up, down = golden[f"{case}.upsample_filter"], golden[f"{case}.downsample_filter"]
    assert np.array_equal(kaiser_sinc_filter(0.25, 0.3, 12).numpy(), up)
    for key, value in BigVGAN2(G.config(case)).state_dict().items():
        if key.endswith("upsample.filter"):
            assert np.array_equal(value.numpy(), up), key
        elif key.endswith("lowpass.filter"):
            assert np.array_equal(value.numpy(), down), key


@pytest.mark.parametrize("case", CASES)
def test_vocoder_equals_upstream(golden, folder, vocoders, case):
    model = vocoders[case]
    mel = torch.from_numpy(np.load(folder / case / "mel.npy"))
    with torch.no_grad():
        wav = model(mel)
    want = golden[f"{case}.wav"]
    assert wav.dtype == torch.float32 and wav.shape == want.shape == (mel.shape[0], 1, mel.shape[2] * model.config.hop_length)
    assert np.array_equal(wav.numpy(), want)
    assert np.array_equal(to_pcm_scale(wav.squeeze(1)).numpy(), golden[f"{case}.pcm"])
    assert 0.1 < float(wav.std()) and float((wav.abs() > 0.999).float().mean()) < 0.01  # not saturated
    assert bool(golden[f"{case}.retried_folded"]) == (case == "folded")  # upstream took the path koe mirrors


def test_release_structure():
    config = G.config("release")
    assert config.hop_length == 256 and config.sampling_rate == 22050
    assert not config.use_tanh_at_final and not config.use_bias_at_final
    model = BigVGAN2(config)
    names = set(model.state_dict())
    assert "conv_post.bias" not in names and "conv_post.weight_g" in names and "ups.5.0.weight_v" in names
    assert len(model.resblocks) == 18 and "resblocks.17.activations.5.act.beta" in names
    defaults = G.config("defaults")
    assert defaults.use_tanh_at_final and defaults.use_bias_at_final and "conv_post.bias" in BigVGAN2(defaults).state_dict()


def test_loading_is_strict(folder):
    config = G.config("defaults")
    state = G.case_state("defaults")
    load_bigvgan2({"generator": state}, config)
    load_bigvgan2(folder / "defaults" / "bigvgan_generator.pt", config)
    with pytest.raises(ValueError, match="needs its config"):
        load_bigvgan2(state)
    with pytest.raises(RuntimeError, match="Missing key"):
        load_bigvgan2({k: v for k, v in state.items() if k != "conv_post.bias"}, config)
    with pytest.raises(RuntimeError, match="Unexpected key"):
        load_bigvgan2({**state, "extra": torch.zeros(1)}, config)
    with pytest.raises(RuntimeError, match="size mismatch"):
        load_bigvgan2(state, BigVGAN2Config.from_dict({**G.CONFIGS["defaults"], "num_mels": 21}))
    with pytest.raises(RuntimeError, match="Unexpected key.*conv_post.bias"):
        load_bigvgan2(state, BigVGAN2Config.from_dict({**G.CONFIGS["defaults"], "use_bias_at_final": False}))


def test_weight_norm_is_folded(vocoders):
    for model in vocoders.values():
        names = set(model.state_dict())
        assert "conv_pre.weight" in names and not any(n.endswith(("weight_g", "weight_v")) for n in names)
        assert not model.training


def test_bad_mel_is_refused(vocoders):
    with pytest.raises(ValueError, match="batch, 20, frames"):
        vocoders["defaults"](torch.zeros(1, 21, 5))
    with pytest.raises(ValueError, match="batch, 20, frames"):
        vocoders["defaults"](torch.zeros(20, 5))


def test_config_checks(tmp_path):
    data = G.CONFIGS["release"]
    (tmp_path / "config.json").write_text(json.dumps(data))
    assert BigVGAN2Config.from_file(tmp_path) == BigVGAN2Config.from_dict(data)
    with pytest.raises(ValueError, match="missing num_mels"):
        BigVGAN2Config.from_dict({k: v for k, v in data.items() if k != "num_mels"})
    with pytest.raises(ValueError, match="resblock '2' is not supported"):
        BigVGAN2Config.from_dict({**data, "resblock": "2"})
    with pytest.raises(ValueError, match="activation"):
        BigVGAN2Config.from_dict({**data, "activation": "relu"})
    with pytest.raises(ValueError, match="three dilations"):
        BigVGAN2Config.from_dict({**data, "resblock_dilation_sizes": [[1, 3], [1, 3], [1, 3]]})
    with pytest.raises(ValueError, match="one entry per stage"):
        BigVGAN2Config.from_dict({**data, "upsample_kernel_sizes": [8]})
    with pytest.raises(ValueError, match="halve at every stage"):
        BigVGAN2Config.from_dict({**data, "upsample_initial_channel": 96})
    with pytest.raises(ValueError, match="use_tanh_at_final must be true or false"):
        BigVGAN2Config.from_dict({**data, "use_tanh_at_final": "no"})
