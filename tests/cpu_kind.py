"""The kind of CPU this machine is, as far as upstream's floats go: the name under which the tests
keep what upstream computed here (recorded oracle runs, golden files that depend on the CPU).

The same program on the same inputs gives other bits on another kind of CPU: MKL (even in its
strict mode, whose `AUTO` branch follows the CPU), oneDNN (its kernels for convolutions and for
bfloat16 products are chosen by instruction set) and ATen's own vector kernels each take the widest
path the CPU has, and the vendor's own (MKL on an AMD EPYC sums some products in another order
than on an Intel Xeon). Measured on the project's machines: an AVX2-only AMD EPYC differs from the
AVX-512 ones in most float32 outputs; an AMD EPYC with AVX512-BF16 and an Intel Xeon without it
agree in small float32 products but not in bfloat16 ones or some products at released sizes.

The kind is `<vendor>-<widest instruction set that changes those paths>`: `intel-avx512vnni` (an
Ice Lake Xeon), `amd-avx512bf16` (a Zen 4 EPYC), `amd-avx2`, `intel-amx`, `arm64`. The width is
the vector width alone (`avx512`, `avx2`, `sse`, or the machine): what small float32 products
depend on. Recorded oracle runs are kept by kind; a golden file by width, or by kind where its
topic says so (`BY_CPU_KIND = True` in its `golden_<topic>.py`: bfloat16 products, products at
released sizes).
"""

from __future__ import annotations

import functools
import platform
import re
from pathlib import Path

VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}
# From the widest: the first flag /proc/cpuinfo lists names the kind.
LEVELS = (("amx_bf16", "amx"), ("avx512_bf16", "avx512bf16"), ("avx512_vnni", "avx512vnni"), ("avx512f", "avx512"), ("avx2", "avx2"))


def kind_of(cpuinfo: str, machine: str = "x86_64") -> str:
    """The kind named by a /proc/cpuinfo text (its first processor's vendor and flags)."""
    vendor, flags = "", set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name == "vendor_id" and not vendor:
            vendor = value.strip()
        elif name == "flags" and not flags:
            flags = set(value.split())
    if not vendor and not flags:
        return machine.lower()
    level = next((label for flag, label in LEVELS if flag in flags), "sse")
    return f"{VENDORS.get(vendor, vendor.lower() or machine.lower())}-{level}"


def width_of(kind: str) -> str:
    """The vector width of a kind: `amd-avx512bf16` -> `avx512`, `amd-avx2` -> `avx2`, `arm64` -> `arm64`."""
    vendor, _, level = kind.rpartition("-")
    if not vendor:
        return kind
    return "avx512" if level.startswith(("avx512", "amx")) else level


def _cpuinfo() -> tuple[str, str]:
    info = Path("/proc/cpuinfo")
    return (info.read_text() if info.is_file() else ""), (platform.machine() or "unknown")


@functools.cache
def cpu_kind() -> str:
    """This machine's kind (see the module's doc)."""
    return kind_of(*_cpuinfo())


def cpu_width() -> str:
    """This machine's vector width (see the module's doc)."""
    return width_of(cpu_kind())


def golden_cpu(script: Path) -> str:
    """The folder of `goldens/` that holds the golden of the topic whose koe's side is `script`
    (`golden_<topic>.py`) made on this machine: its kind when the script says `BY_CPU_KIND = True`,
    else its width. Read from the text, so `make` can ask without loading torch."""
    by_kind = re.search(r"^BY_CPU_KIND\s*=\s*True\b", script.read_text(encoding="utf-8"), re.M)
    return cpu_kind() if by_kind else cpu_width()


if __name__ == "__main__":
    print(cpu_kind(), cpu_width())
