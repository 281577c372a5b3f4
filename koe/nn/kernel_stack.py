"""A decoder stack of the int8 / int4 modes, stepped by one C call (`koe_stack_step`, decoder.c).

In those modes (opt-in, `koe.runtime.quant`) a decoder stack's linears are koe's kernel layers and
its norms run in C already; what is left around them per layer is ~30 small torch ops (q/k norms,
rotary, cache concatenation, attention, SwiGLU, residuals). `KernelStack` hands the whole stack to
C: one call runs every layer for the new positions of every row, reading the same quantized weights
the modules hold, with the keys and values in a `KernelCache` written in place. It computes what
the modules compute, in other float orders (see decoder.c): the modes' results change within float
rounding, are deterministic, and do not depend on the thread count or on the other rows of a batch.

A stack takes part when every layer is `koe.nn.decoder.DecoderLayer` with fused q|k|v and gate|up
kernel products (int8 or int4 on koe's kernels), causal, no sliding window, no layer scales.
"""

from __future__ import annotations

import ctypes

import torch
from torch import nn

from koe.runtime.quant import Int4Linear, Int8Linear

_P, _I = ctypes.c_void_p, ctypes.c_int64


class _QMat(ctypes.Structure):
    _fields_ = [("w", _P), ("ws", _P), ("bias", _P), ("n", _I), ("k", _I), ("padded_k", _I), ("group", _I), ("bits", _I)]


class _QLayer(ctypes.Structure):
    _fields_ = [("input_norm", _P), ("post_norm", _P), ("q_norm", _P), ("k_norm", _P), ("qkv", _QMat), ("o", _QMat), ("gate_up", _QMat), ("down", _QMat)]


class _QStack(ctypes.Structure):
    _fields_ = [
        ("layers", _I),
        ("hidden", _I),
        ("heads", _I),
        ("kv_heads", _I),
        ("head_dim", _I),
        ("intermediate", _I),
        ("layer", ctypes.POINTER(_QLayer)),
        ("final_norm", _P),
        ("eps", ctypes.c_float),
    ]


def _kernel_layer(m: nn.Module | None) -> bool:
    return isinstance(m, (Int8Linear, Int4Linear)) and getattr(m, "q", None) is not None


def _mat(m: Int8Linear | Int4Linear) -> _QMat:
    bits = 4 if isinstance(m, Int4Linear) else 8
    bias = 0 if m.bias is None else m.bias.data_ptr()
    return _QMat(m.q.data_ptr(), m.scale.data_ptr(), bias, m.out_features, m.in_features, m.padded_in, m.group, bits)


def _norm_weight(norm: nn.Module | None) -> torch.Tensor | None:
    return None if norm is None else norm.weight.detach().to(torch.float32).contiguous()


def why_not(stack: nn.Module) -> str | None:
    """Why `stack` (`.layers` of DecoderLayer, `.norm`) cannot be stepped in C; None when it can."""
    from koe.nn.decoder import DecoderLayer

    eps = {float(stack.norm.eps)}
    for i, layer in enumerate(stack.layers):
        if type(layer) is not DecoderLayer:
            return f"layer {i} is not a koe DecoderLayer"
        att, mlp = layer.self_attn, layer.mlp
        if not all(_kernel_layer(m) for m in (att.qkv_proj, att.o_proj, mlp.gate_up_proj, mlp.down_proj)):
            return f"layer {i}'s products are not fused int8/int4 kernel layers"
        if layer.self_attn_layer_scale is not None or att.window is not None or not att.causal:
            return f"layer {i} has layer scales, a sliding window or bidirectional attention"
        if (att.q_norm is None) != (att.k_norm is None) or att.head_dim > 512:
            return f"layer {i}'s q/k norms or head size are not supported"
        eps |= {float(layer.input_layernorm.eps), float(layer.post_attention_layernorm.eps)}
        eps |= set() if att.q_norm is None else {float(att.q_norm.eps), float(att.k_norm.eps)}
    return None if len(eps) == 1 else "the stack's norms use different eps"


