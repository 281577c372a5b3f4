"""IndexTTS's speech LM against upstream's, bit for bit: the beam-sampled mel-code search (koe with a
KV cache, upstream recomputing every step as it does on the CPU), the long-silence removal and the
latent pass, on a tiny random LM (goldens/gpt.npz, made by tests/oracle_indextts/golden_gpt.py from
golden_gpt.py's inputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from goldens import check_state, inputs, load_golden
from koe_indextts.beam import Sampling, search
from koe_indextts.voice_lm import GPTConfig, SpeechLM

G = inputs("gpt")


@pytest.fixture(scope="module")
def golden():
    return load_golden("gpt")


@pytest.fixture(scope="module")
def lm(golden):
    lm, state = G.speech_lm()
    check_state(golden, state)
    return lm


@pytest.mark.parametrize("case", G.CASES, ids=[f"seed{c[0]}" for c in G.CASES])
def test_search_and_latent_match_upstream(lm, golden, case):
    seed, name, settings = case
    text = torch.tensor(G.texts()[name])
    conds = torch.from_numpy(G.conds())
    torch.manual_seed(seed)
    codes = search(lm, conds, text, Sampling(**settings))
    assert np.array_equal(codes.numpy(), golden[f"codes_{seed}"])
    kept = torch.from_numpy(golden[f"kept_{seed}"])
    with torch.inference_mode():
        latent = lm.latent(conds, text, kept)
    assert np.array_equal(latent[0].numpy(), golden[f"latent_{seed}"])


def test_config_refuses_what_koe_does_not_run():
    with pytest.raises(ValueError, match="multiple of gpt.heads"):
        GPTConfig.from_dict({**G.GPT_SECTION, "heads": 5})
    with pytest.raises(ValueError, match="use_mel_codes_as_input"):
        GPTConfig.from_dict({**G.GPT_SECTION, "use_mel_codes_as_input": False})


@pytest.mark.parametrize("bad", [{"num_beams": 0}, {"max_mel_tokens": 0}, {"temperature": 0}, {"top_p": 1.5}, {"repetition_penalty": 0}])
def test_bad_sampling_settings_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        Sampling(**bad).check()


def test_cache_capacity_is_enforced():
    lm = SpeechLM(GPTConfig.from_dict(G.GPT_SECTION))
    cache = lm.gpt.new_cache(1, 4)
    with pytest.raises(ValueError, match="holds 4 positions"):
        lm.gpt(torch.zeros(1, 5, G.GPT_SECTION["model_dim"]), cache)
