"""Release 2's speech LM against upstream's (`model_v2.UnifiedVoice`), bit for bit: the emotion
vector (`merge_emovec` with a weight, the emotion-vector mix), the conditioning rows (speaker
latents + emotion, two speed embeddings), the code search (upstream with its KV cache) and the
latent pass (goldens/gpt2.npz, from golden_gpt2.py's inputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from goldens import check_state, inputs, load_golden
from koe_indextts.beam import Sampling, search

G = inputs("gpt2")


@pytest.fixture(scope="module")
def golden():
    return load_golden("gpt2")


@pytest.fixture(scope="module")
def parts(golden):
    lm, speaker, emotion, state = G.parts()
    check_state(golden, state)
    return lm, speaker, emotion


@pytest.mark.parametrize("case", G.CASES, ids=[f"seed{c[0]}" for c in G.CASES])
def test_emotion_search_and_latent_match_upstream(parts, golden, case):
    lm, speaker_cond, emotion_cond = parts
    seed, name, source, alpha, weights, settings = case
    feats = {k: torch.from_numpy(v) for k, v in G.features().items()}
    spk, emo = feats["speaker"], feats[source]
    text = torch.tensor(G.texts()[name], dtype=torch.int32)
    with torch.inference_mode():
        base = lm.emotion_vector(emotion_cond(spk.transpose(1, 2), torch.tensor([spk.shape[1]])).squeeze(1))
        wanted = lm.emotion_vector(emotion_cond(emo.transpose(1, 2), torch.tensor([emo.shape[1]])).squeeze(1))
        emovec = base + alpha * (wanted - base)
        if weights is not None:
            w = torch.tensor(weights)
            mix = torch.sum(w.unsqueeze(1) * torch.from_numpy(G.emotion_matrix()), 0).unsqueeze(0)
            emovec = mix + (1 - torch.sum(w)) * emovec
        latents = speaker_cond(spk.transpose(1, 2), torch.tensor([spk.shape[1]]))
        conds = lm.conditioning(latents, emovec)
    assert np.array_equal(emovec.numpy(), golden[f"emovec_{seed}"])
    assert np.array_equal(latents.numpy(), golden[f"latents_{seed}"])
    torch.manual_seed(seed)
    codes = search(lm, conds, text, Sampling(**{**G.DEFAULTS, **settings}), cached_positions=True)
    assert np.array_equal(codes.numpy(), golden[f"codes_{seed}"])
    stops = (codes == G.GPT_SECTION["stop_mel_token"]).nonzero()
    kept = codes[: int(stops[0]) if len(stops) else len(codes)]
    with torch.inference_mode():
        latent = lm.latent(conds, text, kept)
    assert np.array_equal(latent[0].numpy(), golden[f"latent_{seed}"])
