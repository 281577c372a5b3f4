"""GPT-SoVITS's AR text-to-semantic model (the GPT `.ckpt`), decoded serially, against upstream bit for bit.

The golden (goldens/t2s.npz, tests/oracle_gpt_sovits/golden_t2s.py) is upstream's
`Text2SemanticDecoder` loaded from koe's seeded tiny GPT file as `TTS.init_t2s_weights` loads it,
run by `infer_panel_naive_batched` (`TTS.run(parallel_infer=False)`) on each case of golden_t2s.py
after its seed: the rows (prompt + semantic tokens), the idx list and the first step's logits.
"""

from __future__ import annotations

import pytest
import torch
from sovits_goldens import check_state, fixtures, inputs
from t2s_check import case_inputs, check_case

from koe.engines.gpt_sovits.fixtures_t2s import gpt_config, random_gpt_state, released_shapes, yaml_config
from koe.engines.gpt_sovits.gpt_weights import GPTConfig, GPTFileError, read_gpt
from koe.engines.gpt_sovits.sampling import Sampling
from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.t2s_decode import MIN_STEPS, decode_one, decode_serial
from koe.runtime import exact
from koe.runtime.weights import WeightsError

G = inputs("t2s")
golden, folder = fixtures("t2s")


@pytest.fixture(scope="module")
def model(folder):
    return load_t2s(folder / "s1.ckpt")


def test_fixture_is_the_goldens(golden):
    check_state(golden, random_gpt_state("tiny", G.SEED))


def test_gpt_file_reads_with_weights_only(folder):
    config, state = read_gpt(folder / "s1.ckpt")
    assert config == gpt_config("tiny") and config.early_stop_num == 50
    assert list(state) == [name.removeprefix("model.") for name in released_shapes(config)]
    assert all(t.dtype == torch.float16 for t in state.values())


@pytest.mark.parametrize("name", list(G.CASES))
def test_serial_decoding_equals_upstream(golden, folder, model, name):
    case = G.case(name)
    rows, idxs = check_case(golden, folder, model, name, case, decode_serial)
    if case["prompt"]:  # at EOS that step's token is dropped (idx made); the early stop keeps it (idx + 1)
        made = [len(r) - G.PROMPT_TOKENS for r in rows]
        assert "".join("E" if m == i else "S" if m == i + 1 else "?" for m, i in zip(made, idxs, strict=True)) == case["stops"]
        assert min(idxs) >= MIN_STEPS
    else:
        assert idxs == [0] * len(rows)


def test_decoding_draws_from_a_given_generator(folder, model):
    phones, bert, prompt = case_inputs(folder, G.case("defaults"))
    torch.manual_seed(0)
    want, idx = decode_one(model, phones[0][None], bert[0][None], prompt[:1])
    got, idx2 = decode_one(model, phones[0][None], bert[0][None], prompt[:1], generator=torch.Generator().manual_seed(0))
    assert idx == idx2 and torch.equal(want, got)


def test_config_checks():
    with pytest.raises(GPTFileError, match="EOS"):
        GPTConfig(vocab_size=65, phoneme_vocab_size=10, embedding_dim=8, hidden_dim=8, heads=2, layers=1, eos=63, max_sec=1)
    with pytest.raises(GPTFileError, match="max_sec"):
        GPTConfig.from_dict({"model": {}, "data": {}})
    with pytest.raises(ValueError, match="top_k"):
        Sampling(top_k=0)


@pytest.mark.parametrize("name", ["rows", "no_prompt"])
def test_exact_kernels_keep_the_bits(golden, folder, name):
    """koe's exact CPU kernels (koe.runtime.exact) on the blocks' linears (q/k/v fused, out, the
    feed-forward) give upstream's bits too; `bert_proj` (fed a transposed view) and the output
    layer stay torch's."""
    model = load_t2s(folder / "s1.ckpt")
    if exact.summation_orders() is None:
        pytest.skip(f"koe's exact kernel is not used here: {exact.unused_reason()}")
    assert exact.exact_linears(model.h) == 4 * model.config.layers
    check_case(golden, folder, model, name, G.case(name), decode_serial)


class _HParams(dict):
    """Stands for upstream's `utils.HParams`, a class a pickle would have to import."""


def test_gpt_files_that_need_more_than_weights_only_are_refused(tmp_path):
    state = random_gpt_state("tiny", 0)
    torch.save({"weight": state, "config": _HParams(model={})}, tmp_path / "code.ckpt")
    with pytest.raises(WeightsError, match="refused"):
        read_gpt(tmp_path / "code.ckpt")
    torch.save({"weight": state}, tmp_path / "bare.ckpt")
    with pytest.raises(GPTFileError, match="'weight' and 'config'"):
        read_gpt(tmp_path / "bare.ckpt")
    torch.save({"weight": {"bert_proj.weight": state["model.bert_proj.weight"]}, "config": yaml_config(gpt_config("tiny"))}, tmp_path / "names.ckpt")
    with pytest.raises(GPTFileError, match="not a tensor under 'model.'"):
        read_gpt(tmp_path / "names.ckpt")
