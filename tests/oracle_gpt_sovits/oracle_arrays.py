"""What the GPT-SoVITS oracle scripts record of upstream's outputs: `sha` (an array's bytes hashed)
and `record` (a small array whole, a large one as its hash, shape, head and tail, keeping goldens small)."""

from __future__ import annotations

import hashlib

import numpy as np
import torch

EDGE = 256  # the samples kept at each end of a large array


def sha(a: torch.Tensor | np.ndarray) -> np.ndarray:
    """The sha256 of the array's bytes (C order), as a 0-d string array."""
    a = a.detach().contiguous().numpy() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)
    return np.array(hashlib.sha256(a.tobytes()).hexdigest())


def record(result: dict[str, np.ndarray], key: str, a: torch.Tensor, full: bool, shape: bool = True) -> None:
    """`result[key]` = the whole array when `full`, else `key_sha256`, `key_shape` (when `shape`),
    `key_head` and `key_tail` (the first and last `EDGE` values, flattened)."""
    if full:
        result[key] = a.numpy()
        return
    flat = a.reshape(-1)
    result[f"{key}_sha256"] = sha(a)
    if shape:
        result[f"{key}_shape"] = np.array(a.shape)
    result[f"{key}_head"] = flat[:EDGE].numpy()
    result[f"{key}_tail"] = flat[-EDGE:].numpy()
