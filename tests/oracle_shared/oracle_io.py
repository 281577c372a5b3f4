"""The job/result files of every oracle script (each family's folder, run in its own virtualenv).

A script reads a job (JSON) and writes its results as one safetensors file plus a JSON of scalars:
the layout `tests/oracle_harness.run_oracle` reads back. It runs single-threaded, as koe's side
of a parity test does, so float bits compare. `tests/oracle_harness` puts this folder on the
scripts' PYTHONPATH.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file


def read_job() -> tuple[dict, Path]:
    """(job, output folder) from argv: `script.py JOB.json OUT_DIR`."""
    torch.set_num_threads(1)
    job = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    return job, out


def write_results(out: Path, tensors: dict[str, torch.Tensor], info: dict | None = None) -> None:
    """`tensors.safetensors` (when there are tensors) and `info.json`."""
    if tensors:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(out / "tensors.safetensors"))
    (out / "info.json").write_text(json.dumps(info or {}, ensure_ascii=False))
