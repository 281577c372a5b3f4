import os
import sys

# Before torch loads, here and in every process the tests start (oracles, CLI, servers): MKL's
# products independent of memory alignment, which bit-for-bit comparisons need on some CPUs
# (see koe/runtime/process.py reproducible_blas; koe's command line sets the same).
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Parity needs a fixed thread count on both sides (floats move with the thread count).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("koe-session")
