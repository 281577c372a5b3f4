"""koe's C kernels (koe/runtime/kernels/qgemv.c) and the int8 / int4 layers on them: the fast path
(AVX-512 VNNI or AVX2, whichever this CPU has) and the plain-C path give the same bits, for any thread count and batch; results match the
dequantized float product within the activation rounding; the fallbacks say what they are."""

from __future__ import annotations

import torch

from koe.runtime import kernels
from koe.runtime.quant import Int4Linear, Int8Linear, dequantize_int4, kernel_quantized, quantize_groups_int4, quantize_linears, quantize_per_channel


def _linear(n: int, k: int, bias: bool, seed: int) -> torch.nn.Linear:
    g = torch.Generator().manual_seed(seed)
    linear = torch.nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(n, k, generator=g) / k**0.5)
        if bias:
            linear.bias.copy_(torch.randn(n, generator=g))
    return linear


def _call(lib, layer, x: torch.Tensor, threads: int) -> torch.Tensor:
    """`layer`'s product on `lib` (a given build of the kernels) with `threads` threads."""
    x2 = layer._row(x)
    y = torch.empty(x2.shape[0], layer.out_features)
    fn = lib.koe_q8_linear if isinstance(layer, Int8Linear) else lib.koe_q4_linear
    bias = None if layer.bias is None else layer.bias.data_ptr()
    fn(x2.data_ptr(), x2.shape[0], layer.padded_in, layer.q.data_ptr(), layer.scale.data_ptr(), layer.out_features, layer.group, bias, y.data_ptr(), threads)
    return y


def test_kernels_build_here() -> None:
    assert kernels.library() is not None, kernels.unavailable_reason()
    assert kernels.describe() in ("koe-avx512vnni", "koe-avx2", "koe-portable")


def test_fast_and_portable_paths_give_the_same_bits() -> None:
    fast, portable = kernels.load(kernels.build()), kernels.load(kernels.build(portable=True))
    assert portable.koe_qgemv_has_vnni() == 0
    for cls in (Int8Linear, Int4Linear):
        for n, k, bias in ((96, 256, False), (130, 1024, True), (64, 100, True)):  # 100: padded to 128
            layer = cls(_linear(n, k, bias, seed=n + k))
            x = torch.randn(9, k, generator=torch.Generator().manual_seed(k)) * 3  # 9 rows: blocks of 4, 2 and 1
            x[1] = 0  # an all-zero row quantizes to zeros
            x[2] = (torch.arange(k) % 9 - 4) + 0.5  # every value a rounding tie (scale 1 where the group's max is 127)
            x[2, ::64] = 127
            want = _call(portable, layer, x, 1)
            for threads in (1, 2, 3):
                assert torch.equal(_call(fast, layer, x, threads), want), (cls.__name__, n, k, threads)
            assert torch.equal(_call(fast, layer, x[:7], 2), want[:7])  # 7 rows: blocks of 4, 2 and 1 (int8)
            assert torch.equal(layer(x), want)
            # each row is the same whether it comes alone or in a batch
            assert torch.equal(layer(x[3:4]), want[3:4])
            if bias:
                assert torch.equal(want[1], layer.bias)


