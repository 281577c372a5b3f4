"""GPT-SoVITS's AR model's batched decoding (`TTS.run(parallel_infer=True)`, its default) against
upstream bit for bit.

The golden (goldens/t2s_batch.npz, tests/oracle_gpt_sovits/golden_t2s_batch.py) is upstream's
`infer_panel_batch_infer` on each case of golden_t2s_batch.py after its seed, the model loaded from
koe's seeded tiny GPT file: the rows, the idx list and the first step's logits (B, V).
"""

from __future__ import annotations

import pytest
from sovits_goldens import check_state, fixtures, inputs
from t2s_check import check_case

from koe.engines.gpt_sovits.fixtures_t2s import random_gpt_state
from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.t2s_decode import MAX_STEPS, decode_batched
from koe.runtime import exact

G = inputs("t2s_batch")
golden, folder = fixtures("t2s_batch")


@pytest.fixture(scope="module")
def model(folder):
    return load_t2s(folder / "s1.ckpt")


def test_fixture_is_the_goldens(golden):
    check_state(golden, random_gpt_state("tiny", G.SEED))


@pytest.mark.parametrize("name", list(G.CASES))
def test_batched_decoding_equals_upstream(golden, folder, model, name):
    case = G.case(name)
    rows, idxs = check_case(golden, folder, model, name, case, decode_batched)
    if case["prompt"]:  # a row stopped at EOS or at the early stop loses its last step's token: idx made
        assert [len(r) - G.T2S.PROMPT_TOKENS for r in rows] == idxs
        early = golden[f"{name}.early_stop_num"]
        assert "".join("S" if i in (early, MAX_STEPS - 1) else "E" for i in idxs) == case["stops"]
    else:  # upstream's fallback: serial decoding, idx 0
        assert idxs == [0] * len(rows)


@pytest.mark.parametrize("name", ["defaults", "early_stop"])
def test_exact_kernels_keep_the_bits(golden, folder, name):
    """koe's exact CPU kernels on the blocks' linears keep the batched bits (several rows a product)."""
    model = load_t2s(folder / "s1.ckpt")
    if exact.summation_orders() is None:
        pytest.skip(f"koe's exact kernel is not used here: {exact.unused_reason()}")
    assert exact.exact_linears(model.h) == 4 * model.config.layers
    check_case(golden, folder, model, name, G.case(name), decode_batched)
