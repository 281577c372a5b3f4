"""The exact path's float32 products on koe's kernel (koe/runtime/kernels/exact.c, koe/runtime/exact.py):
the kernel does the summation order it documents, its fast and plain-C paths agree, and a layer is
replaced only where this process's torch gives the same bits (so the exact path's bits never move:
the parity tests against upstream run through it)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from koe.runtime import exact, kernels
from koe.service.doctor import check_exact_products


def _operands(m: int, n: int, k: int, bias: bool, bf16: bool, seed: int):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g)
    if bf16:
        w = w.to(torch.bfloat16).float()
    return torch.randn(m, k, generator=g), w, torch.randn(n, generator=g) if bias else None


def _documented_order(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, block: int) -> np.ndarray:
    """exact.c's order spelled out in numpy: per output, inputs in blocks of `block`, one fused
    multiply-add per input from +0 (a float32 product is exact in float64, so one float64 add then
    one rounding to float32 is the fused step but for rare double roundings, absent from these
    operands), the blocks' sums added in order to the bias or, without one, the first stored."""
    xs, ws = x.double().numpy(), w.double().numpy()
    c = None if bias is None else bias.numpy().copy()[None, :].repeat(len(xs), 0)
    for b0 in range(0, w.shape[1], block):
        a = np.zeros((len(xs), len(ws)), dtype=np.float32)
        for k in range(b0, min(b0 + block, w.shape[1])):
            a = (a.astype(np.float64) + xs[:, k : k + 1] * ws[None, :, k]).astype(np.float32)
        c = a if c is None else (c + a).astype(np.float32)
    return c


def _documented_lanes(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, lead: bool) -> np.ndarray:
    """exact.c's LANES orders in numpy: products rounded to float32, input k into partial sum
    (k - start) % 4 (with `lead`, the first product starts sum 0 and start = 1), whole groups of 4
    only, then (s0 + s2) + (s1 + s3), then the rest in order, then the bias."""
    p = (x.double().numpy()[:, None, :] * w.double().numpy()[None, :, :]).astype(np.float32)  # (M, N, K)
    k, start = w.shape[1], int(lead and w.shape[1] > 0)
    sums = [np.zeros(p.shape[:2], dtype=np.float32) for _ in range(4)]
    if start:
        sums[0] = p[..., 0].copy()
    whole = start + (k - start) // 4 * 4
    for i in range(start, whole):
        sums[(i - start) % 4] = sums[(i - start) % 4] + p[..., i]
    total = (sums[0] + sums[2]) + (sums[1] + sums[3])
    for i in range(whole, k):
        total = total + p[..., i]
    return total if bias is None else total + bias.numpy()


def _lib():
    lib = kernels.library()
    assert lib is not None, kernels.unavailable_reason()
    return lib


@pytest.mark.parametrize(
    ("m", "n", "k", "bias", "bf16", "block"),
    [(1, 70, 1000, False, True, 384), (5, 130, 800, True, False, 384), (3, 64, 300, True, True, 128), (1, 17, 50, False, False, 384)],
)
def test_the_kernel_sums_in_the_documented_order(m, n, k, bias, bf16, block) -> None:
    lib = _lib()
    x, w, b = _operands(m, n, k, bias, bf16, seed=m + n + k)
    packed, packed_bf16 = exact.pack(lib, w)
    assert packed_bf16 == bf16  # bf16 strips exactly where every weight is a bf16 value
    want = _documented_order(x, w, b, block)
    assert np.array_equal(exact.product(lib, x, packed, packed_bf16, n, block, b, portable=True).numpy(), want)
    if lib.koe_exact_vectorized():
        assert np.array_equal(exact.product(lib, x, packed, packed_bf16, n, block, b).numpy(), want)


