"""A family's golden files on the tests' side: upstream's outputs, written by `make goldens-FAMILY`
(scripts/goldens.py) into `tests/engines/<family>/goldens/<topic>.npz`, which the tests compare
with bit for bit. Each family's tests reach them through a small module of its own folder
(IndexTTS's `goldens`, Fish Speech's `fish_goldens`) that makes one `GoldenFiles`:

    G = inputs("gpt")                              # golden_gpt.py: koe's side of the topic
    golden = load_golden("gpt")
    check_state(golden, state)                     # the weights the golden was made from
    check_state(golden, state, name="speaker")     # a topic with several: its `speaker.state_sha256`
    folder = written(tmp_path_factory, "gpt")      # a fresh folder with what G.write_inputs writes
    check_recorded(golden, folder)                 # every hash of its state_sha256.txt
    golden, folder = fixtures("gpt")               # the two as a test module's pytest fixtures
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

from koe.runtime.weights import state_sha256


class Golden(dict):
    """A golden's arrays by name, and its `topic`."""

    topic: str = ""


def array_sha256(a: np.ndarray | torch.Tensor) -> str:
    """The sha256 of an array's (or tensor's, bfloat16 included) bytes, C order."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


class GoldenFiles:
    """The golden files of `family`, whose tests and `golden_<topic>.py` scripts are in `folder`."""

    def __init__(self, family: str, folder: Path) -> None:
        self.family, self.folder = family, Path(folder)
        self.goldens = self.folder / "goldens"
        self.inputs = functools.cache(self._inputs)

    def regenerate(self, topic: str) -> str:
        return f"run `make goldens-{self.family}` (TOPICS={topic}) if it changed on purpose, and commit the new golden"

    def _inputs(self, topic: str) -> ModuleType:
        """`golden_<topic>.py` of the folder (the topic's inputs, koe's side), loaded once by its path:
        other families' tests may have files of the same names."""
        spec = importlib.util.spec_from_file_location(f"{self.family}_golden_{topic}", self.folder / f"golden_{topic}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def written(self, tmp_path_factory: pytest.TempPathFactory, topic: str) -> Path:
        """A fresh folder holding what `golden_<topic>.py`'s `write_inputs` writes."""
        folder = tmp_path_factory.mktemp(f"{self.family}-{topic}")
        self.inputs(topic).write_inputs(folder)
        return folder

    def load_golden(self, topic: str) -> dict[str, np.ndarray]:
        """Every array of `goldens/<topic>.npz`, read whole (no pickles)."""
        path = self.goldens / f"{topic}.npz"
        if not path.is_file():
            raise FileNotFoundError(f"no golden {path}: write it with `make goldens-{self.family} TOPICS={topic}`")
        with np.load(path, allow_pickle=False) as z:
            golden = Golden((k, z[k]) for k in z.files)
        golden.topic = topic
        return golden

    def fixtures(self, topic: str):
        """Module-scoped pytest fixtures `golden` (the topic's arrays) and `folder` (its inputs written
        afresh, their recorded hashes checked against the golden): `golden, folder = fixtures(topic)`."""

        @pytest.fixture(scope="module")
        def golden():
            return self.load_golden(topic)

        @pytest.fixture(scope="module")
        def folder(tmp_path_factory, golden):
            path = self.written(tmp_path_factory, topic)
            self.check_recorded(golden, path)
            return path

        return golden, folder

    def check_state(self, golden: dict[str, np.ndarray], state: dict[str, torch.Tensor] | str, name: str | None = None) -> None:
        """Fails, saying how to regenerate, unless the golden was made from `state` (a state dict, or
        its `state_sha256`): the golden's `state_sha256`, or `<name>.state_sha256` for a topic with several."""
        topic = getattr(golden, "topic", "") or "?"
        key = f"{name}.state_sha256" if name else "state_sha256"
        if key not in golden:
            raise AssertionError(f"golden {topic} has no {key}: its oracle script must record the weights' hash")
        want = str(golden[key]).strip()
        got = state if isinstance(state, str) else state_sha256(state)
        if got != want:
            raise AssertionError(
                f"golden {topic}: the fixture's weights ({key} {got[:12]}…) are not the ones it was made from ({want[:12]}…): {self.regenerate(topic)}"
            )

    def check_recorded(self, golden: dict[str, np.ndarray], folder: Path) -> None:
        """`check_state` for every hash the inputs recorded in `folder/state_sha256.txt`: a line `HASH`
        (the golden's `state_sha256`) or `NAME HASH` (its `NAME.state_sha256`)."""
        for line in (folder / "state_sha256.txt").read_text().splitlines():
            words = line.split()
            if words:
                self.check_state(golden, words[-1], name=words[0] if len(words) > 1 else None)
