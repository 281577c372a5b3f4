"""GPT-SoVITS's AR model on the kit's precision layer: `load_t2s(precision="fp32")` puts the blocks'
linears on koe's exact kernel where it gives torch's bits here, and the `t2s` goldens
(upstream's rows, idx and first-step logits) still hold (`t2s_batch`'s: the next file); a mode it
does not run is refused."""

from __future__ import annotations

import pytest
from sovits_goldens import fixtures, inputs
from t2s_check import check_case

from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.t2s_decode import decode_serial
from koe.runtime import exact
from koe.runtime.precision import UnsupportedPrecision

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


def test_modes_it_does_not_run_are_refused(folder):
    for mode in ("bf16", "int8"):
        with pytest.raises(UnsupportedPrecision, match="GPT-SoVITS"):
            load_t2s(folder / "s1.ckpt", precision=mode)
