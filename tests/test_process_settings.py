"""`koe serve` asks torch for huge pages before torch loads; the environment's own word wins."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = r"""
import re, sys
from koe.runtime.process import prefer_huge_pages
import koe.cli.main, koe.cli.serve  # the command line itself must not have loaded torch
assert "torch" not in sys.modules
on = prefer_huge_pages()
import torch
t = torch.ones(32 * 2**20 // 4)
start = t.untyped_storage().data_ptr(); end = start + t.untyped_storage().nbytes()
huge, eligible = 0, []
for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", open("/proc/self/smaps").read()):
    lo, hi = (int(x, 16) for x in block.split()[0].split("-"))
    if lo < end and hi > start:
        huge += int(re.search(r"AnonHugePages:\s+(\d+)", block).group(1))
        eligible.append(re.search(r"THPeligible:\s+(\d)", block).group(1) == "1")
print(on, huge, bool(eligible) and all(eligible))
"""


def _probe(**env: str) -> tuple[str, int, bool]:
    base = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    on, huge, eligible = subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True, check=True).stdout.split()
    return on, int(huge), eligible == "True"


def test_huge_pages_for_torch_tensors_unless_the_environment_says_no() -> None:
    """The tensor's memory is marked for huge pages (the kernel's THPeligible: what koe asks for)
    and lies on some; how much of it does depends on the kernel's free huge pages (a suite under
    memory load got 16 of 32 MB), so residency is checked as some, not all."""
    mode = open("/sys/kernel/mm/transparent_hugepage/enabled").read() if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled") else "[never]"
    on, huge, eligible = _probe()
    assert on == "True"
    if "[never]" not in mode:
        assert eligible and huge >= 2048  # marked, and on 2 MB pages
    on, huge, eligible = _probe(THP_MEM_ALLOC_ENABLE="0")
    assert on == "False"
    if "[always]" not in mode:
        assert not eligible and huge == 0


BLAS_PROBE = r"""
import os, sys
from typer.testing import CliRunner
from koe.cli.main import app
assert CliRunner().invoke(app, ["config", "--help"]).exit_code == 0
assert "torch" not in sys.modules  # set before torch loads, so MKL reads it
print(os.environ.get("MKL_CBWR"))
"""


def test_the_command_line_asks_mkl_for_alignment_independent_products_unless_told() -> None:
    """koe.runtime.process.reproducible_blas: MKL_CBWR=AUTO,STRICT for every koe command (on some CPUs
    MKL's results otherwise depend on memory alignment); the environment's own setting wins."""
    base = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    run = lambda env: subprocess.run([sys.executable, "-c", BLAS_PROBE], env=env, capture_output=True, text=True, check=True).stdout.strip()  # noqa: E731
    assert run(base) == "AUTO,STRICT"
    assert run({**base, "MKL_CBWR": "AVX2"}) == "AVX2"


MALLOC_PROBE = r"""
import resource, sys
from typer.testing import CliRunner
from koe.cli.main import app
if sys.argv[1] == "cli":
    assert CliRunner().invoke(app, ["config", "--help"]).exit_code == 0  # every command's set-up runs
import torch
x = torch.randn(2 << 20)  # 8 MB, like the codec's activations
def faults_of_a_step():  # a codec step: several 8 MB activations alive at once, then all freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    kept = [x * float(i) for i in range(6)]
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(min(faults_of_a_step() for _ in range(6)))
"""


def test_the_command_line_has_malloc_reuse_freed_tensors_pages_unless_told() -> None:
    """koe.runtime.process.keep_freed_memory: after koe's set-up, a step that makes six 8 MB tensors
    at once reuses the pages the last step freed (no page faults). An environment with malloc
    tunables of its own is left alone: with glibc's initial thresholds set there (every such tensor
    a fresh mapping) the same step faults each page in again (~12,000 faults). glibc's default
    without tunables moves its thresholds as the process runs, so whether it faults is not fixed."""
    base = {
        k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "THP_MEM_ALLOC_ENABLE")
    }  # huge pages: few faults either way

    def run(mode, env):
        return int(subprocess.run([sys.executable, "-c", MALLOC_PROBE, mode], env=env, capture_output=True, text=True, check=True).stdout)

    assert run("cli", base) < 100
    glibc_initial = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
    assert run("cli", {**base, **glibc_initial}) > 1000


IMPORT_PROBE = r"""
import os, sys
order = sys.argv[1]
if order == "koe first":
    import koe, torch
else:
    import torch
    if order == "after a product":
        torch.randn(3, 1024) @ torch.randn(1024, 256)  # MKL runs: its mode is fixed from here on
    import koe
from koe.runtime import process
print(os.environ.get("MKL_CBWR"), process.mkl_branch(), process.strict_blas_refused())
"""


def test_importing_koe_asks_mkl_for_its_strict_order_while_it_still_can() -> None:
    """`import koe` sets MKL_CBWR=AUTO,STRICT before torch loads, or through MKL itself after torch
    has loaded but before MKL has run (the order koe's exact kernel reproduces: without it the exact
    path keeps torch's products, ~3x slower); once MKL has run it is refused and said so; the
    environment's own setting wins."""
    base = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}

    def run(order, env=base):
        return subprocess.run([sys.executable, "-c", IMPORT_PROBE, order], env=env, capture_output=True, text=True, check=True).stdout.split()

    assert run("koe first") == ["AUTO,STRICT", "2", "False"]  # MKL_CBWR_AUTO
    assert run("torch first") == ["AUTO,STRICT", "2", "False"]
    assert run("after a product") == ["None", "1", "True"]  # MKL_CBWR_OFF: kept, and the exact path says why
    assert run("koe first", {**base, "MKL_CBWR": "COMPATIBLE"}) == ["COMPATIBLE", "3", "False"]
