"""SnakeBeta in one pass (`snake.c`), for the fast codec of the opt-in modes, with a torch fallback.

`snake.c` is built into koe's kernel library (`koe.runtime.kernels`: the machine's C compiler,
`-march=native`, cached by source, flags, compiler and CPU). `KOE_KERNELS=0`, no compiler or a
failed build leave `snake_beta` on a torch chain with the same formula as upstream's (torch's sin);
`describe()` names what runs ("koe-c" or "torch").
"""

from __future__ import annotations

import torch

from koe.runtime import kernels

_DTYPES = {torch.float32: 0, torch.bfloat16: 1}


def library():
    """koe's kernel library (with `koe_snake_beta`), or None: then `snake_beta` runs on torch (the
    kernels' log says why, once)."""
    return kernels.library()


def describe() -> str:
    """What `snake_beta` runs on here: "koe-c" (snake.c) or "torch"."""
    return "koe-c" if library() is not None else "torch"


def snake_beta(x: torch.Tensor, alpha: torch.Tensor, inv_beta: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """x + sin(x * alpha)^2 * inv_beta per channel of x (B, C, T), as `out_dtype` (default x's).

    `alpha` and `inv_beta` are (C,) float32: the activation's exp(alpha) and 1 / (exp(beta) + 1e-9),
    computed once by the caller. float32 or bfloat16 in and out; other dtypes, devices or layouts
    take the torch chain.
    """
    out_dtype = out_dtype or x.dtype
    lib = library()
    if lib is None or x.device.type != "cpu" or x.dtype not in _DTYPES or out_dtype not in _DTYPES or x.dim() != 3:
        return _torch_snake_beta(x, alpha, inv_beta).to(out_dtype)
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=out_dtype)
    lib.koe_snake_beta(
        x.data_ptr(),
        out.data_ptr(),
        x.shape[0] * x.shape[1],
        x.shape[1],
        x.shape[2],
        alpha.data_ptr(),
        inv_beta.data_ptr(),
        _DTYPES[x.dtype],
        _DTYPES[out_dtype],
    )
    return out


def _torch_snake_beta(x: torch.Tensor, alpha: torch.Tensor, inv_beta: torch.Tensor) -> torch.Tensor:
    """The same formula as torch ops, in float32, one buffer updated in place."""
    x = x.float()
    y = x * alpha[:, None]
    y.sin_().square_().mul_(inv_beta[:, None])
    return y.add_(x)
