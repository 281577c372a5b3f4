"""IndexTTS's golden files (`tests/golden_files.py`): upstream's outputs, written by `make
goldens-indextts` into `goldens/<topic>.npz` beside this file, which the tests compare with bit for bit."""

from __future__ import annotations

import functools
from pathlib import Path

from golden_files import Golden, GoldenFiles, array_sha256

__all__ = ["Golden", "array_sha256", "check_recorded", "check_state", "inputs", "load_golden", "release_digests", "written"]

FILES = GoldenFiles("indextts", Path(__file__).resolve().parent)
inputs, written, load_golden, check_state, check_recorded = FILES.inputs, FILES.written, FILES.load_golden, FILES.check_state, FILES.check_recorded


@functools.cache
def release_digests(release: str) -> dict[str, str]:
    """The `state_sha256` of each file of the tiny release `release` ("2" or "2.5") koe's fixture
    writes, computed once a process: the goldens of its end-to-end topics were made from them."""
    if release == "2":
        from koe_indextts.fixtures2 import release_states, states_sha256
    elif release == "2.5":
        from koe_indextts.fixtures25 import release_states, states_sha256
    else:
        raise ValueError(f"release {release!r}: 2 or 2.5")
    return states_sha256(release_states())