class KernelStack:
    """The C description of one decoder stack (pointers into its modules' weights, which it keeps
    alive), and the caches it steps."""

    def __init__(self, stack: nn.Module, lib) -> None:
        reason = why_not(stack)
        if reason is not None:
            raise ValueError(f"this decoder stack cannot run on koe's C step: {reason}")
        first = stack.layers[0].self_attn
        self.num_layers, self.kv_heads, self.head_dim = len(stack.layers), first.num_kv_heads, first.head_dim
        self._fn = lib.koe_stack_step
        self._keep: list[object] = []  # the float copies of norm weights the C side points into
        layers = (_QLayer * self.num_layers)()
        for dst, layer in zip(layers, stack.layers):
            att, mlp = layer.self_attn, layer.mlp
            norms = [self._ptr(_norm_weight(n)) for n in (layer.input_layernorm, layer.post_attention_layernorm, att.q_norm, att.k_norm)]
            dst.input_norm, dst.post_norm, dst.q_norm, dst.k_norm = norms
            dst.qkv, dst.o, dst.gate_up, dst.down = (_mat(m) for m in (att.qkv_proj, att.o_proj, mlp.gate_up_proj, mlp.down_proj))
            self._keep += [att.qkv_proj, att.o_proj, mlp.gate_up_proj, mlp.down_proj]
        hidden = stack.layers[0].input_layernorm.weight.shape[0]
        intermediate = stack.layers[0].mlp.down_proj.in_features
        final = self._ptr(_norm_weight(stack.norm))
        self._layers = layers
        self.desc = _QStack(self.num_layers, hidden, first.num_heads, self.kv_heads, self.head_dim, intermediate, layers, final, float(stack.norm.eps))

    def _ptr(self, t: torch.Tensor | None) -> int | None:
        if t is None:
            return None
        self._keep.append(t)
        return t.data_ptr()

    def new_cache(self, batch: int, capacity: int, start: torch.Tensor | None = None) -> KernelCache:
        return KernelCache(self, batch, capacity, start)


class KernelCache:
    """Keys and values of every layer (layers, B, Hkv, capacity, D), written in place by the C step;
    the capacity doubles (one copy) when a step needs more. `start` (B,) is each row's first real
    position (left padding before it is never attended); `length` the positions written so far.

    Passing it as a decoder stack's cache sends the stack through C (`DecoderStack.run`)."""

    def __init__(self, stack: KernelStack, batch: int, capacity: int, start: torch.Tensor | None = None) -> None:
        self.stack, self.batch, self.length = stack, batch, 0
        self.start = None if start is None else start.to(torch.int64).contiguous()
        self._alloc(max(1, capacity))

    def _alloc(self, capacity: int) -> None:
        shape = (self.stack.num_layers, self.batch, self.stack.kv_heads, capacity, self.stack.head_dim)
        keys, values = torch.empty(shape), torch.empty(shape)
        if self.length:
            keys[..., : self.length, :] = self.keys[..., : self.length, :]
            values[..., : self.length, :] = self.values[..., : self.length, :]
        self.keys, self.values, self.capacity = keys, values, capacity

    @classmethod
    def gather(cls, rows: list[tuple[KernelCache, int]], ahead: int = 1) -> KernelCache:
        """A cache of rows taken from other caches of one stack (`(cache, row)` each), in that order:
        each row's real positions (from its start to its cache's length) copied right-aligned, so
        the rows can step on together (a row's start then marks where its own positions begin),
        with room for `ahead` more positions before the capacity doubles. The copies change no
        value: a row attends to the same keys and values as before."""
        stack = rows[0][0].stack
        used = [c.length - (0 if c.start is None else int(c.start[r])) for c, r in rows]
        length = max(used)
        out = cls(stack, len(rows), length + max(1, ahead), torch.tensor([length - u for u in used]))
        for i, ((c, r), u) in enumerate(zip(rows, used)):
            if c.stack is not stack:
                raise ValueError("rows of caches of different decoder stacks cannot be gathered")
            out.keys[:, i, :, length - u : length] = c.keys[:, r, :, c.length - u : c.length]
            out.values[:, i, :, length - u : length] = c.values[:, r, :, c.length - u : c.length]
        out.length = length
        return out

    def step(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) -> the stack's final-norm output (B, T, C) for the next T positions; cos, sin:
        rotary tables broadcastable to (B, 1, T, D)."""
        b, t, _ = x.shape
        if b != self.batch:
            raise ValueError(f"a cache for {self.batch} rows was given {b}")
        if self.length + t > self.capacity:
            self._alloc(max(2 * self.capacity, self.length + t))
        d = self.stack.head_dim
        x = x.to(torch.float32).contiguous()
        cos = cos.to(torch.float32).expand(b, 1, t, d).reshape(b, t, d).contiguous()
        sin = sin.to(torch.float32).expand(b, 1, t, d).reshape(b, t, d).contiguous()
        out = torch.empty_like(x)
        start = None if self.start is None else self.start.data_ptr()
        self.stack._fn(
            ctypes.byref(self.stack.desc),
            x.data_ptr(),
            b,
            t,
            cos.data_ptr(),
            sin.data_ptr(),
            self.keys.data_ptr(),
            self.values.data_ptr(),
            self.capacity,
            self.length,
            start,
            out.data_ptr(),
            torch.get_num_threads(),
        )
        self.length += t
        return out


def attach(stack: nn.Module) -> KernelStack | None:
    """A `KernelStack` for `stack` when koe's kernels are loaded and the stack qualifies (`why_not`),
    else None (the modules then run as they are)."""
    from koe.runtime import kernels

    lib = kernels.library()
    if lib is None or why_not(stack) is not None:
        return None
    return KernelStack(stack, lib)
