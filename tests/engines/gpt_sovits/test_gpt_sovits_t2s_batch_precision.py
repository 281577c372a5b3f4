"""GPT-SoVITS's batched AR decode (`parallel_infer`, what `TTS.run` runs by default) with the model
loaded at `precision="exact"` (the blocks' linears on koe's exact kernel where it gives torch's
bits here): the `t2s_batch` goldens (upstream's rows, idx and first-step logits) still hold."""

from __future__ import annotations

from sovits_goldens import fixtures, inputs
from t2s_check import check_case

from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.t2s_decode import decode_batched
from koe.runtime import exact

G = inputs("t2s_batch")
golden, folder = fixtures("t2s_batch")


def test_exact_precision_keeps_the_batched_bits(golden, folder):
    model = load_t2s(folder / "s1.ckpt", precision="exact")
    assert model.kernel == ("koe-exact-fp32" if exact.summation_orders() is not None else None)
    for name in G.CASES:
        check_case(golden, folder, model, name, G.case(name), decode_batched)
