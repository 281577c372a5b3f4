"""IndexTTS's golden files: upstream's outputs, written by `make goldens-indextts` (scripts/goldens.py)
into `goldens/<topic>.npz` beside this file, which the tests compare with bit for bit.

    golden = load_golden("gpt")
    check_state(golden, state)                     # the weights the golden was made from
    check_state(golden, state, name="speaker")     # a topic with several: its `speaker.state_sha256`
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from koe_indextts.fixtures import state_sha256

GOLDENS = Path(__file__).resolve().parent / "goldens"
REGENERATE = "run `make goldens-indextts` (TOPICS={topic}) if it changed on purpose, and commit the new golden"


class Golden(dict):
    """A golden's arrays by name, and its `topic`."""

    topic: str = ""


def load_golden(topic: str) -> dict[str, np.ndarray]:
    """Every array of `goldens/<topic>.npz`, read whole (no pickles)."""
    path = GOLDENS / f"{topic}.npz"
    if not path.is_file():
        raise FileNotFoundError(f"no golden {path}: write it with `make goldens-indextts TOPICS={topic}`")
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
