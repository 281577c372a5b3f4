"""GPT-SoVITS's golden files (`tests/golden_files.py`): upstream's outputs, written by `make
goldens-gpt_sovits` into `goldens/<topic>.npz` beside this file, which the tests compare with bit
for bit. Named `sovits_goldens`, not `goldens`: the tests import their folder's helpers by module
name, and IndexTTS's `goldens` would be the one found in a session that runs both families' tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from golden_files import Golden, GoldenFiles, array_sha256

__all__ = ["Golden", "array_sha256", "check_recorded", "check_state", "fixtures", "fixtures_with", "inputs", "load_golden", "written"]

FILES = GoldenFiles("gpt_sovits", Path(__file__).resolve().parent)
inputs, written, load_golden, check_state, check_recorded = FILES.inputs, FILES.written, FILES.load_golden, FILES.check_state, FILES.check_recorded
fixtures = FILES.fixtures


def fixtures_with(topic: str, make: Callable[[Path], object]):
    """`fixtures(topic)` and a third module-scoped fixture, `make(folder)` (a `Speaker`, a `DropIn`):
    `golden, folder, speaker = fixtures_with(topic, Speaker)`."""
    golden, folder = fixtures(topic)

    @pytest.fixture(scope="module")
    def made(folder):
        return make(folder)

    return golden, folder, made
