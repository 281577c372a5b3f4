"""Opt-in int8 linear layers for the CPU (changes float bits; never on the exact path).

`Int8Linear` stores its weight as int8, one symmetric scale per output channel
(`w ≈ scale[n] * q[n, k]`, `q` in [-127, 127]), packed once for fbgemm. Each call quantizes its
input dynamically (per call, 8-bit affine, `reduce_range` so fbgemm's u8×s8 pair sums cannot
saturate), multiplies in integers and rescales to float32: `torch.ops.quantized.linear_dynamic`.

Why this kernel: a frame of decoding is matrix-vector products that read every weight, so bytes
read set the speed, and int8 weights read 4x fewer bytes than fp32. Of the CPU kernels in torch
2.13, fbgemm's dynamic linear is the one that turns that into speed for one token; the weight-only
`aten._weight_int8pack_mm` (float activations) measured ~7x slower than fp32 `F.linear` here, and
bf16 `F.linear` reaches about half of fp32's bandwidth on this CPU, so halving the bytes gains
nothing (see docs/PERFORMANCE.md).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn


def quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K) float weight -> (int8 (N, K), float32 scales (N,)), symmetric per output channel."""
    w = weight.detach().to(torch.float32)
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale


class Int8Linear(nn.Module):
    """A drop-in for `nn.Linear` (float32 in and out) with int8 weights; see the module docstring."""

    def __init__(self, linear: nn.Linear, reduce_range: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        q, scale = quantize_per_channel(linear.weight)
        with warnings.catch_warnings():  # torch marks quantized tensors deprecated; fbgemm's packing still takes one
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0)
        bias = None if linear.bias is None else linear.bias.detach().to(torch.float32).clone()
        self._packed = torch.ops.quantized.linear_prepack(qweight, bias)
        self.reduce_range = reduce_range
        self.weight_bytes = q.numel() + scale.numel() * 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = torch.ops.quantized.linear_dynamic(x.reshape(-1, shape[-1]).to(torch.float32), self._packed, self.reduce_range)
        return y.view(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights, dynamic int8 activations"


def _concat(linears: list[nn.Linear]) -> nn.Linear:
    """One `nn.Linear` whose outputs are those of `linears` side by side (same input)."""
    first = linears[0]
    fused = nn.Linear(first.in_features, sum(m.out_features for m in linears), bias=first.bias is not None)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([m.weight.detach().float() for m in linears]))
        if first.bias is not None:
            fused.bias.copy_(torch.cat([m.bias.detach().float() for m in linears]))
    return fused


def fuse_projections(module: nn.Module, skip: tuple[str, ...] = ()) -> int:
    """Give every attention under `module` one int8 q|k|v product (`qkv_proj`) and every gated MLP
    one gate|up product (`gate_up_proj`), dropping the separate layers; returns how many were fused.
    A module takes part when it offers the empty slot (`qkv_proj = None` beside `q_proj`, `k_proj`,
    `v_proj`; `gate_up_proj = None` beside `gate_proj`, `up_proj`), as `koe.nn.qwen3`'s do.

    In int8 this changes nothing numerically: weights are quantized per output channel and the
    activation is quantized once per call from the same input either way. It halves the calls."""
    groups = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
    count = 0
    for name, m in list(module.named_modules()):
        if skip and name.startswith(skip):
            continue
        for slot, parts in groups.items():
            linears = [getattr(m, part, None) for part in parts]
            if slot in m.__dict__ and getattr(m, slot) is None and all(isinstance(x, nn.Linear) for x in linears):
                setattr(m, slot, Int8Linear(_concat(linears)))
                for part in parts:
                    delattr(m, part)
                count += 1
    return count


def quantize_linears(module: nn.Module, skip: tuple[str, ...] = (), fuse: bool = True) -> int:
    """Replace every `nn.Linear` under `module` (names not starting with a `skip` prefix) by
    `Int8Linear`, in place, first fusing q|k|v and gate|up where `fuse`; returns how many
    `nn.Linear` were replaced."""
    before = sum(isinstance(m, nn.Linear) for _, m in module.named_modules())
    if fuse:
        fuse_projections(module, skip)
    targets = [(name, m) for name, m in module.named_modules() if isinstance(m, nn.Linear) and not name.startswith(skip)]
    for name, linear in targets:
        parent_name, _, leaf = name.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        setattr(parent, leaf, Int8Linear(linear))
    return before - sum(isinstance(m, nn.Linear) for _, m in module.named_modules())
