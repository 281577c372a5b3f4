"""Run an oracle script in an upstream package's own virtualenv and read back what it wrote.

One venv per family (`make oracle`): upstream `qwen-tts==0.1.1` in `.oracle` (scripts in
`tests/oracle/`, python from `KOE_ORACLE_PYTHON`), `f5-tts==1.1.22` in `.oracle-f5` (scripts in
`tests/oracle_f5/`, python from `KOE_ORACLE_F5_PYTHON`), `voxcpm==2.0.3` in `.oracle-voxcpm`
(scripts in `tests/oracle_voxcpm/`, python from `KOE_ORACLE_VOXCPM_PYTHON`). A missing oracle is
an error, never a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parent.parent
ORACLE_DIR = ROOT / "tests" / "oracle"

# family -> (scripts folder, environment variable with the venv's python, default venv folder)
ORACLES = {
    "qwen3_tts": (ORACLE_DIR, "KOE_ORACLE_PYTHON", ".oracle"),
    "f5_tts": (ROOT / "tests" / "oracle_f5", "KOE_ORACLE_F5_PYTHON", ".oracle-f5"),
    "voxcpm": (ROOT / "tests" / "oracle_voxcpm", "KOE_ORACLE_VOXCPM_PYTHON", ".oracle-voxcpm"),
}


def oracle_python(family: str = "qwen3_tts") -> str:
    _, variable, venv = ORACLES[family]
    path = os.environ.get(variable, str(ROOT / venv / "bin" / "python"))
    if not Path(path).exists():
        raise RuntimeError(f"oracle venv not found at {path}: run `make oracle` (or set {variable})")
    return path


def run_oracle(
    script: str, job: dict, workdir: Path, timeout: float = 900, family: str = "qwen3_tts"
) -> tuple[dict[str, torch.Tensor], dict]:
    """Run `<family's oracle folder>/<script>.py` on `job`; returns (tensors, info)."""
    scripts = ORACLES[family][0]
    workdir.mkdir(parents=True, exist_ok=True)
    job_path = workdir / f"{script}-job.json"
    out = workdir / f"{script}-out"
    job_path.write_text(json.dumps(job))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(scripts / "stubs"), str(scripts), str(ROOT / "tests" / "oracle_shared")])
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    proc = subprocess.run(
        [oracle_python(family), str(scripts / f"{script}.py"), str(job_path), str(out)],
        capture_output=True, text=True, timeout=timeout, env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"oracle script {script} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    tensors = load_file(str(out / "tensors.safetensors")) if (out / "tensors.safetensors").exists() else {}
    info = json.loads((out / "info.json").read_text()) if (out / "info.json").exists() else {}
    return tensors, info


# -- Qwen3-TTS generate oracle (tests/oracle/qwen_generate.py): its outputs and koe's against them
def generated(tensors: dict, i: int):
    """The oracle's outputs of call `i`: (codes, waveform) per utterance, as it saved them."""
    j = 0
    while f"wav_{i}_{j}" in tensors:
        yield tensors[f"codes_{i}_{j}"], tensors[f"wav_{i}_{j}"].numpy()
        j += 1


def assert_same_outputs(results, expected, label: str) -> None:
    """koe's (codes, waveform) pairs equal the oracle's bit for bit, one per utterance, at least one."""
    expected = list(expected)
    assert len(results) == len(expected) > 0, label
    for j, ((codes, wav), (want_codes, want_wav)) in enumerate(zip(results, expected)):
        assert want_codes.shape[0] > 0, f"{label}[{j}]: oracle produced no frames"
        assert torch.equal(codes, want_codes), f"{label}[{j}]: codes differ"
        assert wav.dtype == np.float32 and np.array_equal(wav, want_wav), f"{label}[{j}]: waveform differs"
