"""The exact path's float32 linear layers on koe's CPU kernel (`kernels/exact.c`), with torch's bits.

A decoded frame reads every weight of the talker and the code predictor once, and the exact
path must give upstream's bits, i.e. those of torch's float32 product. Under MKL's strict
conditional reproducibility (`MKL_CBWR=AUTO,STRICT`, which every `koe` command, `import koe` and
the test suite ask for before MKL runs: koe.runtime.process) that product sums each output in one
order on a given CPU, which may depend on how many input rows the product has (`Order`; measured: on an Intel Xeon, blocks of 384
inputs, within a block one fused multiply-add per input in order, the blocks added in order, for
any rows; on an AMD EPYC, MKL's matrix-vector product for one row sums four interleaved partial
sums of rounded products, two or three rows the same without the leading product, four or more
rows blocks of 192). `ExactLinear` runs that order on weights packed at load for one linear stream
per 64 outputs, in bfloat16 where every weight is a bfloat16 value (released checkpoints: the
float32 path widens bf16 exactly, so half the bytes give the same products), else in float32.

Nothing here is assumed about the machine: `summation_orders()` finds the order for each number of
rows by comparing the kernel with torch's own product in this process, and each layer shape is
checked the same way, on its first layer's own weights, before layers of that shape are replaced
(`exact_linears`). Where they differ (another BLAS, MKL without `MKL_CBWR`, a CPU without AVX-512,
`KOE_EXACT_KERNEL=0`), the layers stay torch's `nn.Linear`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.runtime import process

BLOCKS = (384, 192, 256, 512, 128, 320, 448, 640, 768, 1024)  # candidate block sizes, the measured ones first
STRIP = 64  # output rows per packed strip (exact.c)
CHAIN, LANES_LEAD, LANES = 0, 1, 2  # exact.c's summation orders (KOE_ORDER_*)
ROW_CLASSES = ((1,), (2, 3), (4, 5))  # input rows that share one order (the last class: 4 or more), each checked on these counts


@dataclass(frozen=True)
class Order:
    """How torch's float32 product sums each output over its inputs (`kernels/exact.c`): `CHAIN`, in
    blocks of `block` inputs (see `input_block`), or four interleaved partial sums of rounded
    products, the first product leading (`LANES_LEAD`) or not (`LANES`)."""

    kind: int
    block: int = 0

    def for_inputs(self, inputs: int) -> tuple[int, int]:
        """(kind, block) for a layer of `inputs` inputs, as the kernel takes them."""
        return self.kind, input_block(inputs, self.block) if self.kind == CHAIN else 0

    def __str__(self) -> str:
        if self.kind == CHAIN:
            return f"blocks of {self.block}"
        return "4 interleaved sums" + (", the first product leading" if self.kind == LANES_LEAD else "")


CANDIDATES = (*(Order(CHAIN, b) for b in BLOCKS), Order(LANES_LEAD), Order(LANES))


def _turned_off() -> bool:
    return os.environ.get("KOE_EXACT_KERNEL", "1").strip() == "0"


def _library():
    if _turned_off():
        return None
    from koe.runtime import kernels

    lib = kernels.library()
    return lib if lib is not None and lib.koe_exact_vectorized() else None


def pack(lib, weights: torch.Tensor | list[torch.Tensor]) -> tuple[torch.Tensor, bool]:
    """(N, K) float32 or bfloat16 weight, or several stacked (N_i, K) ones, -> (the strips of their
    rows end to end, whether they hold bfloat16). Stacked weights are packed one after another where
    each but the last fills whole strips (no copy of them is made), else joined first."""
    parts = [w.detach() for w in (weights if isinstance(weights, list) else [weights])]
    if any(w.dtype not in (torch.float32, torch.bfloat16) for w in parts) or len({w.dtype for w in parts}) > 1:
        parts = [w.to(torch.float32) for w in parts]
    if any(w.shape[0] % STRIP for w in parts[:-1]):
        parts = [torch.cat(parts)]
    parts = [w.contiguous() for w in parts]
    k, threads = parts[0].shape[1], torch.get_num_threads()
    bf16 = all(w.dtype == torch.bfloat16 or lib.koe_exact_count_not_bf16(w.data_ptr(), w.numel(), threads) == 0 for w in parts)
    strips = [-(-w.shape[0] // STRIP) for w in parts]
    packed = torch.empty(sum(strips) * k * STRIP, dtype=torch.int16 if bf16 else torch.float32)
    at = 0
    for w, count in zip(parts, strips):
        lib.koe_exact_pack(w.data_ptr(), int(w.dtype == torch.bfloat16), w.shape[0], k, int(bf16), packed[at:].data_ptr(), threads)
        at += count * k * STRIP
    return packed, bf16


def product(
    lib, x: torch.Tensor, packed: torch.Tensor, bf16: bool, n: int, block: int, bias: torch.Tensor | None = None, portable: bool = False, order: int = CHAIN
) -> torch.Tensor:
    """x (M, K) float32, contiguous -> x W^T (+ bias), (M, n), on the packed weight, summed in `order`
    (CHAIN: in blocks of `block`)."""
    rows, k = x.shape
    y = torch.empty(rows, n)
    lib.koe_exact_linear(
        x.data_ptr(),
        rows,
        k,
        packed.data_ptr(),
        int(bf16),
        n,
        block,
        order,
        None if bias is None else bias.data_ptr(),
        y.data_ptr(),
        torch.get_num_threads(),
        int(portable),
    )
    return y


def _agrees(lib, order: Order, rows: tuple[int, ...], n: int, k: int, bias: bool, seed: int = 0) -> bool:
    """Does the kernel in `order` give torch's bits for a random (n, k) layer on random inputs of each
    of `rows` rows, with bf16-valued and with float32 weights? From a generator of its own (the
    process's torch generator is untouched)."""
    g = torch.Generator().manual_seed(seed)
    b = torch.randn(n, generator=g) if bias else None
    x = torch.randn(max(rows), k, generator=g)
    kind, block = order.for_inputs(k)
    for weight in (torch.randn(n, k, generator=g).to(torch.bfloat16).float(), torch.randn(n, k, generator=g)):
        packed, bf16 = pack(lib, weight)
        for m in rows:
            if not torch.equal(product(lib, x[:m], packed, bf16, n, block, b, order=kind), F.linear(x[:m], weight, b)):
                return False
    return True


def unused_reason() -> str | None:
    """Why the exact path keeps torch's products in this process (None: koe's kernel runs them)."""
    if summation_orders() is not None:
        return None
    if _turned_off():
        return "KOE_EXACT_KERNEL=0 turns it off"
    from koe.runtime import kernels

    if kernels.library() is None:
        return f"koe's CPU kernels are unavailable: {kernels.unavailable_reason()}"
    if not kernels.library().koe_exact_vectorized():
        return "this CPU has no AVX-512"
    if process.strict_blas_refused():
        return "MKL had already run when koe was imported, so its products keep an order that depends on memory alignment: import koe before any torch product, or set MKL_CBWR=AUTO,STRICT"
    if "STRICT" not in os.environ.get("MKL_CBWR", ""):
        return f"torch's products sum in another order here (MKL_CBWR={os.environ.get('MKL_CBWR', '')!r}; the kernel follows MKL's AUTO,STRICT order)"
    return "torch's products sum in an order the kernel does not reproduce on this machine"


def input_block(inputs: int, block: int) -> int:
    """The block in which a product over `inputs` inputs sums in blocks of `block` (a `CHAIN` order):
    all of them in one up to `block`; between `block` and twice it, two near-equal halves (the first
    one input longer when the count is odd: 512 -> 256 + 256, 401 -> 201 + 200); else `block` each,
    the last one shorter (measured on the Intel Xeon for every count from 1 to 3,000 tried, and on
    the AMD EPYC; each layer shape is still checked against torch before it is used)."""
    if inputs <= block:
        return max(inputs, 1)
    return (inputs + 1) // 2 if inputs < 2 * block else block


@functools.cache
def summation_orders() -> tuple[Order, ...] | None:
    """The order in which this process's torch float32 products sum, one per `ROW_CLASSES` entry, when
    the kernel gives their bits with it (checked here for each class's numbers of rows, on layers
    with and without bias whose inputs span several blocks, and whose outputs split evenly across
    threads: MKL's matrix-vector product on AMD sums the last few outputs of a thread's share
    otherwise); None: the exact path keeps torch's products (see the module docstring)."""
    lib = _library()
    if lib is None:
        return None
    orders = []
    for rows in ROW_CLASSES:
        found = next((o for o in CANDIDATES if _agrees(lib, o, rows, 192, 1000, False) and _agrees(lib, o, rows, 128, 2100, True, seed=1)), None)
        if found is None:
            return None
        orders.append(found)
    return tuple(orders)


def row_class(rows: int) -> int:
    """Which `ROW_CLASSES` entry a product of `rows` input rows falls in."""
    return 0 if rows <= ROW_CLASSES[0][-1] else 1 if rows <= ROW_CLASSES[1][-1] else 2


def describe_orders(orders: tuple[Order, ...]) -> str:
    """The orders in words, for `koe doctor`: "blocks of 384" where all rows share one."""
    if len(set(orders)) == 1:
        return str(orders[0])
    names = ("1 row", "2-3 rows", "4+ rows")
    return "; ".join(f"{name}: {order}" for name, order in zip(names, orders, strict=True))


class ExactLinear(nn.Module):
    """A drop-in for a float32 `nn.Linear` on the CPU: the same output bits, from packed weights
    (bfloat16 where the weights are bfloat16 values). Built by `exact_linears`."""

    def __init__(self, linear: nn.Linear, lib, orders: tuple[Order, ...]) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed, self.bf16 = pack(lib, linear.weights if isinstance(linear, _Joined) else linear.weight)
        self.bias = None if linear.bias is None else linear.bias.detach().to(torch.float32).contiguous()
        self.orders, self.weight_bytes = orders, self.packed.numel() * self.packed.element_size()
        self._sums = tuple(o.for_inputs(self.in_features) for o in orders)  # (kind, block) per row class
        self._fn = lib.koe_exact_linear
        self._consts = (self.packed.data_ptr(), int(self.bf16), self.out_features, None if self.bias is None else self.bias.data_ptr())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features)
        if x2.dtype != torch.float32:
            raise TypeError(f"ExactLinear takes float32 input, got {x2.dtype}")
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        rows = x2.shape[0]
        y = torch.empty(rows, self.out_features)
        w, bf16, n, bias = self._consts
        kind, block = self._sums[row_class(rows)]
        self._fn(x2.data_ptr(), rows, self.in_features, w, bf16, n, block, kind, bias, y.data_ptr(), torch.get_num_threads(), 0)
        return y.view(*x.shape[:-1], n)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, {'bf16' if self.bf16 else 'float32'} strips, {describe_orders(self.orders)}"


