"""Process-wide settings koe's long-lived processes ask for before torch loads (standard library only).

`prefer_huge_pages()`: torch puts its large CPU tensors (2 MB and up: a model's weights, once
converted from the bf16 files as released, or quantized) on transparent huge pages when
`THP_MEM_ALLOC_ENABLE=1` is in the environment as torch loads. A decoded frame reads every weight,
and with 4 KB pages the page walks cost much of the read bandwidth on some machines: on the
project's 2-core VM the exact 0.6B decode went from about 530 to 434 ms per frame and the machine's
read probe from 20 to 27 GB/s (docs/PERFORMANCE.md). The price is load time: the kernel zeroes
(and, in its `madvise` defrag mode, compacts memory for) each 2 MB page as the weights are written,
2.1 s -> 7.1 s for the 0.6B there. So `koe serve`, which loads once and decodes for hours, asks for
it; one-shot commands do not (`THP_MEM_ALLOC_ENABLE=1 koe speak ...` does). It changes where
memory lives, never a computed bit. An environment that sets the variable itself is left alone.

`reproducible_blas()`: torch's CPU matrix products run on Intel MKL, whose kernels may choose their
summation order by the memory alignment of the operands, so the same product of the same numbers
can differ in the last bits from one allocation to the next. Seen on an AMD EPYC (AVX-512) VM with
torch 2.13: VoxCPM's samples moved by ~1e-7 between two loads of the same weights in one process,
and so did upstream's, which breaks "seed=N gives upstream's samples bit for bit" on both sides.
MKL's strict conditional reproducibility (`MKL_CBWR=AUTO,STRICT`) makes each product depend on its
inputs only (no measurable cost here: fp32 matrix-vector 19.8 vs 19.7 GB/s), and it is the order
koe's exact kernel reproduces (koe.runtime.exact). koe's command line sets it before torch loads,
and so does `import koe` (through the environment before torch loads; through MKL's own
`mkl_cbwr_set` when torch has loaded but MKL has not run yet), unless the environment says
otherwise. Once MKL has run, its mode is fixed for the process: set the variable before anything
multiplies, on both sides of a comparison.

`keep_freed_memory()`: glibc's malloc hands large freed blocks back to the kernel (each tensor over
its threshold is a fresh mapping), so the next tensor of that size faults its pages in again, one
per 4 KB, at about a microsecond each on the project's VM. The codec's activations are megabytes
(96 channels x 1,920 samples a frame): a streamed chunk of 4 frames took ~30,000 page faults and
12 frames ~50,000, 10-20% of the codec's time. koe's commands ask malloc to serve blocks up to
32 MB (its maximum) from its heap and to keep up to 512 MB freed there for reuse (`mallopt`); an
environment with its own `MALLOC_*_` settings is left alone. Never a computed bit; the price is
memory that stays with the process after a peak (at most the trim threshold).
"""

from __future__ import annotations

import os
import sys

HUGE_PAGES = "THP_MEM_ALLOC_ENABLE"
MKL_REPRODUCIBILITY = "MKL_CBWR"


def prefer_huge_pages() -> bool:
    """Ask torch for huge pages, unless the environment already says, or torch has loaded (then too
    late for this process). True when the setting is in force for torch here."""
    if HUGE_PAGES not in os.environ and "torch" not in sys.modules and sys.platform.startswith("linux"):
        os.environ[HUGE_PAGES] = "1"
    return os.environ.get(HUGE_PAGES) == "1"


def reproducible_blas() -> bool:
    """Ask MKL for alignment-independent results (`MKL_CBWR=AUTO,STRICT`), unless the environment
    already says: in the environment before torch loads; after, through MKL itself while it has
    not run yet (see the module docstring). True when a strict setting is in force for this process
    (as far as the environment says: where MKL had run, `strict_blas_refused()` tells)."""
    if MKL_REPRODUCIBILITY not in os.environ and ("torch" not in sys.modules or _set_mkl_strict()):
        os.environ[MKL_REPRODUCIBILITY] = "AUTO,STRICT"  # read by MKL as torch loads, and by the processes this one starts
    return "STRICT" in os.environ.get(MKL_REPRODUCIBILITY, "")


MKL_CBWR_BRANCH, MKL_CBWR_AUTO, MKL_CBWR_STRICT = 1, 2, 0x10000  # mkl_cbwr_get / mkl_cbwr_set's values
_refused = False


def _mkl():
    """torch's own MKL (linked into libtorch_cpu, its functions under their `mkl_serv_` names), or None."""
    import ctypes

    torch = sys.modules.get("torch")
    path = os.path.join(os.path.dirname(getattr(torch, "__file__", None) or ""), "lib", "libtorch_cpu.so")
    try:
        lib = ctypes.CDLL(path)
        return lib if hasattr(lib, "mkl_serv_cbwr_set") and hasattr(lib, "mkl_serv_cbwr_get") else None
    except OSError:  # another platform's build (no MKL: nothing to set)
        return None


def _set_mkl_strict() -> bool:
    """MKL's strict mode set at run time (torch loaded). MKL refuses once it has run."""
    global _refused
    lib = _mkl()
    if lib is None:
        return False
    ok = lib.mkl_serv_cbwr_set(MKL_CBWR_AUTO | MKL_CBWR_STRICT) == 0
    _refused = not ok
    return ok


def mkl_branch() -> int | None:
    """MKL's reproducibility branch in force in this process (1: off, 2: auto, ...), None without
    torch's MKL. Asking does not start MKL; call it after torch has loaded."""
    lib = _mkl()
    return None if lib is None else int(lib.mkl_serv_cbwr_get(MKL_CBWR_BRANCH))


def strict_blas_refused() -> bool:
    """Whether `reproducible_blas` found MKL already run (its mode then fixed without strictness)."""
    return _refused


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
KEEP_BLOCKS_UP_TO = 32 << 20  # glibc's largest mmap threshold on 64-bit
KEEP_FREED_UP_TO = 512 << 20


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to reuse freed tensors' memory instead of returning it (see the module
    docstring), unless the environment sets malloc's own tunables. True when in force."""
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ) or "GLIBC_TUNABLES" in os.environ:
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, KEEP_BLOCKS_UP_TO)) and bool(libc.mallopt(M_TRIM_THRESHOLD, KEEP_FREED_UP_TO))
    except (OSError, AttributeError):  # not glibc
        return False
