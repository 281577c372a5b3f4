import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Parity needs a fixed thread count on both sides (floats move with the thread count).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("koe-session")
