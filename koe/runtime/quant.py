"""Opt-in int8 and int4 linear layers for the CPU (they change float bits; never on the exact path).

`Int8Linear`: int8 weights, one symmetric scale per output channel (`w ≈ scale[n] * q[n, k]`,
`q` in [-127, 127]). `Int4Linear`: 4-bit weights, one scale per output row and group of 64
inputs (`w ≈ scale[n, g] * q`, `q` in [-8, 7], the group's largest magnitude at -8). Both run on
koe's own kernels (`koe.runtime.kernels`, C built for this CPU on first use): the input row is
quantized to int8 at each call (int8: one scale per row; int4: one per group of 64 inputs) and multiplied in integers (AVX-512 VNNI where
the CPU has it), the same bits on every path and thread count (see `qgemv.c` for the exact steps).

Why own kernels: a frame of decoding is matrix-vector products that read every weight, so bytes
read set the speed. Of torch 2.13's CPU kernels, fbgemm's dynamic int8 linear reaches ~18 GB/s of
int8 weights here and `aten._weight_int4pack_mm_for_cpu` is compute bound (int4 barely ahead of
fbgemm's int8); the weight-only `aten._weight_int8pack_mm` is ~7x slower than fp32 `F.linear`.
Where the kernels cannot be built (no C compiler), int8 falls back to fbgemm's dynamic linear
(per-tensor 7-bit activations: other bits, named in `kernel`) and int4 is refused with the reason.
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


GROUP = 64  # inputs per int4 weight scale and per int4 activation scale (int8: one activation scale per row)
BLOCK4 = 128  # inputs per int4 storage block: int4 rows are padded to a multiple of it


def quantize_groups_int4(weight: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K) float weight, K a multiple of 128 (and of `group`) -> (packed nibbles uint8 (N, K/2),
    float32 scales (N, K/group)): per group the weight of largest magnitude maps to -8 exactly
    (scale = -that / 8), the others to the nearest of [-8, 7]; stored as q + 8, in each 128-weight
    block byte j holding weight j (low nibble) and weight j + 64 (high nibble), so one 64-byte load
    and two masks give the kernel two groups of 64 in order."""
    w = weight.detach().to(torch.float32)
    n, k = w.shape
    wg = w.view(n, k // group, group)
    extreme = wg.gather(-1, wg.abs().argmax(-1, keepdim=True)).squeeze(-1)
    scale = torch.where(extreme == 0, torch.ones_like(extreme), extreme / -8.0)
    q = (torch.round(wg / scale[..., None]).clamp_(-8, 7) + 8).to(torch.uint8).view(n, k // BLOCK4, 2, BLOCK4 // 2)
    packed = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(n, k // 2).contiguous()
    return packed, scale.contiguous()


def dequantize_int4(packed: torch.Tensor, scale: torch.Tensor, group: int = GROUP) -> torch.Tensor:
    """The float weight `Int4Linear` multiplies by (the inverse of `quantize_groups_int4`)."""
    n, half = packed.shape
    blocks = packed.view(n, half // (BLOCK4 // 2), 1, BLOCK4 // 2)
    q = torch.cat([blocks & 15, blocks >> 4], dim=2).view(n, half * 2).to(torch.float32) - 8
    return (q.view(n, -1, group) * scale[..., None]).view(n, half * 2)


def _joined(parts: list[nn.Linear], quantize) -> tuple[torch.Tensor, torch.Tensor]:
    """Each part's weight through `quantize` (-> (q, scale)), the results stacked along the outputs."""
    quantized = [quantize(m.weight) for m in parts]
    return torch.cat([q for q, _ in quantized]), torch.cat([s for _, s in quantized])


def kernel_quantized(lib, bits: int, weight: torch.Tensor, padded: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`weight` (N, K; float32 or bfloat16 as stored, others widened first) quantized by koe's C
    kernel (`quantize.c`) in the layout the products read: int8 -> (bytes q + 128 (N, padded),
    scales (N,)) as `quantize_per_channel` then padding; int4 -> (packed (N, padded / 2), scales
    (N, padded / 64)) as `quantize_groups_int4` on the padded weight. Same bits as those, one pass
    over the weight, no float32 copy of it."""
    w = weight.detach()
    if w.dtype not in (torch.float32, torch.bfloat16):
        w = w.to(torch.float32)
    w = w.contiguous()
    n, k = w.shape
    q = torch.empty(n, padded if bits == 8 else padded // 2, dtype=torch.uint8)
    scale = torch.empty(n) if bits == 8 else torch.empty(n, padded // GROUP)
    fn = lib.koe_quantize_int8 if bits == 8 else lib.koe_quantize_int4
    fn(w.data_ptr(), int(w.dtype == torch.bfloat16), n, k, padded, q.data_ptr(), scale.data_ptr(), torch.get_num_threads())
    return q, scale


class _KernelLinear(nn.Module):
    """Shared by the int8 and int4 layers: several linears reading the same input become one
    product with their outputs side by side (each quantized on its own first: per-row and per-group
    scales make that the same as quantizing the concatenation, without copying float weights);
    inputs are padded with zeros to a multiple of `PAD` (64; int4: 128) where the width is not one.

    `kernel` names what runs the product: `koe.runtime.kernels.describe()` ("koe-avx512vnni",
    "koe-avx2", "koe-portable") or, int8 without koe's kernels, "fbgemm"."""

    PAD = GROUP

    def __init__(self, parts: list[nn.Linear]) -> None:
        super().__init__()
        self.in_features, self.out_features = parts[0].in_features, sum(m.out_features for m in parts)
        self.padded_in = self.in_features + (-self.in_features % self.PAD)
        self.bias = None if parts[0].bias is None else torch.cat([m.bias.detach().to(torch.float32) for m in parts])

    def _row(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        if x2.dtype != torch.float32:
            x2 = x2.float()
        if self.padded_in != self.in_features:
            x2 = torch.nn.functional.pad(x2, (0, self.padded_in - self.in_features))
        return x2 if x2.is_contiguous() else x2.contiguous()

    def _bind(self, fn, q: torch.Tensor, scale: torch.Tensor, group: int) -> None:
        """Keep the weights and what every call passes the kernel `fn` but the input and output (a
        call costs a few microseconds of Python; a frame makes hundreds). `group`: inputs per
        activation scale."""
        from koe.runtime import kernels

        self.q, self.scale, self.group, self._fn, self.kernel = q.contiguous(), scale.contiguous(), group, fn, kernels.describe()
        self.weight_bytes = self.q.numel() + self.scale.numel() * 4
        self._consts = (self.q.data_ptr(), self.scale.data_ptr(), self.out_features, group, None if self.bias is None else self.bias.data_ptr())

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        x2 = self._row(x)
        rows = x2.shape[0]
        y = torch.empty(rows, self.out_features)
        w, s, n, group, bias = self._consts
        self._fn(x2.data_ptr(), rows, self.padded_in, w, s, n, group, bias, y.data_ptr(), torch.get_num_threads())
        return y.view(*x.shape[:-1], n)


class Int8Linear(_KernelLinear):
    """A drop-in for `nn.Linear` (float32 in and out) with int8 weights; see the module docstring."""

    def __init__(self, linear: nn.Linear | list[nn.Linear], reduce_range: bool = True) -> None:
        from koe.runtime import kernels

        parts = linear if isinstance(linear, list) else [linear]
        super().__init__(parts)
        lib = kernels.library()
        self._packed = None
        if lib is not None:  # one activation scale per row: the integer sum runs the whole row
            self._bind(lib.koe_q8_linear, *_joined(parts, lambda w: kernel_quantized(lib, 8, w, self.padded_in)), self.padded_in)
            return
        q, scale = _joined(parts, quantize_per_channel)
        with warnings.catch_warnings():  # torch marks quantized tensors deprecated; fbgemm's packing still takes one
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0)
        self._packed = torch.ops.quantized.linear_prepack(qweight, self.bias)
        self.reduce_range, self.kernel, self.weight_bytes = reduce_range, "fbgemm", q.numel() + scale.numel() * 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._packed is None:
            return self._product(x)
        shape = x.shape
        y = torch.ops.quantized.linear_dynamic(x.reshape(-1, shape[-1]).to(torch.float32), self._packed, self.reduce_range)
        return y.view(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights, int8 activations per row, kernel={self.kernel}"


class Int4Linear(_KernelLinear):
    """A drop-in for `nn.Linear` (float32 in and out) with 4-bit weights in groups of 64 inputs;
    see the module docstring. Needs koe's C kernels (`KernelUnavailable` says why not)."""

    PAD = BLOCK4

    def __init__(self, linear: nn.Linear | list[nn.Linear]) -> None:
        from koe.runtime import kernels

        parts = linear if isinstance(linear, list) else [linear]
        super().__init__(parts)
        lib = kernels.library()
        if lib is None:
            raise kernels.KernelUnavailable(f"precision int4 runs on koe's CPU kernels, which cannot be used here: {kernels.unavailable_reason()}")
        self._bind(lib.koe_q4_linear, *_joined(parts, lambda w: kernel_quantized(lib, 4, w, self.padded_in)), GROUP)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._product(x)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int4 weights per {GROUP}, int8 activations per {GROUP}"


LAYERS = {"int8": Int8Linear, "int4": Int4Linear}


class KernelRMSNorm(nn.Module):
    """`koe.nn.norm.RMSNorm` (float32) on koe's C kernel, for the int8 / int4 modes: one call instead
    of six small torch ops (a frame has hundreds of norms). Its sum of squares adds in another
    order than torch's mean, so the last bits differ from the exact path's norm."""

    def __init__(self, norm: nn.Module, lib) -> None:
        super().__init__()
        self.weight = norm.weight.detach().to(torch.float32).contiguous()
        self.eps = float(norm.eps)
        self._fn = lib.koe_rmsnorm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        if x2.dtype != torch.float32:
            x2 = x2.float()
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        y = torch.empty_like(x2)
        self._fn(x2.data_ptr(), x2.shape[0], x2.shape[1], self.weight.data_ptr(), self.eps, y.data_ptr())
        return y.view(x.shape)


def kernel_norms(module: nn.Module, norm_type: type) -> int:
    """Replace every `norm_type` (`koe.nn.norm.RMSNorm`: a float32 RMSNorm with `weight` and `eps`)
    under `module` by `KernelRMSNorm`, in place, where koe's kernels are available; returns how
    many were replaced."""
    from koe.runtime import kernels

    lib = kernels.library()
    if lib is None:
        return 0
    plan = [(owner, name, child) for owner in module.modules() for name, child in owner.named_children() if type(child) is norm_type]
    for owner, name, child in plan:
        setattr(owner, name, KernelRMSNorm(child, lib))
    return len(plan)


FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def quantize_linears(module: nn.Module, skip: tuple[str, ...] = (), fuse: bool = True, mode: str = "int8") -> int:
    """Replace every `nn.Linear` under `module` (names not starting with a `skip` prefix) by
    `Int8Linear` (`mode` "int8") or `Int4Linear` ("int4"), in place; returns how many `nn.Linear`
    were replaced.

    With `fuse`, every attention gets one q|k|v product (`qkv_proj`) and every gated MLP one
    gate|up product (`gate_up_proj`) in place of the separate layers: a module takes part when it
    offers the empty slot (`qkv_proj = None` beside `q_proj`, `k_proj`, `v_proj`; `gate_up_proj =
    None` beside `gate_proj`, `up_proj`), as `koe.nn`'s attention and gated MLP do. In int8 this
    changes nothing numerically (per-row weight scales, and the activation is quantized from the
    same input either way) and halves the calls. koe's C quantizer splits each matrix's rows over
    torch's threads; fbgemm's fallback quantizes with torch ops, one layer per thread."""
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
    from koe.runtime import kernels

    if kernels.library() is not None:
        built = [LAYERS[mode](job[3]) for job in plan]
    else:
        with ThreadPoolExecutor(max(1, torch.get_num_threads())) as pool:
            built = list(pool.map(lambda job: LAYERS[mode](job[3]), plan))
    for (owner, slot, parts, _), layer in zip(plan, built):
        for part in parts:
            if part != slot:  # a layer replaced under its own name keeps its place (Sequential order)
                delattr(owner, part)
        setattr(owner, slot, layer)
    return sum(len(job[3]) for job in plan)
