"""Hashes the Fish Speech goldens record of the fixtures they were made from, so that a fixture that
drifts fails its golden's test loudly instead of comparing against other inputs."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import torch

__all__ = ["files_sha256", "state_sha256"]


def state_sha256(state: dict[str, torch.Tensor]) -> str:
    """One hash of a state dict's names, shapes, dtypes and bytes, in its order."""
    h = hashlib.sha256()
    for name, t in state.items():
        t = t.detach().contiguous().cpu()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def files_sha256(paths: Iterable[str | Path]) -> str:
    """One hash of files' names (without their folder) and bytes, in the order given."""
    h = hashlib.sha256()
    for path in paths:
        path = Path(path)
        data = path.read_bytes()
        h.update(f"{path.name}:{len(data)};".encode())
        h.update(data)
    return h.hexdigest()
