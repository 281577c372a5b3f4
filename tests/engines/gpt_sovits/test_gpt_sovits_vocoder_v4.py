"""v4's vocoder (mel -> 48 kHz waveform, upstream's HiFi-GAN `Generator` as `TTS.init_vocoder("v4")`
builds it) against upstream's, bit for bit.

The golden (goldens/vocoder_v4.npz) is upstream's `Generator` at koe's small sizes (v4's odd
upsampling kernels kept), weight norm removed, `vocoder.pth` loaded strictly (golden_vocoder_v4.py),
on a short and a longer mel. koe reads the same file with its own reader.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sovits_goldens import check_state, fixtures, inputs

from koe.engines.gpt_sovits.fixtures_v3 import random_vocoder_state
from koe.engines.gpt_sovits.vocoder_v4 import VocoderConfig, VocoderV4, load_vocoder_v4
from koe.runtime.weights import WeightsError

G = inputs("vocoder_v4")
golden, folder = fixtures("vocoder_v4")


@pytest.fixture(scope="module")
def vocoder(folder):
    return load_vocoder_v4(folder / "vocoder.pth", G.CONFIG)


def test_fixture_is_the_goldens(golden):
    check_state(golden, random_vocoder_state(G.CONFIG, G.SEED))


@pytest.mark.parametrize("mel", list(G.MELS))
def test_vocoder_equals_upstream(golden, folder, vocoder, mel):
    with torch.inference_mode():
        audio = vocoder(torch.from_numpy(np.load(folder / "inputs.npz")[f"mel.{mel}"]))
    assert audio.shape[-1] == G.MELS[mel] * 120
    assert np.array_equal(audio.numpy(), golden[f"{mel}.audio"])


def test_another_architecture_is_refused(folder, tmp_path):
    with pytest.raises(WeightsError, match="does not match v4's vocoder"):
        load_vocoder_v4(folder / "vocoder.pth")  # the released sizes, not the file's
    (tmp_path / "bad.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsError, match="not a readable"):
        load_vocoder_v4(tmp_path / "bad.pth")


def test_released_size():
    with torch.device("meta"):
        model = VocoderV4()
    assert model.sample_rate == 48000 and VocoderConfig().upsample_rates == (10, 6, 2, 2, 2)
    assert 10_000_000 < sum(p.numel() for p in model.parameters()) < 20_000_000
