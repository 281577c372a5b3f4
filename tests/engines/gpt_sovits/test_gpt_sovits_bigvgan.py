"""v3's vocoder (BigVGAN v2, mel -> 24 kHz waveform) against upstream's vendored BigVGAN, bit for bit.

The golden (goldens/bigvgan.npz) is upstream's `BigVGAN.from_pretrained` + `remove_weight_norm()`
(as `TTS.init_vocoder("v3")` loads it) on koe's small release folders (golden_bigvgan.py): the
release's branches (AMPBlock1, SnakeBeta on log scale, the final clamp, no conv_post bias) and the
others (AMPBlock2, Snake, tanh, a bias), on a short and a longer mel. koe reads the same folders
with its own reader (weight norm folded, filters as stored).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sovits_goldens import check_state, fixtures, inputs

from koe.engines.gpt_sovits.bigvgan import BigVGAN, BigVGANConfig, kaiser_sinc_filter, load_bigvgan
from koe.engines.gpt_sovits.fixtures_v3 import random_bigvgan_state
from koe.runtime.weights import WeightsError

G = inputs("bigvgan")
golden, folder = fixtures("bigvgan")


@pytest.fixture(scope="module")
def vocoders(folder):
    return {name: load_bigvgan(folder / name) for name in G.CONFIGS}


@pytest.mark.parametrize("name", list(G.CONFIGS))
def test_fixture_is_the_goldens(golden, name):
    i = list(G.CONFIGS).index(name)
    check_state(golden, random_bigvgan_state(G.CONFIGS[name], G.SEED + 10 * i), name=name)


@pytest.mark.parametrize("name", list(G.CONFIGS))
@pytest.mark.parametrize("mel", list(G.MELS))
def test_vocoder_equals_upstream(golden, folder, vocoders, name, mel):
    with torch.inference_mode():
        audio = vocoders[name](torch.from_numpy(np.load(folder / "inputs.npz")[f"mel.{mel}"]))
    assert audio.shape[-1] == G.MELS[mel] * 8
    assert np.array_equal(audio.numpy(), golden[f"{name}.{mel}.audio"])


def test_config_reads_the_release_json(folder):
    config = BigVGANConfig.from_json(json.loads((folder / "variant" / "config.json").read_text()))
    assert config == G.CONFIGS["variant"]
    assert BigVGANConfig.from_json({k: v for k, v in BigVGANConfig().to_json().items() if not k.startswith("use_")}).use_tanh_at_final  # upstream's default
    with pytest.raises(ValueError, match="activation"):
        BigVGANConfig(activation="relu")


def test_filters_are_upstreams(vocoders):
    # the stored filters were computed by koe's fixture; they equal a fresh computation and sum to 1
    f = vocoders["release"].activation_post.upsample.filter
    assert torch.equal(f, kaiser_sinc_filter(0.25, 0.3, 12)) and abs(float(f.sum()) - 1) < 1e-6


def test_a_checkpoint_of_another_shape_is_refused(folder, tmp_path):
    (tmp_path / "config.json").write_text((folder / "variant" / "config.json").read_text())
    (tmp_path / "bigvgan_generator.pt").write_bytes((folder / "release" / "bigvgan_generator.pt").read_bytes())
    with pytest.raises(WeightsError, match="does not match"):
        load_bigvgan(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_bigvgan(tmp_path / "absent")


def test_released_size():
    with torch.device("meta"):
        model = BigVGAN()
    assert model.config.hop_size == 256 and 100_000_000 < sum(p.numel() for p in model.parameters()) < 130_000_000
