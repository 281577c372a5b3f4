"""koe's own CPU kernels (`qgemv.c`: int8 and int4 weight matrix-vector products and the RMSNorm of
those modes; `decoder.c`: a whole decoder stack's step on them; `quantize.c`: the weights quantized
for them at load; `snake.c`: the fast codec's SnakeBeta, see `snake.py`; `exact.c`: the exact
path's float32 products with torch's bits, see `koe.runtime.exact`), built once per machine
with its C compiler into one library and loaded with ctypes.

The library is compiled for this CPU (`-march=native`), so the cache key holds the compiler, the
CPU's model and flags and the source; it lives in `$KOE_KERNEL_CACHE`, else
`$XDG_CACHE_HOME/koe/kernels`, else `~/.cache/koe/kernels`. Build errors are not fatal: `library()`
returns None and says why once in the log, and callers fall back to torch's kernels (int8) or
refuse with that reason (int4). `KOE_KERNELS=0` turns the kernels off. The compiler is `$CC`, else
`cc`. torch is imported first so that the library's `libgomp.so.1` is the OpenMP runtime torch
already loaded (one thread team for both).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shlex
import subprocess
import tempfile
from pathlib import Path

import torch  # noqa: F401  (first: its libgomp is the one the library binds to)

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
SOURCES = (
    HERE / "qgemv.c",
    HERE / "decoder.c",
    HERE / "snake.c",
    HERE / "quantize.c",
    HERE / "exact.c",
)  # one library; qgemv.h is what decoder.c uses of qgemv.c
HEADERS = (HERE / "qgemv.h",)
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC")
_P, _I = ctypes.c_void_p, ctypes.c_int64
SIGNATURES = {
    "koe_q8_linear": [_P, _I, _I, _P, _P, _I, _I, _P, _P, _I],
    "koe_q4_linear": [_P, _I, _I, _P, _P, _I, _I, _P, _P, _I],
    "koe_rmsnorm": [_P, _I, _I, _P, ctypes.c_float, _P],
    "koe_stack_step": [_P, _P, _I, _I, _P, _P, _P, _P, _I, _I, _P, _P, _I],
    "koe_snake_beta": [_P, _P, _I, _I, _I, _P, _P, _I, _I],
    "koe_quantize_int8": [_P, _I, _I, _I, _I, _P, _P, _I],
    "koe_quantize_int4": [_P, _I, _I, _I, _I, _P, _P, _I],
    "koe_exact_count_not_bf16": [_P, _I, _I],
    "koe_exact_pack": [_P, ctypes.c_int, _I, _I, ctypes.c_int, _P, _I],
    "koe_exact_linear": [_P, _I, _I, _P, ctypes.c_int, _I, _I, ctypes.c_int, _P, _P, _I, ctypes.c_int],
    "koe_exact_vectorized": [],
    "koe_exact_rmsnorm": [_P, _I, _I, _I, _P, ctypes.c_float, _I, _P],
}
RESULTS = {"koe_exact_count_not_bf16": _I, "koe_exact_vectorized": ctypes.c_int}  # the rest return nothing


class KernelUnavailable(RuntimeError):
    """koe's C kernels cannot be built or loaded here; the message says why."""


def cache_dir() -> Path:
    root = os.environ.get("KOE_KERNEL_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "koe" / "kernels"


def _cpu_identity() -> str:
    """The CPU model and feature flags (what -march=native compiles for)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        wanted = [ln for ln in lines if ln.split(":")[0].strip() in ("model name", "flags", "Features", "CPU part")]
        return "\n".join(dict.fromkeys(wanted))
    except OSError:
        return platform.processor() or platform.machine()


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or "cc")


def _compiler_version(cc: list[str]) -> str:
    try:
        return subprocess.run([*cc, "--version"], check=False, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelUnavailable(f"no C compiler ({' '.join(cc)}: {e}); install one (gcc or clang) or set CC") from e


def build(portable: bool = False) -> Path:
    """The compiled library for this machine, building it when the cache has none (atomic rename).
    `portable` builds the plain-C path only (`-DKOE_PORTABLE`: tests compare it with the fast one)."""
    cc = _compiler()
    flags = (*FLAGS, "-DKOE_PORTABLE") if portable else FLAGS
    texts = [p.read_text() for p in (*SOURCES, *HEADERS)]
    key = hashlib.sha256("\0".join([*texts, " ".join(flags), _compiler_version(cc), _cpu_identity()]).encode()).hexdigest()[:16]
    path = cache_dir() / f"libkoe_kernels-{'portable-' if portable else ''}{key}.so"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".so.part")
    os.close(fd)
    try:
        done = subprocess.run([*cc, *flags, "-I", str(HERE), "-o", tmp, *map(str, SOURCES), "-lm"], check=False, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise KernelUnavailable(f"{' '.join(cc)} could not build {', '.join(p.name for p in SOURCES)}: {done.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelUnavailable(f"building the kernels failed: {e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load(path: Path) -> ctypes.CDLL:
    """A built library, its functions typed."""
    lib = ctypes.CDLL(str(path))
    for name, args in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, RESULTS.get(name)
    return lib


@functools.cache
def _load() -> ctypes.CDLL | str:
    if os.environ.get("KOE_KERNELS", "1").strip() == "0":
        return "KOE_KERNELS=0 turns koe's CPU kernels off"
    try:
        lib = load(build())
    except KernelUnavailable as e:
        logger.warning("koe's CPU kernels are unavailable (the exact path keeps torch's products, int8 falls back to fbgemm, int4 is refused): %s", e)
        return str(e)
    except OSError as e:
        logger.warning("koe's CPU kernels could not be loaded: %s", e)
        return f"the built kernel library could not be loaded: {e}"
    return lib


def library() -> ctypes.CDLL | None:
    """The loaded kernels, or None when they cannot be built here (`unavailable_reason()` says why)."""
    lib = _load()
    return None if isinstance(lib, str) else lib


def unavailable_reason() -> str | None:
    lib = _load()
    return lib if isinstance(lib, str) else None


def describe() -> str:
    """The name results carry for these kernels: `koe-avx512vnni`, `koe-avx2` or `koe-portable`."""
    lib = library()
    if lib is None:
        return "unavailable"
    return "koe-avx512vnni" if lib.koe_qgemv_has_vnni() else "koe-avx2" if lib.koe_qgemv_has_avx2() else "koe-portable"
