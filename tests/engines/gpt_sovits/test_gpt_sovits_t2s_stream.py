"""GPT-SoVITS's AR model's streamed decoding (`TTS.run(streaming_mode=True)`) against upstream bit
for bit.

The golden (goldens/t2s_stream.npz, tests/oracle_gpt_sovits/golden_t2s_stream.py) is upstream's
`infer_panel_naive(streaming_mode=True)` on each case of golden_t2s_stream.py after its seed, the
model loaded from koe's seeded tiny GPT file: every chunk (or None) and its is_final flag, and the
mute-similarity matrix. Its tokens are the serial loop's: the chunks end to end (with the overlap
upstream's mute cuts repeat) hold the serial decode's row.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sovits_goldens import check_state, fixtures, inputs
from t2s_check import case_inputs

from koe.engines.gpt_sovits.fixtures_t2s import random_gpt_state
from koe.engines.gpt_sovits.sampling import Sampling
from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.t2s_decode import decode_chunks, decode_one, mute_similarity

G = inputs("t2s_stream")
golden, folder = fixtures("t2s_stream")


@pytest.fixture(scope="module")
def model(folder):
    return load_t2s(folder / "s1.ckpt")


def test_fixture_is_the_goldens(golden):
    check_state(golden, random_gpt_state("tiny", G.SEED))


@pytest.mark.parametrize("name", list(G.CASES))
def test_streamed_decoding_equals_upstream(golden, folder, model, name):
    case = G.case(name)
    phones, bert, prompt = case_inputs(folder, case)
    prompt = None if prompt is None else prompt[:1]
    settings = Sampling(case["top_k"], case["top_p"], case["temperature"], case["repetition_penalty"])
    early_stop_num = model.config.early_stop_num if case["early_stop_num"] is None else case["early_stop_num"]
    similarity = None
    if case["mute_token"] is not None:
        similarity = mute_similarity(model, case["mute_token"])
        assert np.array_equal(similarity.numpy(), golden[f"{name}.similarity"])
    torch.manual_seed(case["seed"])
    chunks = list(
        decode_chunks(model, phones[0][None], bert[0][None], prompt, settings, early_stop_num, None, case["chunk_length"], similarity, case["split_threshold"])
    )
    assert [final for _, final in chunks] == golden[f"{name}.final"].tolist()
    for i, (tokens, _) in enumerate(chunks):
        if tokens is None:
            assert f"{name}.none.{i}" in golden
        else:
            assert np.array_equal(tokens[0].numpy(), golden[f"{name}.chunk.{i}"]), f"chunk {i}"
    torch.manual_seed(case["seed"])
    row, _ = decode_one(model, phones[0][None], bert[0][None], prompt, settings, early_stop_num)
    made = row[0, 0 if prompt is None else prompt.shape[1] :]
    if similarity is None:  # fixed-length chunks: the row, cut
        assert torch.equal(torch.cat([t[0] for t, _ in chunks if t is not None]), made)
    else:  # each chunk starts where the last cut was: the last chunk ends the row
        assert torch.equal(chunks[-1][0][0], made[-len(chunks[-1][0][0]) :])
