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
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn


def quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K) float weight -> (int8 (N, K), float32 scales (N,)), symmetric per output channel."""
    w = weight.detach().to(torch.float32)
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale


class Int8Linear(nn.Module):
    """A drop-in for `nn.Linear` (float32 in and out) with int8 weights; see the module docstring.

    Given several linears that read the same input, it computes all of them in one product, their
    outputs side by side (each is quantized on its own first: per-channel scales make that the same
    as quantizing the concatenation, without copying the float weights)."""

    def __init__(self, linear: nn.Linear | list[nn.Linear], reduce_range: bool = True) -> None:
        super().__init__()
        parts = linear if isinstance(linear, list) else [linear]
        self.in_features, self.out_features = parts[0].in_features, sum(m.out_features for m in parts)
        quantized = [quantize_per_channel(m.weight) for m in parts]
        q = quantized[0][0] if len(parts) == 1 else torch.cat([qp for qp, _ in quantized])
        scale = quantized[0][1] if len(parts) == 1 else torch.cat([sp for _, sp in quantized])
        with warnings.catch_warnings():  # torch marks quantized tensors deprecated; fbgemm's packing still takes one
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0)
        bias = None if parts[0].bias is None else torch.cat([m.bias.detach().to(torch.float32) for m in parts])
        self._packed = torch.ops.quantized.linear_prepack(qweight, bias)
        self.reduce_range = reduce_range
        self.weight_bytes = q.numel() + scale.numel() * 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = torch.ops.quantized.linear_dynamic(x.reshape(-1, shape[-1]).to(torch.float32), self._packed, self.reduce_range)
        return y.view(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights, dynamic int8 activations"


FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def quantize_linears(module: nn.Module, skip: tuple[str, ...] = (), fuse: bool = True) -> int:
    """Replace every `nn.Linear` under `module` (names not starting with a `skip` prefix) by
    `Int8Linear`, in place; returns how many `nn.Linear` were replaced.

    With `fuse`, every attention gets one q|k|v product (`qkv_proj`) and every gated MLP one
    gate|up product (`gate_up_proj`) in place of the separate layers: a module takes part when it
    offers the empty slot (`qkv_proj = None` beside `q_proj`, `k_proj`, `v_proj`; `gate_up_proj =
    None` beside `gate_proj`, `up_proj`), as `koe.nn`'s attention and gated MLP do. In int8 this
    changes nothing numerically (per-channel weight scales, and the activation is quantized once
    per call from the same input either way) and halves the calls. fbgemm's packing runs on one
    core per layer, so layers are packed on as many threads as torch uses."""
    plan: list[tuple[nn.Module, str, tuple[str, ...], list[nn.Linear]]] = []  # (owner, new name, old names, linears)
    taken: set[int] = set()
    for name, m in module.named_modules():
        if skip and name.startswith(skip):
            continue
        for slot, parts in FUSED.items() if fuse else ():
            linears = [getattr(m, part, None) for part in parts]
            if slot in m.__dict__ and getattr(m, slot) is None and all(isinstance(x, nn.Linear) for x in linears):
                plan.append((m, slot, parts, linears))
                taken.update(id(x) for x in linears)
        for leaf, child in m.named_children():
            if isinstance(child, nn.Linear) and id(child) not in taken and not f"{name}.{leaf}".lstrip(".").startswith(skip):
                plan.append((m, leaf, (leaf,), [child]))
    with ThreadPoolExecutor(max(1, torch.get_num_threads())) as pool:
        built = list(pool.map(lambda job: Int8Linear(job[3]), plan))
    for (owner, slot, parts, _), layer in zip(plan, built):
        for part in parts:
            if part != slot:  # a layer replaced under its own name keeps its place (Sequential order)
                delattr(owner, part)
        setattr(owner, slot, layer)
    return sum(len(job[3]) for job in plan)
