"""The int8 / int4 modes' C decoder step (koe/runtime/kernels/decoder.c, koe/nn/kernel_stack.py):
it computes what the kernel-layer modules compute (within float rounding), its bits do not depend
on the thread count, on the cache's capacity or on the other rows of a batch (left padding
included), and stacks it cannot run are left to the modules with the reason."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.kernel_stack import KernelCache, attach, why_not
from koe.nn.norm import RMSNorm
from koe.nn.rotary import RotaryEmbedding
from koe.runtime import kernels
from koe.runtime.kv_cache import ConcatCache
from koe.runtime.quant import kernel_norms, quantize_linears

SPEC = DecoderSpec(
    hidden_size=96, intermediate_size=160, num_layers=3, num_heads=4, num_kv_heads=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=1e4
)  # 96 and 160: products padded to 128 and 192


class Stack(nn.Module):
    """What koe.nn.kernel_stack reads: `.layers` of DecoderLayer and a final `.norm`."""

    def __init__(self, spec: DecoderSpec) -> None:
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(spec) for _ in range(spec.num_layers)])
        self.norm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)
        self.rotary = RotaryEmbedding(spec.head_dim, spec.rope_theta)

    def modules_run(self, x: torch.Tensor, positions: torch.Tensor, cache: ConcatCache, mask: torch.Tensor | None = None) -> torch.Tensor:
        cos, sin = self.rotary(positions, x.dtype)
        for layer, layer_cache in zip(self.layers, cache.layers):
            x = layer(x, cos, sin, layer_cache, mask)
        return self.norm(x)

    def kernel_run(self, x: torch.Tensor, positions: torch.Tensor, cache: KernelCache) -> torch.Tensor:
        cos, sin = self.rotary(positions, x.dtype)
        return cache.step(x, cos, sin)


def _stack(mode: str, seed: int = 0, spec: DecoderSpec = SPEC) -> Stack:
    torch.manual_seed(seed)
    stack = Stack(spec)
    with torch.no_grad():
        for p in stack.parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.1 * torch.randn_like(p))  # norm weights near 1
    quantize_linears(stack, mode=mode)
    kernel_norms(stack, RMSNorm)
    return stack


def _steps(stack: Stack, x: torch.Tensor, prompt: int, kernel_cache: KernelCache | None) -> torch.Tensor:
    """The prompt's first `prompt` positions at once, then one position per step; outputs (B, T, C)."""
    b, t, _ = x.shape
    positions = torch.arange(t).expand(b, -1)
    cache = ConcatCache(len(stack.layers)) if kernel_cache is None else kernel_cache
    run = stack.modules_run if kernel_cache is None else stack.kernel_run
    outs = [run(x[:, :prompt], positions[:, :prompt], cache)]
    for i in range(prompt, t):
        outs.append(run(x[:, i : i + 1], positions[:, i : i + 1], cache))
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_the_c_step_computes_what_the_modules_compute(mode: str) -> None:
    stack = _stack(mode)
    kernel = attach(stack)
    assert kernel is not None
    x = torch.randn(2, 9, SPEC.hidden_size, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want = _steps(stack, x, 5, None)
        cache = kernel.new_cache(2, 9)
        got = _steps(stack, x, 5, cache)
    assert cache.length == 9
    assert got.shape == want.shape and got.dtype == torch.float32
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-4), (got - want).abs().max()


def test_bits_do_not_depend_on_threads_capacity_or_batch() -> None:
    stack = _stack("int8", seed=2)
    kernel = attach(stack)
    x = torch.randn(3, 7, SPEC.hidden_size, generator=torch.Generator().manual_seed(3))
    threads = torch.get_num_threads()
    try:
        with torch.inference_mode():
            torch.set_num_threads(1)
            want = _steps(stack, x, 3, kernel.new_cache(3, 7))
            for n in (2, 3):
                torch.set_num_threads(n)
                assert torch.equal(_steps(stack, x, 3, kernel.new_cache(3, 7)), want), n
            # a cache made for one position grows (doubling, copying what it holds) to the same bits
            small = kernel.new_cache(3, 1)
            assert torch.equal(_steps(stack, x, 3, small), want) and small.capacity >= 7
            # each row alone gives its bits in the batch
            for row in range(3):
                assert torch.equal(_steps(stack, x[row : row + 1], 3, kernel.new_cache(1, 7)), want[row : row + 1])
    finally:
        torch.set_num_threads(threads)


def test_a_left_padded_row_gives_its_unpadded_bits() -> None:
    """A batch whose second row has two positions of left padding: the padding is never attended
    (the cache's start), and with the row's own positions its outputs are those of the row alone."""
    stack = _stack("int4", seed=4)
    kernel = attach(stack)
    g = torch.Generator().manual_seed(5)
    long, short = torch.randn(1, 6, SPEC.hidden_size, generator=g), torch.randn(1, 4, SPEC.hidden_size, generator=g)
    batch = torch.cat([long, torch.cat([torch.randn(1, 2, SPEC.hidden_size, generator=g) * 100, short], dim=1)])
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])
    step_x = torch.randn(2, 1, SPEC.hidden_size, generator=g)
    with torch.inference_mode():
        cache = kernel.new_cache(2, 8, start=torch.tensor([0, 2]))
        cos, sin = stack.rotary(positions, torch.float32)
        prompt = cache.step(batch, cos, sin)
        cos, sin = stack.rotary(torch.tensor([[6], [4]]), torch.float32)
        step = cache.step(step_x, cos, sin)
        alone = kernel.new_cache(1, 8)
        want_prompt = stack.kernel_run(short, torch.arange(4)[None], alone)
        want_step = stack.kernel_run(step_x[1:], torch.tensor([[4]]), alone)
    assert torch.equal(prompt[1, 2:], want_prompt[0]) and torch.equal(step[1], want_step[0])
    assert torch.isfinite(prompt).all()  # the padding's own queries see no key: zeros, not NaN


def test_stacks_the_c_step_cannot_run_are_left_to_the_modules(monkeypatch) -> None:
    plain = Stack(SPEC)  # float32 linears
    assert "not fused int8/int4 kernel layers" in why_not(plain) and attach(plain) is None
    unfused = Stack(SPEC)
    quantize_linears(unfused, fuse=False)
    assert why_not(unfused) is not None
    windowed = _stack("int8")
    windowed.layers[1].self_attn.window = 16
    assert "sliding window" in why_not(windowed) and attach(windowed) is None
    with pytest.raises(ValueError, match="cannot run on koe's C step"):
        from koe.nn.kernel_stack import KernelStack

        KernelStack(windowed, kernels.library())
    monkeypatch.setenv("KOE_KERNELS", "0")
    kernels._load.cache_clear()
    try:
        stack = Stack(SPEC)
        quantize_linears(stack)  # fbgemm's int8 layers
        assert attach(stack) is None
    finally:
        kernels._load.cache_clear()


def test_a_cache_refuses_another_batch_size() -> None:
    stack = _stack("int8")
    cache = attach(stack).new_cache(2, 4)
    cos, sin = stack.rotary(torch.zeros(1, 1, dtype=torch.long), torch.float32)
    with pytest.raises(ValueError, match="for 2 rows was given 1"):
        cache.step(torch.randn(1, 1, SPEC.hidden_size), cos, sin)
