"""A real `koe serve` with a tiny random-weight CosyVoice 2 (`cosy`, the default model) and the library voice
`alice`, for the tests that drive CosyVoice through the server and the web page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from browser import KoeServer, start_koe_serve
from product_helpers import run_koe

from koe.engines.cosyvoice.fixtures import write_random_model

RATE = 24000


def tone(seconds: float, hz: float, rate: int = RATE) -> np.ndarray:
    """A gliding tone: float32 samples at `rate`."""
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * hz * t * (1 + 0.05 * np.sin(2 * np.pi * 3 * t)))).astype(np.float32)


def start_cosyvoice_serve(root: Path) -> KoeServer:
    """`koe serve` over a fresh KOE_HOME under `root` holding `cosy` (linked) and `alice` (a 2 s clip, its transcript)."""
    model = write_random_model(root / "CosyVoice2-0.5B", "CosyVoice2-0.5B")
    home = root / "home"
    sf.write(root / "ref.wav", tone(2.0, 150), RATE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KOE_HOME", str(home))
        run_koe("models", "import", model, "--name", "cosy", "--link")
        run_koe("voices", "add", "alice", "--ref", root / "ref.wav", "--ref-text", "A reference clip.")
    return start_koe_serve(home, root, models=(), default="cosy")
