"""GPT-SoVITS's AR model on the kit's precision layer: `load_t2s(precision="fp32")` puts the blocks'
linears on koe's exact kernel where it gives torch's bits here, and the `t2s` goldens
(upstream's rows, idx and first-step logits) still hold (`t2s_batch`'s: the next file); int8 and
int4 (opt-in) quantize the blocks' linears and nothing else; a mode it does not run is refused."""

from __future__ import annotations

import pytest
import torch
from sovits_goldens import fixtures, inputs
from t2s_check import case_inputs, check_case

from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.t2s_decode import decode_serial
from koe.runtime import exact
from koe.runtime.precision import UnsupportedPrecision
from koe.runtime.quant import Int4Linear, Int8Linear

SERIAL = inputs("t2s")
golden, folder = fixtures("t2s")


@pytest.mark.parametrize("name", ["rows", "no_prompt"])
def test_exact_precision_keeps_the_serial_bits(golden, folder, name):
    model = load_t2s(folder / "s1.ckpt", precision="fp32")
    if exact.summation_orders() is None:
        assert model.kernel is None
        pytest.skip(f"koe's exact kernel is not used here: {exact.unused_reason()}")
    assert model.kernel == "koe-exact-fp32"  # float16 releases: float32 strips (not bf16 values)
    assert sum(isinstance(m, exact.ExactLinear) for m in model.h.modules()) == 4 * model.config.layers
    assert not isinstance(model.bert_proj, exact.ExactLinear) and not isinstance(model.ar_predict_layer, exact.ExactLinear)
    check_case(golden, folder, model, name, SERIAL.case(name), decode_serial)


@pytest.mark.parametrize("mode, layer", [("int8", Int8Linear), ("int4", Int4Linear)])
def test_quantized_modes_take_the_blocks_linears_only(golden, folder, mode, layer):
    """The blocks' four linears a layer quantized, their LayerNorms, the embeddings, the BERT projection
    and the output layer float32 as they were; the first step's logits close to the exact ones."""
    model, plain = load_t2s(folder / "s1.ckpt", precision=mode), load_t2s(folder / "s1.ckpt")
    assert model.precision == mode and model.kernel is not None
    assert sum(isinstance(m, layer) for m in model.h.modules()) == 4 * model.config.layers
    assert sum(type(m) is torch.nn.LayerNorm for m in model.h.modules()) == 2 * model.config.layers
    for name in ("bert_proj", "ar_predict_layer"):
        assert type(getattr(model, name)) is torch.nn.Linear and torch.equal(getattr(model, name).weight, getattr(plain, name).weight)
    phones, bert, prompt = case_inputs(folder, SERIAL.case("rows"))
    logits = []
    for m in (plain, model):
        first: list[torch.Tensor] = []
        torch.manual_seed(0)
        decode_serial(m, phones[:1], bert[:1], prompt if prompt is None else prompt[:1], early_stop_num=4, first_logits=first)
        logits.append(first[0][0])
    cosine = torch.nn.functional.cosine_similarity(logits[0].double(), logits[1].double(), dim=0)
    assert 0.99 < cosine < 1.0, cosine


def test_modes_it_does_not_run_are_refused(folder):
    with pytest.raises(UnsupportedPrecision, match="GPT-SoVITS.*fp32 \\(exact\\), int8 or int4"):
        load_t2s(folder / "s1.ckpt", precision="bf16")