def _reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The product with the weight as the kernel sees it, in float64, activations unrounded."""
    y = x.double() @ weight.double().T
    return (y if bias is None else y + bias.double()).float()


def test_int8_close_to_dequantized_product() -> None:
    linear = _linear(3072, 1024, True, seed=1)
    x = torch.randn(2, 3, 1024, generator=torch.Generator().manual_seed(2))
    got = Int8Linear(linear)(x)
    q, scale = quantize_per_channel(linear.weight)
    ref = _reference(x, q.float() * scale[:, None], linear.bias)
    assert got.shape == (2, 3, 3072) and got.dtype == torch.float32
    assert ((got - ref).norm() / ref.norm()).item() < 0.01  # 8-bit activations, one scale per row
    exact = linear(x)
    assert torch.nn.functional.cosine_similarity(got.flatten(), exact.flatten(), dim=0).item() > 0.9995


def test_int4_close_to_dequantized_product() -> None:
    linear = _linear(1024, 3072, False, seed=3)
    x = torch.randn(4, 3072, generator=torch.Generator().manual_seed(4))
    layer = Int4Linear(linear)
    got = layer(x)
    ref = _reference(x, dequantize_int4(layer.q, layer.scale), None)
    assert ((got - ref).norm() / ref.norm()).item() < 0.01
    cos = torch.nn.functional.cosine_similarity(got.flatten(), linear(x).flatten(), dim=0).item()
    assert cos > 0.99, cos  # 4-bit weights in groups of 64: ~0.995 on Gaussian weights


def test_int4_quantization_layout() -> None:
    w = torch.randn(8, 128, generator=torch.Generator().manual_seed(5))
    packed, scale = quantize_groups_int4(w)
    assert packed.shape == (8, 64) and packed.dtype == torch.uint8 and scale.shape == (8, 2)
    deq = dequantize_int4(packed, scale)
    groups = w.view(8, 2, 64)
    extreme = groups.gather(-1, groups.abs().argmax(-1, keepdim=True)).squeeze(-1)
    # the weight of largest magnitude in each group is kept exactly (it maps to -8)
    assert torch.equal(deq.view(8, 2, 64).gather(-1, groups.abs().argmax(-1, keepdim=True)).squeeze(-1), extreme)
    step = scale.abs().repeat_interleave(64, dim=1)
    unclamped = (w / scale.repeat_interleave(64, dim=1)) < 7.5
    # within half a step, except weights beyond +7 steps (the other sign's extreme): within one
    assert ((deq - w).abs() <= step / 2 + 1e-6)[unclamped].all()
    assert ((deq - w).abs() <= step + 1e-6).all()
    # byte j of a 128-weight block: weight j in the low nibble, weight j + 64 in the high one
    q = (torch.round(groups / scale[..., None]).clamp(-8, 7).view(8, 128) + 8).to(torch.uint8)
    assert torch.equal(packed, q[:, :64] | (q[:, 64:] << 4))
    zero = quantize_groups_int4(torch.zeros(2, 128))
    assert torch.equal(dequantize_int4(*zero), torch.zeros(2, 128))
    wide = torch.randn(3, 256, generator=torch.Generator().manual_seed(6))  # two blocks a row, each on its own
    assert torch.equal(dequantize_int4(*quantize_groups_int4(wide))[:, 128:], dequantize_int4(*quantize_groups_int4(wide[:, 128:])))


def test_fused_layers_equal_separate_ones_in_int4() -> None:
    from koe.nn.decoder import DecoderLayer, DecoderSpec

    torch.manual_seed(0)
    spec = DecoderSpec(hidden_size=64, intermediate_size=96, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=1e6)
    separate, fused = DecoderLayer(spec), DecoderLayer(spec)
    fused.load_state_dict(separate.state_dict())
    assert quantize_linears(separate, fuse=False, mode="int4") == 7
    assert quantize_linears(fused, mode="int4") == 7
    assert isinstance(fused.self_attn.qkv_proj, Int4Linear)
    x = torch.randn(1, 3, 64)
    cos, sin = torch.ones(1, 1, 3, 16), torch.zeros(1, 1, 3, 16)
    assert torch.equal(separate(x, cos, sin, None, None), fused(x, cos, sin, None, None))


def test_without_kernels_int8_falls_back_and_int4_says_why(monkeypatch) -> None:
    import pytest

    monkeypatch.setenv("KOE_KERNELS", "0")
    kernels._load.cache_clear()
    try:
        assert kernels.library() is None and "KOE_KERNELS=0" in kernels.unavailable_reason()
        layer = Int8Linear(_linear(32, 64, True, seed=6))
        assert layer.kernel == "fbgemm"
        assert layer(torch.randn(2, 64)).shape == (2, 32)
        with pytest.raises(kernels.KernelUnavailable, match="KOE_KERNELS=0"):
            Int4Linear(_linear(32, 64, False, seed=7))
    finally:
        kernels._load.cache_clear()


def test_a_missing_compiler_is_reported(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("KOE_KERNEL_CACHE", str(tmp_path / "cache"))
    kernels._load.cache_clear()
    try:
        assert kernels.library() is None
        assert "no C compiler" in kernels.unavailable_reason()
    finally:
        kernels._load.cache_clear()


def test_kernel_rmsnorm_matches_torch_within_rounding() -> None:
    from koe.nn.norm import RMSNorm
    from koe.runtime.quant import KernelRMSNorm, kernel_norms

    norm = RMSNorm(1000, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(1000))
    fast = KernelRMSNorm(norm, kernels.library())
    x = torch.randn(3, 5, 1000) * 4
    got, want = fast(x), norm(x)
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    strided = x[:, 1:3].transpose(0, 1)  # a non-contiguous input
    assert torch.allclose(fast(strided), norm(strided), rtol=1e-5, atol=1e-5)
    model = torch.nn.Sequential(RMSNorm(64), torch.nn.Sequential(RMSNorm(64)))
    assert kernel_norms(model, RMSNorm) == 2 and isinstance(model[1][0], KernelRMSNorm)


def test_the_c_quantizer_gives_the_torch_steps_bits() -> None:
    """kernel_quantized (quantize.c) against quantize_per_channel / quantize_groups_int4 on the
    zero-padded weight, from float32 and from bfloat16 as released (widened exactly), with ties."""
    lib = kernels.library()
    g = torch.Generator().manual_seed(0)
    for n, k in ((7, 64), (5, 100), (12, 300)):
        w32 = torch.randn(n, k, generator=g) * 0.05
        w32[0, :64] = torch.tensor([0.5, -0.5] * 32)  # magnitude ties: the first one gives the sign
        w32[1] = 0  # an all-zero row
        w32[2] = ((torch.arange(k) % 9) - 4 + 0.5) * 0.25  # with the row's largest at 127 * 0.25 the scale is 0.25:
        w32[2, 0] = 31.75  # every other weight a rounding tie in int8
        for w in (w32, w32.to(torch.bfloat16)):
            wf = w.to(torch.float32)
            q, s = quantize_per_channel(wf)
            padded = k + (-k % 64)
            want = torch.nn.functional.pad(q.to(torch.int16) + 128, (0, padded - k), value=128).to(torch.uint8)
            got_q, got_s = kernel_quantized(lib, 8, w, padded)
            assert torch.equal(got_q, want) and torch.equal(got_s, s), (n, k, w.dtype)
            padded4 = k + (-k % 128)
            want4 = quantize_groups_int4(torch.nn.functional.pad(wf, (0, padded4 - k)))
            got4 = kernel_quantized(lib, 4, w, padded4)
            assert torch.equal(got4[0], want4[0]) and torch.equal(got4[1], want4[1]), (n, k, w.dtype)