@pytest.mark.parametrize(
    ("m", "n", "k", "bias", "bf16"),
    [
        (1, 70, 1000, False, True),
        (2, 130, 801, True, False),
        (3, 64, 9, True, True),
        (1, 17, 1, False, False),
        (1, 64, 4, True, False),
        (2, 20, 5, False, True),
    ],
)
@pytest.mark.parametrize("order", [exact.LANES_LEAD, exact.LANES])
def test_the_kernel_sums_in_the_documented_interleaved_orders(order, m, n, k, bias, bf16) -> None:
    """The LANES orders (MKL's on an AMD EPYC for 1 row, and for 2 or 3 rows), widths around the groups of 4 included."""
    lib = _lib()
    x, w, b = _operands(m, n, k, bias, bf16, seed=m + n + k)
    packed, packed_bf16 = exact.pack(lib, w)
    want = _documented_lanes(x, w, b, lead=order == exact.LANES_LEAD)
    assert np.array_equal(exact.product(lib, x, packed, packed_bf16, n, 0, b, portable=True, order=order).numpy(), want)
    if lib.koe_exact_vectorized():
        assert np.array_equal(exact.product(lib, x, packed, packed_bf16, n, 0, b, order=order).numpy(), want)


@pytest.mark.parametrize("order", [exact.CHAIN, exact.LANES_LEAD, exact.LANES])
def test_fast_and_portable_paths_agree_for_any_threads_and_rows(order) -> None:
    lib = _lib()
    x, w, b = _operands(11, 200, 1500, True, True, seed=3)  # 11 rows: passes of 4, 4 and 3; 200 outputs: a partial strip
    for weight in (w, w + 1e-3):  # bf16 strips, float32 strips
        packed, bf16 = exact.pack(lib, weight)
        want = exact.product(lib, x, packed, bf16, 200, 384, b, portable=True, order=order)
        if lib.koe_exact_vectorized():
            assert torch.equal(exact.product(lib, x, packed, bf16, 200, 384, b, order=order), want)
        before = torch.get_num_threads()
        for threads in (1, 3):
            torch.set_num_threads(threads)
            try:
                assert torch.equal(exact.product(lib, x, packed, bf16, 200, 384, b, order=order), want)
                assert torch.equal(exact.product(lib, x[4:5], packed, bf16, 200, 384, b, order=order), want[4:5])  # a row alone = in a batch
            finally:
                torch.set_num_threads(before)  # the suite's thread count (the parity tests depend on it)


