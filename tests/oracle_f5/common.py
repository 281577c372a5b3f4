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
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch
from oracle_io import read_job, write_results  # noqa: F401 - the scripts import them from here

warnings.filterwarnings("ignore")


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
