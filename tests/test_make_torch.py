"""`make demo` installs the CPU build of torch where no NVIDIA GPU is present, never the CUDA one.

scripts/torch_pip_args.sh is what the Makefile asks pip for torch (`$(TORCH_ARGS)`): shown here with a
`pip install --dry-run` of exactly what `make demo` installs (torch, then koe with its server),
whose report must list no NVIDIA, CUDA or Triton package, and torch with the `+cpu` local version.
On a machine where PyTorch's CPU index answers it is used; where it does not (this project's CI),
pip takes the CPU wheel it finds locally. With a GPU (`nvidia-smi -L` lists one) the default build
is asked for; with no CPU wheel anywhere pip fails rather than download the CUDA build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "torch_pip_args.sh"
GPU_PACKAGES = ("nvidia", "cuda", "triton", "cudnn", "cublas", "nccl")


def torch_args(env: dict | None = None) -> list[str]:
    out = subprocess.run([str(SCRIPT)], capture_output=True, text=True, check=True, env={**os.environ, **(env or {})}, timeout=30)
    return out.stdout.split()


def dry_run(*requirements: str, cwd: Path = ROOT) -> list[tuple[str, str]]:
    """(name, version) of everything `pip install --dry-run --ignore-installed` would install."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", *requirements],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout[proc.stdout.index("{") :])
    return [(i["metadata"]["name"].lower(), i["metadata"]["version"]) for i in report["install"]]


def test_make_demo_installs_no_nvidia_cuda_or_triton_package_without_a_gpu():
    args = torch_args({"KOE_TORCH_GPU": "0"})
    assert args[-1] == "torch==2.13.0+cpu"
    planned = dry_run(*args, ".[server]")
    names = [n for n, _ in planned]
    assert ("torch", "2.13.0+cpu") in planned and "koe" in names and "fastapi" in names
    assert [n for n in names if any(g in n for g in GPU_PACKAGES)] == []


def test_the_cpu_index_is_used_when_it_answers_and_skipped_fast_when_it_does_not(tmp_path):
    index = tmp_path / "index"
    (index / "torch").mkdir(parents=True)
    (index / "torch" / "index.html").write_text("<html></html>")
    assert torch_args({"KOE_TORCH_GPU": "0", "KOE_TORCH_INDEX": index.as_uri()}) == ["--extra-index-url", index.as_uri(), "torch==2.13.0+cpu"]
    assert torch_args({"KOE_TORCH_GPU": "0", "KOE_TORCH_INDEX": "http://127.0.0.1:9"}) == ["torch==2.13.0+cpu"]  # nothing listens on port 9


def test_with_a_gpu_the_default_build_is_asked_for(tmp_path):
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    assert torch_args({"PATH": f"{smi.parent}:{os.environ['PATH']}", "KOE_TORCH_GPU": ""}) == ["torch"]
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")  # a driver without a GPU
    assert torch_args({"PATH": f"{smi.parent}:{os.environ['PATH']}", "KOE_TORCH_GPU": ""})[-1] == "torch==2.13.0+cpu"


def test_the_makefile_asks_pip_for_torch_through_the_script():
    make = subprocess.run(
        ["make", "-n", "-B", "-f", "Makefile", ".venv/.installed-server"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "KOE_TORCH_GPU": "0", "KOE_TORCH_INDEX": "http://127.0.0.1:9"},
        timeout=60,
    )
    torch_lines = [ln for ln in make.stdout.splitlines() if "pip install" in ln and "torch" in ln]
    assert torch_lines == [".venv/bin/pip install --progress-bar on torch==2.13.0+cpu"], make.stdout
    steps = [ln for ln in make.stdout.splitlines() if "==>" in ln]
    assert len(steps) == 3 and "[2/3] torch" in steps[1], make.stdout
