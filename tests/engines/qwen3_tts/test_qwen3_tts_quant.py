"""int8 linear layers against float32 references, with stated tolerances."""

from __future__ import annotations

import torch

from koe.runtime.quant import Int8Linear, quantize_linears, quantize_per_channel


def test_quantize_per_channel_round_trip() -> None:
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    q, scale = quantize_per_channel(w)
    assert q.dtype == torch.int8 and q.abs().max() <= 127
    # symmetric rounding: each weight within half a step of its channel's scale
    assert ((q.float() * scale[:, None] - w).abs() <= scale[:, None] / 2 + 1e-6).all()


def test_int8_linear_close_to_fp32() -> None:
    g = torch.Generator().manual_seed(1)
    for bias in (False, True):
        linear = torch.nn.Linear(1024, 3072, bias=bias)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(3072, 1024, generator=g) / 32)
        x = torch.randn(2, 3, 1024, generator=g)
        ref = linear(x)
        got = Int8Linear(linear)(x)
        assert got.shape == ref.shape and got.dtype == torch.float32
        rel = ((got - ref).norm() / ref.norm()).item()
        cos = torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0).item()
        assert rel < 0.03, rel  # 8-bit weights and 7-bit dynamic activations: ~1.5% measured
        assert cos > 0.999, cos
        # and against the exact product of the dequantized weight: only activation rounding remains
        q, scale = quantize_per_channel(linear.weight)
        deq = torch.nn.functional.linear(x, q.float() * scale[:, None], linear.bias)
        assert ((got - deq).norm() / deq.norm()).item() < 0.02


def test_quantize_linears_replaces_in_place() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(32, 8)))
    assert quantize_linears(model, skip=("2",)) == 1
    assert isinstance(model[0], Int8Linear) and isinstance(model[2][0], torch.nn.Linear)
    assert model(torch.randn(4, 16)).shape == (4, 8)


def test_fused_projections_equal_separate_int8_layers() -> None:
    from koe.nn.decoder import DecoderLayer, DecoderSpec

    torch.manual_seed(0)
    spec = DecoderSpec(hidden_size=64, intermediate_size=96, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=1e6)
    separate = DecoderLayer(spec)
    fused = DecoderLayer(spec)
    fused.load_state_dict(separate.state_dict())
    assert quantize_linears(separate, fuse=False) == 7
    assert quantize_linears(fused) == 7
    assert fused.self_attn.qkv_proj is not None and not hasattr(fused.self_attn, "q_proj") and fused.mlp.gate_up_proj is not None
    x = torch.randn(1, 3, 64)
    cos, sin = torch.ones(1, 1, 3, 16), torch.zeros(1, 1, 3, 16)
    # one activation quantization per call from the same input, per-channel weight scales: the same numbers
    assert torch.equal(separate(x, cos, sin, None, None), fused(x, cos, sin, None, None))


def test_int4_and_int8_modes_are_named_with_their_kernel(session_tmp) -> None:
    import warnings

    from fixtures_models import model_folder

    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
    from koe.runtime import kernels
    from koe.runtime.quant import Int4Linear

    folder = model_folder(session_tmp, "custom_voice")
    results = {}
    for mode in ("int8", "int4"):
        engine = Qwen3TTSEngine.load(folder, device="cpu", precision=mode)
        assert engine.precision == mode and engine.kernel == kernels.describe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results[mode] = engine.generate("Hello there.", speaker="ryan", language="english", seed=0, max_new_tokens=6)
        assert results[mode].metadata["precision"] == mode and results[mode].metadata["kernel"] == kernels.describe()
        if mode == "int4":
            assert isinstance(engine.network.talker.model.layers[0].mlp.gate_up_proj, Int4Linear)
            assert isinstance(engine.network.talker.code_predictor.lm_head[0], Int4Linear)
            # the text projection stays float32 in both modes
            assert isinstance(engine.network.talker.text_projection.linear_fc1, torch.nn.Linear)
    # the exact path names no kernel
    exact = Qwen3TTSEngine.load(folder, device="cpu")
    assert "kernel" not in exact.result_metadata() and exact.precision == "float32"