def test_packing_from_bf16_storage_equals_packing_the_widened_weight() -> None:
    lib = _lib()
    w = torch.randn(100, 300, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    a, a16 = exact.pack(lib, w)
    b, b16 = exact.pack(lib, w.float())
    assert a16 and b16 and torch.equal(a, b)


def test_layers_are_replaced_only_with_torch_bits(monkeypatch) -> None:
    """Here (the suite sets MKL_CBWR=AUTO,STRICT) the kernel gives torch's bits or is not used at all;
    a replaced layer equals F.linear bit for bit on real-size shapes, decode rows (1, and 2 or 3 in a
    small batch) and prefill rows."""
    orders = exact.summation_orders()
    assert (exact.unused_reason() is None) == (orders is not None)
    assert check_exact_products().status == ("ok" if orders else "warn")
    net = torch.nn.Sequential(torch.nn.Linear(1024, 3072, bias=False), torch.nn.Linear(3072, 1024, bias=True))
    with torch.no_grad():
        for layer in net:
            layer.weight.copy_(layer.weight.to(torch.bfloat16).float())
    x = torch.randn(40, 1024, generator=torch.Generator().manual_seed(1))
    want = [net(x[:m]) for m in (1, 2, 3, 40)]
    replaced = exact.exact_linears(net)
    if orders is None:  # another BLAS or order here: torch's layers stay
        assert replaced == 0 and all(type(layer) is torch.nn.Linear for layer in net)
        return
    assert replaced == 2 and all(isinstance(layer, exact.ExactLinear) for layer in net)
    assert net[0].bf16 and net[1].bf16  # bf16 values: half the bytes (the bias stays float32)
    assert all(torch.equal(net(x[:m]), w) for m, w in zip((1, 2, 3, 40), want))


@pytest.mark.parametrize("inputs", [100, 384, 385, 401, 512, 640, 767, 768, 1000, 1153])
def test_a_layer_sums_its_inputs_in_the_blocks_torch_uses_for_its_width(inputs) -> None:
    """In a CHAIN order of blocks of B (384 on the Intel Xeon measured, 192 on the AMD EPYC for 4+ rows):
    one block up to B inputs, two near-equal halves below 2B (512 -> 256 + 256 for 384), then Bs:
    `input_block` gives torch's bits for each width (bias or not), for every number of rows."""
    orders = exact.summation_orders()
    if orders is None:
        pytest.skip(f"the exact kernel does not apply here: {exact.unused_reason()}")
    for order in orders:
        if order.kind == exact.CHAIN:
            block = order.block
            assert exact.input_block(inputs, block) == (inputs if inputs <= block else (inputs + 1) // 2 if inputs < 2 * block else block)
    layer = torch.nn.Linear(inputs, 96, bias=inputs % 2 == 0)
    assert exact._agrees_with(exact.ExactLinear(layer, exact._library(), orders), layer)


def test_layers_that_read_one_input_become_one_product_with_the_same_bits() -> None:
    """q|k|v and gate|up (koe.nn's attention and gated MLP offer the slots) are packed as one layer
    each; the attention and the MLP give the bits they gave with torch's separate layers, for any
    output counts (800 is not a whole number of 64-output strips) and with biases."""
    from koe.nn.attention import Attention
    from koe.nn.mlp import GatedMLP

    if exact.summation_orders() is None:
        pytest.skip(f"the exact kernel does not apply here: {exact.unused_reason()}")
    g = torch.Generator().manual_seed(3)
    attention = Attention(512, 4, 2, 128, qk_norm_eps=1e-6, qkv_bias=True)
    mlp = GatedMLP(512, 800)
    with torch.no_grad():
        for p in (*attention.parameters(), *mlp.parameters()):
            p.copy_(torch.randn(p.shape, generator=g).to(torch.bfloat16).float())
    x = torch.randn(1, 5, 512, generator=g)
    positions = torch.arange(5)[None]
    from koe.nn.rotary import RotaryEmbedding

    cos, sin = RotaryEmbedding(128, 10000.0)(positions, torch.float32)
    want = attention(x, cos, sin), mlp(x), attention(x[:, :1], cos[:, :, :1], sin[:, :, :1])
    assert exact.exact_linears(attention) == 4 and exact.exact_linears(mlp) == 3
    assert isinstance(attention.qkv_proj, exact.ExactLinear) and not hasattr(attention, "q_proj")
    assert isinstance(mlp.gate_up_proj, exact.ExactLinear) and mlp.gate_up_proj.out_features == 1600
    got = attention(x, cos, sin), mlp(x), attention(x[:, :1], cos[:, :, :1], sin[:, :, :1])
    assert all(torch.equal(a, b) for a, b in zip(got, want))


class _StoredTransposed(torch.nn.Module):
    """A GPT-2 `Conv1D`: weight (in, out), `addmm(bias, x, weight)`."""

    def __init__(self, n_in: int, n_out: int, g: torch.Generator) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_in, n_out, generator=g) * 0.05)
        self.bias = torch.nn.Parameter(torch.randn(n_out, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)


def test_layers_stored_transposed_are_replaced_with_their_own_products_bits() -> None:
    """A layer type named in `transposed` (weight (in, out), `addmm(bias, x, weight)`, as GPT-2's
    Conv1D) becomes an ExactLinear with that product's bits, for decode and prefill rows; a plain
    linear of the same shape beside it is checked on its own; types not named stay."""
    if exact.summation_orders() is None:
        pytest.skip(f"the exact kernel does not apply here: {exact.unused_reason()}")
    g = torch.Generator().manual_seed(4)
    net = torch.nn.Sequential(_StoredTransposed(640, 1920, g), _StoredTransposed(1920, 640, g), torch.nn.Linear(640, 1920))
    x = torch.randn(40, 640, generator=g)
    want = [(net[1](net[0](x[:m])), net[2](x[:m])) for m in (1, 2, 3, 40)]
    assert exact.exact_linears(net) == 1 and isinstance(net[0], _StoredTransposed)
    assert exact.exact_linears(net, transposed=(_StoredTransposed,)) == 2
    assert all(isinstance(layer, exact.ExactLinear) for layer in net)
    assert (net[0].in_features, net[0].out_features) == (640, 1920) and not net[0].bf16
    assert all(torch.equal(net[1](net[0](x[:m])), a) and torch.equal(net[2](x[:m]), b) for m, (a, b) in zip((1, 2, 3, 40), want))


@pytest.mark.parametrize("size", [32, 128, 100, 1024, 2048, 3000])
def test_the_norm_gives_torch_rmsnorm_bits_for_rows_of_any_width_and_layout(size) -> None:
    """koe_exact_rmsnorm sums the squares in torch's cascade order (`norm_lanes()` wide vectors): the
    same bits as koe.nn.norm.RMSNorm for rows of any width and scale, one token or many, and for a
    view that is not contiguous (q's heads out of a joined q|k|v product)."""
    from koe.nn.norm import RMSNorm

    if exact.norm_lanes(RMSNorm) is None:
        pytest.skip("the exact norm does not apply here")
    g = torch.Generator().manual_seed(size)
    norms = torch.nn.Sequential(RMSNorm(size, eps=1e-6), RMSNorm(size, eps=1e-5))
    with torch.no_grad():
        for norm in norms:
            norm.weight.copy_(torch.randn(size, generator=g))
    joined = torch.randn(3, 5, 4 * size, generator=g) * torch.logspace(-4, 4, 5)[None, :, None]
    inputs = [joined[..., :size], joined[:1, :1, :size], joined[..., size : 3 * size].reshape(3, 5, 2, size)]
    want = [[norm(x) for x in inputs] for norm in norms]
    assert exact.exact_norms(norms, RMSNorm) == 2 and all(isinstance(n, exact.ExactRMSNorm) for n in norms)
    for norm, expected in zip(norms, want):
        assert all(torch.equal(norm(x), e) for x, e in zip(inputs, expected))


def test_the_kernel_can_be_turned_off(monkeypatch) -> None:
    from koe.nn.norm import RMSNorm

    monkeypatch.setenv("KOE_EXACT_KERNEL", "0")
    exact.summation_orders.cache_clear()
    exact.norm_lanes.cache_clear()
    try:
        assert exact.summation_orders() is None and exact.norm_lanes(RMSNorm) is None
        net = torch.nn.Sequential(torch.nn.Linear(64, 64), RMSNorm(64))
        assert exact.exact_linears(net) == 0 and type(net[0]) is torch.nn.Linear
        assert exact.exact_norms(net, RMSNorm) == 0 and type(net[1]) is RMSNorm
        assert "KOE_EXACT_KERNEL=0" in exact.unused_reason()
        check = check_exact_products()  # what `koe doctor` says
        assert check.status == "warn" and "KOE_EXACT_KERNEL=0" in check.detail
    finally:
        monkeypatch.delenv("KOE_EXACT_KERNEL")
        exact.summation_orders.cache_clear()
        exact.norm_lanes.cache_clear()


def test_without_mkl_strict_mode_nothing_changes_bits() -> None:
    """A process without MKL_CBWR (torch's products sum in another order on some CPUs): the kernel is
    used only where it still agrees, so products equal torch's either way."""
    code = (
        "import torch\nfrom koe.runtime import exact\n"
        "net = torch.nn.Linear(1024, 2048)\nx = torch.randn(3, 1024)\nwant = net(x)\n"
        "seq = torch.nn.Sequential(net)\nreplaced = exact.exact_linears(seq)\n"
        "assert torch.equal(seq(x), want), 'bits moved'\nprint(exact.summation_orders(), replaced)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "MKL_CBWR"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_bf16_embedding_widened_on_lookup_gives_the_converted_tables_rows() -> None:
    """The text embedding stays bf16 as stored: the rows it gives equal those of the table converted
    to float32 whole (what upstream's float32 load does), `Module.float()` leaves its table alone,
    and anything but a plain bf16 embedding is left as it is."""
    table = torch.nn.Embedding(1000, 48, dtype=torch.bfloat16)
    owner = torch.nn.Module()
    owner.emb, owner.plain = table, torch.nn.Embedding(10, 4)
    ids = torch.tensor([[0, 999, 5, 5], [17, 3, 0, 2]])
    want = torch.nn.functional.embedding(ids, table.weight.detach().float())
    assert exact.widen_on_lookup(owner, "emb") and not exact.widen_on_lookup(owner, "plain")
    owner.float()
    assert owner.emb.bits.dtype == torch.int16 and type(owner.plain) is torch.nn.Embedding
    got = owner.emb(ids)
    assert got.dtype == torch.float32 and torch.equal(got, want)
