"""The files of recorded oracle runs (`tests/oracle_harness.py` decides when one is read or written).

One run is one safetensors file, `tests/engines/<family>/oracle_runs/<cpu kind>/<key>.safetensors`
(the kind of CPU it was made on, `cpu_kind`: upstream's floats differ between kinds): upstream's
tensors up to `KEPT_BYTES` each as they are, and its metadata (JSON): the oracle script's name, its
info, the parts of its key (`key_parts`, so a miss can say what changed) and, for each larger
tensor, a `Digest` (its shape, dtype and the sha256 of its bytes, with its first values): a long
waveform is compared bit for bit through its digest, and the files stay small. A test compares
koe's result with an oracle tensor through `same(actual, expected)`, which takes either; a tensor
a test reads as data (an input koe's side takes, a slice, a mean) is named in `run_oracle`'s `keep`
and recorded whole.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from golden_files import array_sha256
from safetensors import safe_open
from safetensors.torch import save_file

FOLDER, STAGING = "oracle_runs", "oracle_runs.recording"  # in tests/engines/<family>/: the recordings, a recording pass's
KEPT_BYTES = 64 * 1024  # a tensor past this is recorded as its digest
HEAD = 8  # the first values a digest keeps, to show how a result differs


@dataclass(frozen=True)
class Digest:
    """A large tensor of a recorded run, kept as what identifies it bit for bit. Only `same` (and
    `shape`, `dtype`, `len`) reads it: any other use says so, rather than comparing wrongly."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    sha256: str
    head: tuple[float, ...]

    @classmethod
    def of(cls, t: torch.Tensor) -> Digest:
        flat = t.detach().reshape(-1)
        return cls(tuple(t.shape), t.dtype, array_sha256(t), tuple(float(v) for v in flat[:HEAD].double()))

    def __len__(self) -> int:
        return self.shape[0]

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise TypeError(
            f"a recorded oracle tensor of shape {self.shape} is kept as its digest (over {KEPT_BYTES // 1024} KB): "
            f"compare koe's result with it through `same(actual, expected)` (tests/recorded_runs.py), not .{name}"
        )

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "dtype": str(self.dtype).removeprefix("torch."), "sha256": self.sha256, "head": list(self.head)}

    @classmethod
    def from_json(cls, d: dict) -> Digest:
        return cls(tuple(d["shape"]), getattr(torch, d["dtype"]), d["sha256"], tuple(d["head"]))


def same(actual, expected) -> bool:
    """Whether koe's `actual` (a tensor or an array) equals the oracle's `expected` bit for bit: the
    same shape, dtype and values (a `Digest`: the same sha256 of its bytes)."""
    a = torch.from_numpy(np.ascontiguousarray(actual)) if isinstance(actual, np.ndarray) else actual
    if isinstance(expected, Digest):
        return tuple(a.shape) == expected.shape and a.dtype == expected.dtype and array_sha256(a) == expected.sha256
    e = torch.from_numpy(np.ascontiguousarray(expected)) if isinstance(expected, np.ndarray) else expected
    return a.shape == e.shape and a.dtype == e.dtype and torch.equal(a, e)


def kept_whole(name: str, keep: tuple[str, ...]) -> bool:
    """Whether the tensor `name` is one a test reads as data (`keep`: fnmatch patterns of names)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in keep)


def write(path: Path, script: str, tensors: dict, info: dict, parts: dict[str, str], keep: tuple[str, ...] = ()) -> None:
    """One recorded run (see the module's doc); written aside, then renamed (two workers may record
    the same run). `tensors` may hold digests already (an older recording, rewritten); the names
    matching `keep` are kept whole whatever their size (what a test reads as data, not only compares)."""
    kept, digests = {}, {}
    for name, t in tensors.items():
        if isinstance(t, Digest):
            if kept_whole(name, keep):
                raise ValueError(f"{path.name}: {name} is recorded as its digest, and the test keeps it whole: record it again")
            digests[name] = t.to_json()
        elif t.numel() * t.element_size() > KEPT_BYTES and not kept_whole(name, keep):
            digests[name] = Digest.of(t).to_json()
        else:
            kept[name] = t.detach().contiguous()
    metadata = {
        "script": script,
        "info": json.dumps(info, ensure_ascii=False, sort_keys=True),
        "key_parts": json.dumps(parts, ensure_ascii=False),
        "digests": json.dumps(digests, sort_keys=True),
    }
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    save_file(kept, str(partial), metadata=metadata)
    partial.replace(path)


def read(path: Path) -> tuple[dict, dict]:
    """(tensors, info) of a recorded run: its kept tensors, and a `Digest` for each larger one."""
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
        tensors: dict = {k: f.get_tensor(k) for k in f.keys()}
    tensors.update((k, Digest.from_json(d)) for k, d in json.loads(metadata.get("digests", "{}")).items())
    return tensors, json.loads(metadata["info"])


def key_parts_of(path: Path) -> dict:
    with safe_open(str(path), "pt") as f:
        return json.loads(f.metadata().get("key_parts", "{}"))


def commit(staging: Path, runs: Path, kind: str) -> tuple[set[str], set[str], list[str]]:
    """A recording pass's folder `staging` becomes `runs/<kind>` (the runs made on this CPU kind);
    another kind's folder stays only while it holds the same runs (else it is stale: that kind runs
    upstream live until recorded again). Returns (the runs now, the runs before, the kinds dropped).

    The same runs: the same keys, or, on a kind's first recording, keys that differ only in the
    contents of input files (`same_but_inputs`): some fixtures are written by float code whose bytes
    follow the CPU (Qwen3-TTS's Opus clip through libopus; CosyVoice's random-weight folders and a
    front end's inputs, by the same script and arguments), so each kind's keys name its own inputs. Once this kind had recordings, any change of its keys means the
    inputs changed, and another kind's are dropped."""
    final = runs / kind
    new = {p.name for p in staging.glob("*.safetensors")} if staging.is_dir() else set()
    old = {p.name for p in final.glob("*.safetensors")}
    new_parts = [key_parts_of(p) for p in staging.glob("*.safetensors")] if new else []
    shutil.rmtree(final, ignore_errors=True)
    if new:
        runs.mkdir(exist_ok=True)
        staging.rename(final)
    else:
        shutil.rmtree(staging, ignore_errors=True)

    def kept(other: Path) -> bool:
        names = {p.name for p in other.glob("*.safetensors")}
        if names == new:
            return True
        return not old and same_but_inputs([key_parts_of(p) for p in other.glob("*.safetensors")], new_parts)

    stale = sorted(k.name for k in (runs.iterdir() if runs.is_dir() else ()) if k.name != kind and not kept(k))
    for name in stale:
        shutil.rmtree(runs / name)
    return new, old, stale


INPUT_DIGEST = re.compile(r"<[0-9a-f]{64}>")  # an input file's contents in a run's key (oracle_harness)


def same_but_inputs(a: list[dict], b: list[dict]) -> bool:
    """Whether two sets of runs' key parts are the same but for the contents of their input files."""

    def masked(parts: list[dict]) -> list[str]:
        return sorted(INPUT_DIGEST.sub("<>", json.dumps(p, sort_keys=True)) for p in parts)

    return masked(a) == masked(b)
