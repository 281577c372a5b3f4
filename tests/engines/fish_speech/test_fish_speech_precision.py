"""Fish Speech S2's precisions on a tiny random release: fp32 (exact) and bf16 (upstream's server in
bfloat16; its bits: test_fish_speech_infer_bf16.py), and the opt-in int8 / int4 of the
transformers' layers (koe's kernels): what each loads, what results name, and the int modes' error bounded."""

from __future__ import annotations

import pytest
import torch
from koe_fish_speech import spec
from koe_fish_speech.accuracy import measure
from koe_fish_speech.engine import FishSpeechEngine
from koe_fish_speech.fixtures import write_random_model
from torch import nn

from koe.engines.base import SynthesisRequest
from koe.runtime import kernels
from koe.runtime.precision import UnsupportedPrecision
from koe.runtime.quant import Int4Linear, Int8Linear, KernelRMSNorm

QUANTIZED = {"int8": Int8Linear, "int4": Int4Linear}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    torch.set_num_threads(1)
    return write_random_model(tmp_path_factory.mktemp("fish_speech-precision"), seed=5)


def needs_kernels(mode: str) -> None:
    if mode == "int4" and kernels.library() is None:
        pytest.skip(f"int4 runs on koe's C kernels: {kernels.unavailable_reason()}")


def test_capabilities_list_every_mode():
    assert spec.capabilities().precisions == ("fp32", "bf16", "int8", "int4")


def test_exact_by_default(folder):
    engine = FishSpeechEngine.load(folder)
    assert engine.precision == "float32" and engine.lm.dtype == torch.float32
    assert engine.codec.decode_autocast is None
    assert "kernel" not in engine.result_metadata()


@pytest.mark.parametrize("dtype", ["bfloat16", "bf16", torch.bfloat16])
def test_dtype_bfloat16_is_bf16(folder, dtype):
    engine = FishSpeechEngine.load(folder, dtype=dtype)
    assert engine.precision == "bfloat16" and engine.lm.dtype == torch.bfloat16
    assert engine.codec.dtype == torch.float32 and engine.codec.decode_autocast == torch.bfloat16


def test_refused(folder):
    with pytest.raises(UnsupportedPrecision, match="unknown precision"):
        FishSpeechEngine.load(folder, precision="fp16")
    with pytest.raises(ValueError, match="disagree"):
        FishSpeechEngine.load(folder, dtype="bfloat16", precision="int8")
    with pytest.raises(ValueError, match="not offered"):
        FishSpeechEngine.load(folder, dtype="float16")


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_quantized_slow_stack(folder, mode):
    needs_kernels(mode)
    engine = FishSpeechEngine.load(folder, precision=mode)
    lm = engine.lm
    for layer in [*lm.slow.layers, *lm.fast.layers]:
        assert isinstance(layer.attention.wqkv, QUANTIZED[mode]) and isinstance(layer.attention.wo, QUANTIZED[mode])
        assert isinstance(layer.feed_forward.gate_up_proj, QUANTIZED[mode]) and isinstance(layer.feed_forward.down_proj, QUANTIZED[mode])
        assert isinstance(layer.attention_norm, KernelRMSNorm) or kernels.library() is None
    heads = [lm.fast.output, *(m for m in (lm.slow.output, lm.fast.project_in) if isinstance(m, nn.Linear))]
    assert all(type(m) is nn.Linear and m.weight.dtype == torch.float32 for m in heads)
    assert lm.slow.embeddings.weight.dtype == torch.float32 and engine.codec.dtype == torch.float32
    chunks = list(engine.synthesize(SynthesisRequest(text="Hello there.", seed=3, options={"max_new_tokens": 8})))
    assert sum(len(c.samples) for c in chunks) > 0
    assert chunks[-1].metadata["precision"] == mode
    assert chunks[-1].metadata["kernel"] == lm.kernel


@pytest.mark.parametrize(("mode", "cosine", "agree"), [("bf16", 0.999, 0.75), ("int8", 0.995, 0.6), ("int4", 0.9, 0.25)])
def test_teacher_forced_error(folder, mode, cosine, agree):
    needs_kernels(mode)
    result = measure(folder, mode, frames=8)
    assert result["frames"] >= 4
    for part in ("token_logits", "codebook_logits"):
        assert result[part]["cosine_mean"] > cosine, (part, result)
        assert result[part]["top1_agreement"] >= agree, (part, result)
