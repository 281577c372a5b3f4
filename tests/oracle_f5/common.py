"""Shared by the scripts in this folder, which run inside the F5-TTS oracle virtualenv (f5-tts==1.1.22).

A script reads a job (JSON) and writes its results as one safetensors file plus a JSON of scalars.
It runs single-threaded, as koe's side of a parity test does, so float bits compare.

`torchaudio.load` goes through torchcodec, whose PyPI wheel is a CUDA build that cannot load here;
`use_soundfile_loader()` puts a soundfile-backed `torchaudio.load` in its place (same float32
samples for PCM WAV: integer / 2**(bits-1), shape (channels, frames)). `one_worker_pool()` pins
upstream's text batches to one thread, so its start noise is drawn in batch order (upstream races
its batches on a thread pool against torch's shared generator: its multi-batch output otherwise
changes from run to run).
"""

from __future__ import annotations

import functools
import json
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
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
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(out / "tensors.safetensors"))
    (out / "info.json").write_text(json.dumps(info or {}))


def _soundfile_load(path, *args, **kwargs):
    import soundfile as sf

    data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return torch.from_numpy(data.T.copy()), sr


def use_soundfile_loader() -> None:
    import torchaudio

    torchaudio.load = _soundfile_load


def one_worker_pool() -> None:
    from f5_tts.infer import utils_infer

    utils_infer.ThreadPoolExecutor = functools.partial(ThreadPoolExecutor, max_workers=1)
