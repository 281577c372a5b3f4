"""Fish Speech's golden files: upstream's outputs, written by `make goldens-fish_speech` (scripts/goldens.py)
into `goldens/<topic>.npz` beside this file, which the tests compare with bit for bit.

Named `fish_goldens`, not `goldens`: the tests import their folder's helpers by module name, and
IndexTTS's `goldens` (tests/engines/indextts/goldens.py) would be the one found in a session that
runs both families' tests.

    G = inputs("lm")                               # golden_lm.py: koe's side of the topic
    golden = load_golden("lm")
    check_state(golden, state)                     # the weights the golden was made from
    check_state(golden, state, name="speaker")     # a topic with several: its `speaker.state_sha256`
    folder = written(tmp_path_factory, "lm")       # a fresh folder with what G.write_inputs writes
    check_recorded(golden, folder)                 # every hash of its state_sha256.txt
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from koe_fish_speech.fixtures_common import state_sha256

HERE = Path(__file__).resolve().parent
GOLDENS = HERE / "goldens"
REGENERATE = "run `make goldens-fish_speech` (TOPICS={topic}) if it changed on purpose, and commit the new golden"


class Golden(dict):
    """A golden's arrays by name, and its `topic`."""

    topic: str = ""


@functools.cache
def inputs(topic: str) -> ModuleType:
    """`golden_<topic>.py` beside this file (the topic's inputs, koe's side), loaded once by its path:
    other families' tests may have files of the same names."""
    spec = importlib.util.spec_from_file_location(f"fish_speech_golden_{topic}", HERE / f"golden_{topic}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def written(tmp_path_factory: pytest.TempPathFactory, topic: str) -> Path:
    """A fresh folder holding what `golden_<topic>.py`'s `write_inputs` writes."""
    folder = tmp_path_factory.mktemp(f"fish_speech-{topic}")
    inputs(topic).write_inputs(folder)
    return folder


def array_sha256(a: np.ndarray | torch.Tensor) -> str:
    """The sha256 of an array's (or tensor's) bytes, C order."""
    a = a.detach().contiguous().numpy() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)
    return hashlib.sha256(a.tobytes()).hexdigest()


def load_golden(topic: str) -> dict[str, np.ndarray]:
    """Every array of `goldens/<topic>.npz`, read whole (no pickles)."""
    path = GOLDENS / f"{topic}.npz"
    if not path.is_file():
        raise FileNotFoundError(f"no golden {path}: write it with `make goldens-fish_speech TOPICS={topic}`")
    with np.load(path, allow_pickle=False) as z:
        golden = Golden((k, z[k]) for k in z.files)
    golden.topic = topic
    return golden


def check_state(golden: dict[str, np.ndarray], state: dict[str, torch.Tensor] | str, name: str | None = None) -> None:
    """Fails, saying how to regenerate, unless the golden was made from `state` (a state dict, or its
    `state_sha256`): the golden's `state_sha256`, or `<name>.state_sha256` for a topic with several."""
    topic = getattr(golden, "topic", "") or "?"
    key = f"{name}.state_sha256" if name else "state_sha256"
    if key not in golden:
        raise AssertionError(f"golden {topic} has no {key}: its oracle script must record the weights' hash")
    want = str(golden[key]).strip()
    got = state if isinstance(state, str) else state_sha256(state)
    if got != want:
        raise AssertionError(
            f"golden {topic}: the fixture's weights ({key} {got[:12]}…) are not the ones it was made from ({want[:12]}…): {REGENERATE.format(topic=topic)}"
        )


def check_recorded(golden: dict[str, np.ndarray], folder: Path) -> None:
    """`check_state` for every hash the inputs recorded in `folder/state_sha256.txt`: a line `HASH`
    (the golden's `state_sha256`) or `NAME HASH` (its `NAME.state_sha256`)."""
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        words = line.split()
        if words:
            check_state(golden, words[-1], name=words[0] if len(words) > 1 else None)
