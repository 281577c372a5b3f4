"""SnakeBeta in one pass (`snake.c`), for the fast codec of the opt-in modes, with a torch fallback.

The library is built like koe's other kernels (the machine's C compiler, `-march=native`, cached
under `koe.runtime.kernels.cache_dir()`, keyed by source, flags, compiler and CPU), but on its own:
the activation is elementwise and needs none of the matrix kernels. `KOE_KERNELS=0`, no compiler or
a failed build leave `snake_beta` on a torch chain with the same formula as upstream's (torch's sin);
`describe()` names what runs ("koe-c" or "torch").
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import subprocess
import tempfile
from pathlib import Path

import torch

from koe.runtime.kernels import (
    KernelUnavailable,
    _compiler,
    _compiler_version,
    _cpu_identity,
    cache_dir,
)

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("snake.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
_P, _I = ctypes.c_void_p, ctypes.c_int64
_DTYPES = {torch.float32: 0, torch.bfloat16: 1}


def build() -> Path:
    """The compiled library for this machine, built (atomic rename) when the cache has none."""
    cc = _compiler()
    key = hashlib.sha256("\0".join([SOURCE.read_text(), " ".join(FLAGS), _compiler_version(cc), _cpu_identity()]).encode()).hexdigest()[:16]
    path = cache_dir() / f"libkoe_snake-{key}.so"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".so.part")
    os.close(fd)
    try:
        done = subprocess.run([*cc, *FLAGS, "-o", tmp, str(SOURCE), "-lm"], check=False, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise KernelUnavailable(f"{' '.join(cc)} could not build {SOURCE.name}: {done.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelUnavailable(f"building {SOURCE.name} failed: {e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


@functools.cache
def library() -> ctypes.CDLL | None:
    """The loaded kernel, or None (then `snake_beta` runs on torch; the log says why once)."""
    if os.environ.get("KOE_KERNELS", "1").strip() == "0":
        return None
    try:
        lib = ctypes.CDLL(str(build()))
    except (KernelUnavailable, OSError) as e:
        logger.warning("koe's SnakeBeta kernel is unavailable, the fast codec uses torch's ops: %s", e)
        return None
    lib.koe_snake_beta.argtypes = [_P, _P, _I, _I, _I, _P, _P, _I, _I]
    lib.koe_snake_beta.restype = None
    return lib


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
    lib.koe_snake_beta(x.data_ptr(), out.data_ptr(), x.shape[0] * x.shape[1], x.shape[1], x.shape[2], alpha.data_ptr(), inv_beta.data_ptr(),
                       _DTYPES[x.dtype], _DTYPES[out_dtype])  # fmt: skip
    return out


def _torch_snake_beta(x: torch.Tensor, alpha: torch.Tensor, inv_beta: torch.Tensor) -> torch.Tensor:
    """The same formula as torch ops, in float32, one buffer updated in place."""
    x = x.float()
    y = x * alpha[:, None]
    y.sin_().square_().mul_(inv_beta[:, None])
    return y.add_(x)
