"""Run a script of `tests/oracle/` in the upstream virtualenv and read back what it wrote.

The oracle is upstream `qwen-tts==0.1.1` in its own venv (`make oracle`); its path comes from
`KOE_ORACLE_PYTHON` (default `.oracle/bin/python`). A missing oracle is an error, never a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parent.parent
ORACLE_DIR = ROOT / "tests" / "oracle"


def oracle_python() -> str:
    path = os.environ.get("KOE_ORACLE_PYTHON", str(ROOT / ".oracle" / "bin" / "python"))
    if not Path(path).exists():
        raise RuntimeError(f"oracle venv not found at {path}: run `make oracle` (or set KOE_ORACLE_PYTHON)")
    return path


def run_oracle(script: str, job: dict, workdir: Path, timeout: float = 900) -> tuple[dict[str, torch.Tensor], dict]:
    """Run `tests/oracle/<script>.py` on `job`; returns (tensors, info)."""
    workdir.mkdir(parents=True, exist_ok=True)
    job_path = workdir / f"{script}-job.json"
    out = workdir / f"{script}-out"
    job_path.write_text(json.dumps(job))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ORACLE_DIR / "stubs"), str(ORACLE_DIR)])
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    proc = subprocess.run(
        [oracle_python(), str(ORACLE_DIR / f"{script}.py"), str(job_path), str(out)],
        capture_output=True, text=True, timeout=timeout, env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"oracle script {script} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    tensors = load_file(str(out / "tensors.safetensors")) if (out / "tensors.safetensors").exists() else {}
    info = json.loads((out / "info.json").read_text()) if (out / "info.json").exists() else {}
    return tensors, info
