"""Shared by the scripts in this folder, which run inside the VoxCPM oracle virtualenv (voxcpm==2.0.3).

A script reads a job (JSON) and writes its results as one safetensors file plus a JSON of scalars
(the layout `tests/oracle_harness.run_oracle` reads back). It runs single-threaded, as koe's side
of a parity test does, so float bits compare.

`torchaudio.load` (VoxCPM 1.x reads prompt audio with it) goes through torchcodec, which is a
soundfile-backed stub here: `stubs/torchcodec`, on PYTHONPATH through the harness.
"""

from __future__ import annotations

import warnings

from oracle_io import read_job, write_results  # noqa: F401 - the scripts import them from here

warnings.filterwarnings("ignore")
