"""Release 2.5's speech LM against upstream's (`model_v2.UnifiedVoice` in campplus mode), bit for bit:
the language table, the speaker's conditioning row from a CAM++ embedding, the emotion vector
(`merge_emovec` with a weight, the emotion-vector mix) and the code search with the language
embedding and upstream's padded, masked prompt, whose logits (the prompt's last position and the
first cached step) are compared too: sampled codes would not show a last-bit difference
(goldens/gpt25.npz, from golden_gpt25.py's inputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from goldens import array_sha256, check_state, inputs, load_golden
from koe_indextts.beam import Sampling, search
from koe_indextts.voice_lm import LANGUAGES, CampPlusSpeechLM, language_id

G = inputs("gpt25")


@pytest.fixture(scope="module")
def golden():
    return load_golden("gpt25")


@pytest.fixture(scope="module")
def parts(golden):
    lm, emotion, state = G.parts()
    check_state(golden, state)
    return lm, emotion


def test_language_table_is_upstreams(golden):
    assert list(LANGUAGES) == golden["languages"].tolist()
    for seed, _, language, *_ in G.CASES:
        assert language_id(language) == int(golden[f"language_{seed}"])


def test_state_holds_campplus_keys_only(parts):
    lm, _ = parts
    keys = set(lm.state_dict())
    assert {"spk_emb_proj.weight", "lang_embedding.weight", "emovec_layer.weight", "emo_layer.weight"} <= keys
    assert not any(k.startswith(("speed_emb", "conditioning_encoder", "perceiver_encoder")) for k in keys)
    assert lm.lang_embedding.num_embeddings == len(LANGUAGES) + 1


def conditioning(lm: CampPlusSpeechLM, emotion_cond, case) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(emotion vector, speaker latent, conditioning rows) of a case, as 2.5's infer makes them."""
    _, _, _, source, alpha, weights, _ = case
    feats = {k: torch.from_numpy(v) for k, v in G.features().items()}
    spk, emo = feats["speaker"], feats[source]
    with torch.inference_mode():
        base = lm.emotion_vector(emotion_cond(spk.transpose(1, 2), torch.tensor([spk.shape[1]])).squeeze(1))
        wanted = lm.emotion_vector(emotion_cond(emo.transpose(1, 2), torch.tensor([emo.shape[1]])).squeeze(1))
        emovec = base + alpha * (wanted - base)
        if weights is not None:
            w = torch.tensor(weights)
            mix = torch.sum(w.unsqueeze(1) * torch.from_numpy(G.emotion_matrix()), 0).unsqueeze(0)
            emovec = mix + (1 - torch.sum(w)) * emovec
        latent = lm.speaker_latent(torch.from_numpy(G.style()))
        conds = lm.conditioning(latent, emovec)
    return emovec, latent, conds


@pytest.mark.parametrize("case", G.CASES, ids=[f"seed{c[0]}" for c in G.CASES])
def test_campplus_search_matches_upstream(parts, golden, case):
    lm, emotion_cond = parts
    assert isinstance(lm, CampPlusSpeechLM)
    seed, name, language, _, _, _, settings = case
    text = torch.tensor(G.texts()[name], dtype=torch.int32)
    emovec, latent, conds = conditioning(lm, emotion_cond, case)
    assert np.array_equal(emovec.numpy(), golden[f"emovec_{seed}"])
    assert np.array_equal(latent.numpy(), golden[f"latent_{seed}"])
    torch.manual_seed(seed)
    codes = search(lm, conds, text, Sampling(**{**G.DEFAULTS, **settings}), cached_positions=True, language=language_id(language))
    assert np.array_equal(codes.numpy(), golden[f"codes_{seed}"])


@pytest.mark.parametrize("case", G.CASES, ids=[f"seed{c[0]}" for c in G.CASES])
def test_padded_prompt_logits_match_upstream(parts, golden, case):
    """The prompt's last logits and the first cached step's, bit for bit: upstream pads the prompt on
    the left where it dropped start/stop text ids and masks the padding out of attention."""
    lm, emotion_cond = parts
    seed, name, language, *_ = case
    text = torch.tensor(G.texts()[name], dtype=torch.int32)
    _, _, conds = conditioning(lm, emotion_cond, case)
    tokens = torch.from_numpy(golden[f"step_tokens_{seed}"])
    with torch.inference_mode():
        prompt = lm.prompt(conds, text, language_id(language))
        cache = lm.gpt.new_cache(len(tokens), prompt.shape[1] + 1, lm.prompt_padding(text))
        first = lm.logits(lm.gpt(prompt, cache)[:, -1])
        step = lm.step(lm.mel_embeddings(tokens[:, None], 2), cache)  # the first code's cached position (1 + 1)
    assert array_sha256(first[0]) == str(golden[f"prompt_logits_{seed}"])
    assert array_sha256(step) == str(golden[f"step_logits_{seed}"])
