"""A family's golden files on the tests' side: upstream's outputs, written by `make goldens-FAMILY`
(scripts/goldens.py) into `tests/engines/<family>/goldens/<cpu>/<topic>.npz` (`<cpu>`: the vector
width of the CPU it was made on, or its whole kind for a topic that says `BY_CPU_KIND = True`:
tests/cpu_kind.py), which the tests compare with bit for bit; on a CPU with no golden of a topic,
upstream makes one for the session (`made_here`). Each family's tests reach them through a small module of its own folder
(IndexTTS's `goldens`, Fish Speech's `fish_goldens`) that makes one `GoldenFiles`:

    G = inputs("gpt")                              # golden_gpt.py: koe's side of the topic
    golden = load_golden("gpt")
    check_state(golden, state)                     # the weights the golden was made from
    check_state(golden, state, name="speaker")     # a topic with several: its `speaker.state_sha256`
    folder = written("gpt")                        # what G.write_inputs writes, once a session (to read only)
    check_recorded(golden, folder)                 # every hash of its state_sha256.txt
    golden, folder = fixtures("gpt")               # the two as a test module's pytest fixtures
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from cpu_kind import golden_cpu
from shared_folders import shared

from koe.runtime.weights import state_sha256

ROOT = Path(__file__).resolve().parent.parent
HERE = "KOE_GOLDENS_HERE"  # the test session's folder of goldens upstream made on this machine


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

    def written(self, topic: str) -> Path:
        """The folder holding what `golden_<topic>.py`'s `write_inputs` writes: written once for the
        test session and read by every test that asks (shared_folders.py: to read only)."""
        return shared(f"inputs-{self.family}-{topic}", self.inputs(topic).write_inputs)

    def path(self, topic: str) -> Path:
        """`goldens/<cpu>/<topic>.npz`: the golden upstream made on this machine's kind of CPU
        (`<cpu>` its vector width, or its whole kind where the topic says `BY_CPU_KIND`: cpu_kind.py)."""
        return self.goldens / golden_cpu(self.folder / f"golden_{topic}.py") / f"{topic}.npz"

    def load_golden(self, topic: str) -> dict[str, np.ndarray]:
        """Every array of the topic's golden (`path`), read whole (no pickles); on a kind of CPU
        with none, the one upstream makes here (`made_here`)."""
        path = self.path(topic)
        if not path.is_file():
            path = self.made_here(topic)
        with np.load(path, allow_pickle=False) as z:
            golden = Golden((k, z[k]) for k in z.files)
        golden.topic = topic
        return golden

    def made_here(self, topic: str) -> Path:
        """No golden of `topic` was made on this kind of CPU (upstream's floats differ between
        kinds): upstream makes one now, once for the test session (`scripts/goldens.py --into` the
        session's folder, `KOE_GOLDENS_HERE`, which tests/conftest.py makes; the oracle's venv must
        be built: `make test` builds it on such a machine). Record it with `make goldens-FAMILY` to
        keep it."""
        path, here = self.path(topic), os.environ.get(HERE)
        cpu = path.parent.name
        if not here:
            raise FileNotFoundError(f"no golden {path} for this CPU ({cpu}): write it with `make goldens-{self.family} TOPICS={topic}`")
        folder = Path(here) / self.family
        folder.mkdir(parents=True, exist_ok=True)
        made = folder / f"{topic}.npz"
        with open(folder / f"{topic}.lock", "w") as lock:  # one worker makes it, the others wait for it
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not made.is_file():
                cmd = [sys.executable, str(ROOT / "scripts" / "goldens.py"), self.family, topic, "--into", str(folder)]
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                if proc.returncode != 0 or not made.is_file():
                    raise RuntimeError(
                        f"no golden {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} was made on this kind of CPU ({cpu}), and upstream could not make one here "
                        f"({' '.join(cmd[1:])}: exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}"
                    )
        return made

    def fixtures(self, topic: str):
        """Module-scoped pytest fixtures `golden` (the topic's arrays) and `folder` (its inputs written
        once a session (to read only), their recorded hashes checked against the golden): `golden, folder = fixtures(topic)`."""

        @pytest.fixture(scope="module")
        def golden():
            return self.load_golden(topic)

        @pytest.fixture(scope="module")
        def folder(golden):
            path = self.written(topic)
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
