"""A random-weight speaker-verification checkpoint (`sv/pretrained_eres2netv2w24s4ep4.ckpt`) in the
released format, deterministic from a seed.

The file is `torch.save` of the state dict of upstream's `ERes2NetV2(baseWidth=24, scale=4,
expansion=4)` in its order: every parameter and batch-norm buffer, the `num_batches_tracked`
counters, and the `seg_1` projection GPT-SoVITS never runs (upstream's strict `load_state_dict`
needs it). The widths are fixed upstream (SoVITS's `sv_emb` reads 20,480 numbers), so there is only
the full size: 53.6 M numbers stored as float16 (107 MB, the released file's size). Values are
drawn from one generator in that order, scaled so the embeddings of a voice-like clip stay of
order one.

Writing it costs about a second, so each process makes it once (`sv_file`, a temporary folder
removed at exit) and `write_sv` links (or copies) that file where it is asked for: a linked file
shares its bytes with every other copy of the process, so it is read, never written in place (a
test that damages a checkpoint writes a new file).
"""

from __future__ import annotations

import atexit
import functools
import math
import os
import shutil
import tempfile
from pathlib import Path

import torch

from koe.engines.gpt_sovits.eres2net import ERes2NetV2Config
from koe.engines.gpt_sovits.sv import SpeakerVerifier
from koe.runtime.weights import build_on_meta, state_sha256

__all__ = ["random_sv_state", "sv_file", "sv_state_sha256", "write_sv"]


def _released_shapes() -> dict[str, tuple[int, ...]]:
    config = ERes2NetV2Config()
    shapes = {name: tuple(t.shape) for name, t in build_on_meta(SpeakerVerifier).model.state_dict().items()}
    stats = config.embedding_dim * 2  # TSTP pooling: mean and std of every channel x bin
    shapes["seg_1.weight"] = (config.embedding_size, stats)
    shapes["seg_1.bias"] = (config.embedding_size,)
    return shapes


def _value(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    if name.endswith(".num_batches_tracked"):
        return torch.tensor(1000, dtype=torch.long)
    if name.endswith(".running_var"):
        return 0.5 + torch.rand(shape, generator=g)
    if name.endswith(".running_mean"):
        return 0.1 * torch.randn(shape, generator=g)
    if len(shape) == 1 and name.endswith(".weight"):  # a batch norm's scale
        return 0.5 + 0.5 * torch.rand(shape, generator=g)
    if name.endswith(".bias"):
        return 0.05 * torch.randn(shape, generator=g)
    return torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))


@functools.lru_cache(maxsize=1)
def _state(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in _released_shapes().items():
        v = _value(name, shape, g)
        out[name] = v if v.dtype == torch.long else v.half()
    return out


def random_sv_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """The state dict of a random file: every released tensor, floats as float16 (a new mapping
    each call; the tensors are shared, never written to)."""
    return dict(_state(seed))


@functools.lru_cache(maxsize=2)
def sv_state_sha256(seed: int = 0) -> str:
    """`state_sha256` of `random_sv_state(seed)`, computed once."""
    return state_sha256(_state(seed))


@functools.lru_cache(maxsize=2)
def sv_file(seed: int = 0) -> Path:
    """This process's copy of the random checkpoint for `seed` (written once, removed at exit)."""
    folder = tempfile.mkdtemp(prefix="koe-gpt_sovits-sv-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / f"eres2netv2_{seed}.ckpt"
    torch.save(_state(seed), path)
    return path


def write_sv(path: str | Path, seed: int = 0) -> Path:
    """Puts the random checkpoint at `path` (a folder: `pretrained_eres2netv2w24s4ep4.ckpt` in it),
    hard-linked to this process's copy where the file system allows, else copied."""
    path = Path(path)
    if path.is_dir():
        path = path / "pretrained_eres2netv2w24s4ep4.ckpt"
    path.parent.mkdir(parents=True, exist_ok=True)
    source = sv_file(seed)
    try:
        os.link(source, path)
    except OSError:
        shutil.copyfile(source, path)
    return path
