"""SoVITS v3/v4's whole waveform path (codes -> decode_encp's features -> chunked CFM mel behind the
reference's mel -> vocoder) against upstream's `TTS.using_vocoder_synthesis`, bit for bit, at the
released DiT size, for a v3 file and a v4 LoRA merged over it.

The golden (goldens/sovits_v3.npz) is upstream's `TTS.init_vits_weights` (v3 by its b"02" header;
the v4 LoRA by b"04", through peft's merge) and `using_vocoder_synthesis` with small vocoders
(golden_sovits_v3.py), right after `torch.manual_seed(seed)`. Marked slow: the fixture is a
full-size random model (~330 M parameters, a 660 MB fp16 file written once per session) and the
DiT runs at that size (about a minute in all on one thread: the fixture ~30 s, each case ~10 s).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sovits_goldens import check_state, fixtures, inputs

from koe.engines.gpt_sovits.bigvgan import load_bigvgan
from koe.engines.gpt_sovits.fixtures_v3 import random_sovits_v3_state
from koe.engines.gpt_sovits.sovits_v3_weights import load_sovits_v3
from koe.engines.gpt_sovits.vocoder_synthesis import synthesize
from koe.engines.gpt_sovits.vocoder_v4 import load_vocoder_v4
from koe.runtime.weights import WeightsError

pytestmark = pytest.mark.slow

G = inputs("sovits_v3")
golden, folder = fixtures("sovits_v3")


@pytest.fixture(scope="module")
def arrays(folder):
    return {k: torch.from_numpy(v) for k, v in np.load(folder / "inputs.npz").items()}


def test_fixture_is_the_goldens(golden):
    check_state(golden, random_sovits_v3_state("v3", G.SEED))


@pytest.mark.parametrize("case", list(G.CASES))
def test_synthesis_equals_upstream(golden, folder, arrays, case):
    c = G.CASES[case]
    lora = c["model"].startswith("lora")
    model = load_sovits_v3(folder / c["model"], base=folder / "s2Gv3.pth" if lora else None)
    assert model.version == str(golden[f"{case}.version"])
    vocoder = load_bigvgan(folder / "bigvgan") if model.version == "v3" else load_vocoder_v4(folder / "vocoder.pth", G.VOCODER)
    a = arrays
    fea, _ = model.decode_encp(a["codes"], a["phones"], a["spec"], None, c["speed"])
    assert np.array_equal(fea.numpy(), golden[f"{case}.fea"])
    audio = synthesize(
        model, vocoder, a["codes"], a["phones"], a["prompt_codes"], a["prompt_phones"], a["spec"], a["ref_audio"], G.REF_RATE,
        speed=c["speed"], sample_steps=c["sample_steps"], generator=torch.Generator().manual_seed(c["seed"]),
    )  # fmt: skip
    assert np.array_equal(audio.numpy(), golden[f"{case}.audio"])


def test_a_lora_needs_its_base(folder):
    with pytest.raises(WeightsError, match="pretrained model"):
        load_sovits_v3(folder / "lora_v4.pth")
    with pytest.raises(WeightsError, match="not over another LoRA"):
        load_sovits_v3(folder / "lora_v4.pth", base=folder / "lora_v4.pth")


def test_cases_file(folder):
    assert json.loads((folder / "cases.json").read_text())["ref_rate"] == G.REF_RATE