def describe(module: nn.Module) -> str | None:
    """The name results carry for the products under `module`: "koe-exact-bf16" (every `ExactLinear`
    reads bf16 strips), "koe-exact-fp32" (float32 strips), "koe-exact" (both); None: none there."""
    kinds = {"bf16" if layer.bf16 else "fp32" for layer in module.modules() if isinstance(layer, ExactLinear)}
    if not kinds:
        return None
    return f"koe-exact-{kinds.pop()}" if len(kinds) == 1 else "koe-exact"


def _file_backed() -> list[tuple[int, int]]:
    """This process's file-backed mappings (address ranges), from /proc/self/maps; [] elsewhere."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    ranges = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[4] != "0":  # an inode: a file's pages
            lo, hi = (int(a, 16) for a in fields[0].split("-"))
            ranges.append((lo, hi))
    return ranges


def _release(tensor: torch.Tensor, mapped: list[tuple[int, int]]) -> None:
    """Hand the pages of a tensor that views a mapped weights file back to the kernel once it is packed
    (MADV_DONTNEED: the file's pages stay in the page cache, and a later read maps them again): the
    stored copy does not stay resident beside the packed one. Heap memory is never touched."""
    import ctypes
    import mmap

    begin = tensor.data_ptr()
    end = begin + tensor.numel() * tensor.element_size()
    if not any(a <= begin and end <= b for a, b in mapped):
        return
    lo, hi = -(-begin // mmap.PAGESIZE) * mmap.PAGESIZE, end // mmap.PAGESIZE * mmap.PAGESIZE  # whole pages inside the tensor
    if hi > lo:
        ctypes.CDLL(None).madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), 4)  # MADV_DONTNEED


def _agrees_with(layer: ExactLinear, linear: nn.Linear) -> bool:
    """Does `layer` give `linear`'s float32 product bit for bit (random inputs of each `ROW_CLASSES` row count)?"""
    g = torch.Generator().manual_seed(layer.out_features * 7919 + layer.in_features)
    x = torch.randn(ROW_CLASSES[-1][-1], layer.in_features, generator=g)
    weight = linear.weight.detach().to(torch.float32)
    bias = None if linear.bias is None else linear.bias.detach().to(torch.float32)
    return all(torch.equal(layer(x[:m]), F.linear(x[:m], weight, bias)) for rows in ROW_CLASSES for m in rows)


class _Transposed:
    """A layer that stores its weight (in, out) and computes `addmm(bias, x, weight)` (GPT-2's
    `Conv1D`), seen as the `nn.Linear` it equals: `F.linear(x, weight.T, bias)` is that same call."""

    def __init__(self, layer: nn.Module) -> None:
        self.weight, self.bias = layer.weight.t(), layer.bias
        self.in_features, self.out_features = self.weight.shape[1], self.weight.shape[0]


def exact_linears(module: nn.Module, skip: tuple[str, ...] = (), transposed: tuple[type[nn.Module], ...] = ()) -> int:
    """Replace every `nn.Linear` under `module` (names not starting with a `skip` prefix) by
    `ExactLinear`, in place, where the kernel gives torch's bits (checked on the first layer of each
    shape, with its own weights); returns how many. 0 where the kernel does not apply here
    (`summation_orders()` is None). `transposed`: layer types that hold their weight (in, out), with
    a bias, and compute `torch.addmm(bias, x, weight)` (GPT-2's `Conv1D`): replaced the same way,
    checked against that product. Where a module offers the slot (`qkv_proj = None` beside
    `q_proj`, `k_proj`, `v_proj`; `gate_up_proj = None` beside `gate_proj`, `up_proj`, as `koe.nn`'s
    attention and gated MLP do), the layers that read the same input become one (`_Joined`): one
    call instead of three or two, the same bits. Stored weights that view a mapped file are
    released from memory as they are packed."""
    orders, lib = summation_orders(), _library()
    if orders is None:
        return 0
    from koe.runtime.quant import FUSED

    plan: list[tuple[nn.Module, str, tuple[str, ...], list[nn.Linear]]] = []  # (owner, new name, old names, linears)
    for name, owner in module.named_modules():
        if skip and name.startswith(skip):
            continue
        taken: set[str] = set()
        for slot, parts in FUSED.items():
            linears = [getattr(owner, part, None) for part in parts]
            if slot in owner.__dict__ and getattr(owner, slot) is None and _joinable(linears):
                plan.append((owner, slot, parts, linears))
                taken.update(parts)
        for leaf, child in owner.named_children():
            if leaf in taken or (skip and f"{name}.{leaf}".lstrip(".").startswith(skip)):
                continue
            if type(child) is nn.Linear:
                plan.append((owner, leaf, (leaf,), [child]))
            elif transposed and type(child) in transposed:
                plan.append((owner, leaf, (leaf,), [_Transposed(child)]))
    mapped, verdicts, replaced = _file_backed(), {}, 0
    for owner, slot, parts, linears in plan:
        linear = linears[0] if len(linears) == 1 else _Joined(linears)
        layer = ExactLinear(linear, lib, orders)
        key = (tuple((x.out_features, x.bias is not None, type(x)) for x in linears), linear.in_features, layer.bf16)
        if key not in verdicts:
            verdicts[key] = _agrees_with(layer, linear)
        if verdicts[key]:
            for part in parts:
                if part != slot:
                    delattr(owner, part)
            setattr(owner, slot, layer)
            for x in linears:
                _release(x.weight, mapped)
            replaced += len(linears)
    return replaced


def _joinable(linears: list) -> bool:
    """Layers that can be one product: `nn.Linear`s on the same input width, all with a bias or none."""
    return all(type(x) is nn.Linear for x in linears) and len({(x.in_features, x.bias is None, x.weight.dtype) for x in linears}) == 1


class _Joined:
    """Several linear layers that read the same input (q|k|v, gate|up) as one: their weights (and
    biases) stacked, outputs end to end. Each output is the same sum as in its own layer, so one
    `ExactLinear` made from it gives every part's bits from one call. `weight` (the stacked copy)
    is made only if asked for: the packing reads the parts."""

    def __init__(self, linears: list[nn.Linear]) -> None:
        self.in_features = linears[0].in_features
        self.out_features = sum(x.out_features for x in linears)
        self.weights = [x.weight for x in linears]
        self.bias = None if linears[0].bias is None else torch.cat([x.bias.detach() for x in linears])

    @property
    def weight(self) -> torch.Tensor:
        return torch.cat([w.detach() for w in self.weights])


class WidenedEmbedding(nn.Module):
    """A drop-in for a bfloat16 `nn.Embedding` in a float32 model: the table stays as stored (its bits
    held as int16, which `Module.float()` leaves alone) and the rows looked up are widened to float32,
    which is exact, so the output equals that of the table converted whole, from half the memory and
    no conversion at load (the Qwen3-TTS text embedding: 151,936 rows, 1.2 GB in float32, of which a
    prompt reads a few dozen). Built by `widen_on_lookup`."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.padding_idx = embedding.num_embeddings, embedding.embedding_dim, embedding.padding_idx
        self.register_buffer("bits", embedding.weight.detach().view(torch.int16))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.bits).view(torch.bfloat16).float()

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, bfloat16 rows widened to float32 on lookup"


def widen_on_lookup(owner: nn.Module, name: str) -> bool:
    """Replace `owner.<name>`, a bfloat16 `nn.Embedding` without max_norm, by a `WidenedEmbedding`
    (the same float32 output); False (left as it is) for anything else."""
    embedding = getattr(owner, name)
    if type(embedding) is not nn.Embedding or embedding.weight.dtype != torch.bfloat16 or embedding.max_norm is not None:
        return False
    setattr(owner, name, WidenedEmbedding(embedding))
    return True


NORM_LANES = (8, 16)  # candidate vector widths of torch's float32 sum (8 measured on the Intel Xeon, AVX-512 or not)


@functools.cache
def norm_lanes(norm_type: type[nn.Module]) -> int | None:
    """The vector width with which koe's RMSNorm (`kernels/exact.c`, `koe_exact_rmsnorm`) gives the
    bits of `norm_type` (koe.nn.norm.RMSNorm: `norm_type(size, eps=)` with a `weight`) in this
    process, checked here on random rows of several widths and scales; None: the exact path keeps
    torch's norms."""
    from koe.runtime import kernels

    lib = None if _turned_off() else kernels.library()
    if lib is None:
        return None
    g = torch.Generator().manual_seed(5)
    for lanes in NORM_LANES:
        agree = True
        for n in (128, 1000, 2048):
            norm = norm_type(n, eps=1e-6)
            with torch.no_grad():
                norm.weight.copy_(torch.randn(n, generator=g))
            agree = agree and _norm_agrees_with(ExactRMSNorm(norm, lib, lanes), norm)
        if agree:
            return lanes
    return None


class ExactRMSNorm(nn.Module):
    """A drop-in for an RMSNorm (koe.nn.norm's) on float32 CPU tensors: the same output bits from one C
    call instead of torch's six ops (built by `exact_norms`)."""

    def __init__(self, norm: nn.Module, lib, lanes: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(norm.weight.detach().to(torch.float32).contiguous(), requires_grad=False)
        self.eps, self.lanes, self.size = float(norm.eps), lanes, norm.weight.shape[0]
        self._fn = lib.koe_exact_rmsnorm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError(f"ExactRMSNorm takes float32 input, got {x.dtype}")
        rows = x.reshape(-1, self.size)  # a view where x's rows are evenly spaced (q's or k's heads out of q|k|v)
        if rows.stride(-1) != 1:
            rows = rows.contiguous()
        y = torch.empty(rows.shape)
        self._fn(rows.data_ptr(), rows.shape[0], self.size, rows.stride(0), self.weight.data_ptr(), self.eps, self.lanes, y.data_ptr())
        return y.view(x.shape)

    def extra_repr(self) -> str:
        return f"{self.size}, eps={self.eps}, sums in {self.lanes}-float vectors"


def _norm_agrees_with(layer: ExactRMSNorm, norm: nn.Module) -> bool:
    """Does `layer` give `norm`'s bits on random rows (one token, several, scales 1e-3 to 1e3)?"""
    g = torch.Generator().manual_seed(layer.size)
    x = torch.randn(2, 7, layer.size, generator=g) * torch.logspace(-3, 3, 7)[None, :, None]
    with torch.no_grad():
        return all(torch.equal(layer(rows), norm(rows)) for rows in (x[:1, :1], x))


def exact_norms(module: nn.Module, norm_type: type[nn.Module]) -> int:
    """Replace every `norm_type` (koe.nn.norm.RMSNorm) under `module` by `ExactRMSNorm`, in place,
    where it gives the norm's bits (`norm_lanes`, then each width and eps checked on its first
    norm's own weight); returns how many. 0 where it does not apply here."""
    from koe.runtime import kernels

    lanes = norm_lanes(norm_type)
    if lanes is None:
        return 0
    lib, verdicts, replaced = kernels.library(), {}, 0
    plan = [(owner, name, child) for owner in module.modules() for name, child in owner.named_children() if type(child) is norm_type]
    for owner, name, child in plan:
        layer = ExactRMSNorm(child, lib, lanes)
        key = (layer.size, layer.eps)
        if key not in verdicts:
            verdicts[key] = _norm_agrees_with(layer, child)
        if verdicts[key]:
            setattr(owner, name, layer)
            replaced += 1
    return replaced
