"""Shared by the scripts in this folder, which run inside the VoxCPM oracle virtualenv (voxcpm==2.0.3).

A script reads a job (JSON) and writes its results as one safetensors file plus a JSON of scalars
(the layout `tests/oracle_harness.run_oracle` reads back). It runs single-threaded, as koe's side
of a parity test does, so float bits compare.

`torchaudio.load` (VoxCPM 1.x reads prompt audio with it) goes through torchcodec, which is a
soundfile-backed stub here: `stubs/torchcodec`, on PYTHONPATH through the harness.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch
from safetensors.torch import save_file

warnings.filterwarnings("ignore")


def read_job() -> tuple[dict, Path]:
    """(job, output folder) from argv: `script.py JOB.json OUT_DIR`."""
    torch.set_num_threads(1)
    job = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    return job, out


def write_results(out: Path, tensors: dict[str, torch.Tensor], info: dict | None = None) -> None:
    if tensors:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(out / "tensors.safetensors"))
    (out / "info.json").write_text(json.dumps(info or {}, ensure_ascii=False))
