"""One vocabulary of numeric precisions for every family, one parser, and the wiring that puts a
model's declared backbone in a mode.

The modes (`PRECISIONS`): "fp32" is exact (upstream's bits on the CPU); "bf16" runs weights and
compute in bfloat16; "int8" and "int4" quantize the backbone's linear layers onto koe's CPU kernels
(`koe.runtime.quant`). The three opt-in modes change float bits; each family's measured error is in
docs/precision.md. Users type the names torch prints too ("float32", "bfloat16"): `parse` takes them.

A family opts in by declaring its backbone (`Backbone`: the module whose linear layers and norms
the modes rewrite, the linears the quantized modes keep float, the bfloat16 embeddings read row by row, and the C
decoder step where it has one) and calling `plan` before it reads its weights and `apply` after;
`Capabilities.precisions` says which modes a model offers, so a request for another is refused
before anything loads (`check`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the vocabulary and the parser stay torch-free: the service checks requests with them
    import torch
    from torch import nn

PRECISIONS = ("fp32", "bf16", "int8", "int4")  # fp32 = exact
QUANTIZED = ("int8", "int4")  # CPU modes, on koe's kernels
FLOAT_ONLY = ("fp32", "bf16")  # what a family without a declared backbone offers
ALIASES = {"float32": "fp32", "exact": "fp32", "bfloat16": "bf16"}
REPORTED = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8", "int4": "int4"}  # the name results carry in metadata["precision"]


class UnsupportedPrecision(ValueError):
    """A precision this model cannot run (or no precision at all); `offered` names the ones it can."""

    def __init__(self, message: str, offered: tuple[str, ...] = PRECISIONS) -> None:
        super().__init__(message)
        self.offered = offered


def parse(precision: str | None) -> str | None:
    """A user's precision -> its name in `PRECISIONS` (None stays None: the model's default dtype)."""
    if precision is None:
        return None
    name = str(precision).strip().lower()
    name = ALIASES.get(name, name)
    if name not in PRECISIONS:
        raise UnsupportedPrecision(f"unknown precision {precision!r}; use {_words(PRECISIONS)}")
    return name


def check(precision: str | None, offered: Iterable[str], model: str = "this model") -> str | None:
    """`parse`, then refuse a mode `model` does not offer, naming the ones it does."""
    mode = parse(precision)
    offered = tuple(offered)
    if mode is not None and mode not in offered:
        raise UnsupportedPrecision(f"precision={precision!r} is not offered for {model}: use {_words(offered)}", offered)
    return mode


def _words(names: tuple[str, ...]) -> str:
    named = [f"{n} (exact)" if n == "fp32" else n for n in names]
    return ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else named[0]


DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16", "half": "float16"}


def float_dtype(dtype: str | torch.dtype | None, offered: tuple[torch.dtype, ...], model: str = "this model") -> torch.dtype:
    """A `load(dtype=...)` for a family whose default is float32 on every device (None, "auto"):
    a torch dtype or its name ("float32", "bf16", "half", ...), one of `offered`."""
    import torch

    name = "float32" if dtype is None or dtype == "auto" else DTYPES.get(str(dtype).strip().lower())
    value = dtype if isinstance(dtype, torch.dtype) else getattr(torch, name) if name else None
    if value not in offered:
        raise ValueError(f"dtype {dtype!r} is not offered for {model}: {' or '.join(str(d).removeprefix('torch.') for d in offered)}")
    return value


def reported(mode: str | None, dtype: torch.dtype) -> str:
    """What a result's `metadata["precision"]` says: the quantized mode, else the float dtype's name."""
    return mode if mode in QUANTIZED else str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class Backbone:
    """What a family declares so the precision layer can rewrite it: `module` holds the linear
    layers (every `nn.Linear` under it; int8 / int4 leave float those whose names start with a
    `keep_float` prefix, the exact path takes them all: the same bits) and the norms
    (every `norm` under it: `koe.nn.norm.RMSNorm`, float32 with `weight` and `eps`; None: its
    norms are of another kind, a LayerNorm, and stay torch's in every mode); `embeddings`
    are (owner, name) bfloat16 tables read a few rows at a time, widened on lookup instead of
    converted whole; `kernel_steps(module)` hands its decoder stacks to koe's C step in the int8 /
    int4 modes, where the backbone has one."""

    module: nn.Module
    norm: type[nn.Module] | None
    keep_float: tuple[str, ...] = ()
    embeddings: tuple[tuple[nn.Module, str], ...] = ()
    kernel_steps: Callable[[nn.Module], None] | None = None


@dataclass(frozen=True)
class Plan:
    """A load's numeric plan, made before the weights are read (`plan`)."""

    mode: str | None  # a `PRECISIONS` name, None: the family's default dtype
    dtype: torch.dtype  # the float parts' dtype
    packed: bool = False  # fp32 on the CPU with koe's exact kernels: the declared linears and norms run there, the same bits

    @property
    def quantized(self) -> bool:
        return self.mode in QUANTIZED

    @property
    def load_dtype(self) -> torch.dtype | None:
        """The dtype to read the weights in; None: as stored (int8 / int4 and the packed exact path
        read bf16 releases as they are: no float32 copy of the layers about to be quantized or
        packed; `apply` then makes the rest float32, which converting at load would have given)."""
        return None if self.quantized or self.packed else self.dtype

    @property
    def reported(self) -> str:
        return reported(self.mode, self.dtype)


def plan(precision: str | None, device: torch.device, default: torch.dtype, offered: Iterable[str] = PRECISIONS, model: str = "this model") -> Plan:
    """The plan for `load(precision=...)` on `device`: `default` is the family's dtype when no
    precision is given (its `dtype` argument, resolved). Quantized modes are CPU modes; the exact
    path is packed where this process's torch products are koe's exact kernel's (`koe.runtime.exact`)."""
    import torch

    from koe.runtime import exact

    mode = check(precision, offered, model)
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32 if mode is not None else default
    if mode in QUANTIZED and device.type != "cpu":
        raise UnsupportedPrecision(f"precision={mode!r} is a CPU mode (koe's CPU kernels); on a GPU use bf16", tuple(offered))
    packed = device.type == "cpu" and dtype == torch.float32 and mode not in QUANTIZED and exact.summation_orders() is not None
    return Plan(mode, dtype, packed)


def apply(plan: Plan, model: nn.Module, backbones: Iterable[Backbone]) -> str | None:
    """Put each declared backbone of `model` (loaded in `plan.load_dtype`) in the plan's mode;
    returns what runs its products (`metadata["kernel"]`: "koe-exact-bf16", "koe-avx512vnni", ...;
    None: torch's own). The exact path keeps torch's bits (each layer shape and norm checked);
    int8 / int4 quantize the linears (joined q|k|v and gate|up where the modules offer the slot),
    run the norms in C and, where the backbone has it, the whole decoder step."""
    from koe.runtime import exact

    backbones = list(backbones)
    if not (plan.packed or plan.quantized):
        return None
    for b in backbones:
        for owner, name in b.embeddings:  # bf16 as stored, rows widened as looked up: the same values
            exact.widen_on_lookup(owner, name)
    if plan.packed:
        for b in backbones:
            exact.exact_linears(b.module)
        kinds = {k for b in backbones if (k := exact.describe(b.module)) is not None}
        model.float()
        for b in backbones:
            if b.norm is not None:
                exact.exact_norms(b.module, b.norm)
        return None if not kinds else kinds.pop() if len(kinds) == 1 else "koe-exact"
    from koe.runtime.quant import LAYERS, kernel_norms, quantize_linears

    for b in backbones:
        quantize_linears(b.module, skip=b.keep_float, mode=plan.mode)
    model.float()
    for b in backbones:
        if b.norm is not None:
            kernel_norms(b.module, b.norm)
        if b.kernel_steps is not None:
            b.kernel_steps(b.module)
    layers = (m for b in backbones for m in b.module.modules() if isinstance(m, tuple(LAYERS.values())))
    return next((m.kernel for m in layers), None)
