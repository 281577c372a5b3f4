"""Weight loading: strict by default, single file or sharded with an index.

Safetensors where released so. Pickled checkpoints (`.pt`, `.pth`, `.bin`, `.ckpt`, as some
families release them) are read with `torch.load(weights_only=True)`: tensors and plain
containers only, never code; anything else in the pickle is refused.
"""

from __future__ import annotations

import json
import pickle
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import safe_open
from torch import nn

M = TypeVar("M", bound=nn.Module)


class WeightsError(ValueError):
    """A checkpoint does not fit the model: missing, unexpected or misshapen tensors, or no weights file."""


def weight_files(folder: Path, stem: str = "model") -> list[Path]:
    """The safetensors files of a folder: `model.safetensors`, or the shards listed by `model.safetensors.index.json`."""
    folder = Path(folder)
    single = folder / f"{stem}.safetensors"
    index = folder / f"{stem}.safetensors.index.json"
    if single.exists():
        return [single]
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as e:
            raise WeightsError(f"{index}: not a valid safetensors index ({e})") from e
        shards = sorted({folder / name for name in weight_map.values()})
        missing = [str(s) for s in shards if not s.exists()]
        if missing:
            raise WeightsError(f"{index} lists shards that are missing: {', '.join(missing)}")
        return shards
    raise WeightsError(f"no weights in {folder}: expected {single.name} or {index.name}")


PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def checkpoint_tensors(path: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs of a checkpoint file, read lazily where the format allows.

    Safetensors: memory-mapped, one tensor at a time. Pickles: `torch.load(weights_only=True)`
    (memory-mapped); nested dicts are flattened with "." (e.g. `ema_model_state_dict.<name>`), and
    non-tensor leaves (step counters, configs) are skipped.
    """
    path = Path(path)
    if path.suffix in PICKLE_SUFFIXES:
        yield from _flatten(read_pickled(path))
        return
    with safe_open(str(path), framework="pt", device="cpu") as f:
        for key in f.keys():
            yield key, f.get_tensor(key)


def read_pickled(path: Path) -> object:
    """A pickled checkpoint, loaded with `weights_only=True`: a pickle that would run code is a
    `WeightsError`, never executed."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))  # legacy pickles cannot be mapped
    except pickle.UnpicklingError as e:
        raise WeightsError(f"{path}: refused to load: it holds more than tensors (koe never runs code from a checkpoint): {e}") from e
    except (RuntimeError, EOFError, OSError) as e:
        raise WeightsError(f"{path}: not a readable checkpoint ({e})") from e


def _flatten(obj: object, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))


def load_state(
    module: nn.Module,
    files: list[Path],
    *,
    rename: Callable[[str], str | None] = lambda name: name,
    dtype: torch.dtype | None = None,
    device: torch.device | str = "cpu",
    strict: bool = True,
) -> None:
    """Put tensors from `files` into `module`'s parameters and persistent buffers.

    The module may live on the meta device: tensors are assigned, not copied into existing storage.
    Tensors already in the wanted dtype on the CPU stay zero-copy views of the memory-mapped file,
    as transformers leaves them for upstream (CPU kernels can round differently with an operand's
    memory alignment, so a copy could change float bits). `rename` maps a checkpoint name to the
    module's name, or None to skip it. With `strict`, a missing or unexpected tensor or a wrong
    shape raises a `WeightsError` that names it. Floating tensors are cast to `dtype` when given.
    """
    expected = module.state_dict(keep_vars=True)
    loaded: dict[str, torch.Tensor] = {}
    unexpected: list[str] = []
    for path in files:
        for key, tensor in checkpoint_tensors(path):
            name = rename(key)
            if name is None:
                continue
            target = expected.get(name)
            if target is None:
                unexpected.append(key)
                continue
            if tuple(tensor.shape) != tuple(target.shape):
                raise WeightsError(f"{path.name}: tensor {key} has shape {tuple(tensor.shape)}, the model expects {tuple(target.shape)}")
            if tensor.is_floating_point():
                tensor = tensor.to(dtype or target.dtype)
            loaded[name] = tensor.to(device)
    missing = sorted(set(expected) - set(loaded))
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append(f"missing tensors: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''} ({len(missing)} in all)")
        if unexpected:
            parts.append(f"unexpected tensors: {', '.join(unexpected[:10])}{' ...' if len(unexpected) > 10 else ''} ({len(unexpected)} in all)")
        where = files[0].parent if files else "checkpoint"
        raise WeightsError(f"{where}: checkpoint does not match the model: {'; '.join(parts)}")
    module.load_state_dict(loaded, strict=False, assign=True)


def build_from_weights(
    build: Callable[[], M],
    files: list[Path],
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str = "cpu",
    rename: Callable[[str], str | None] = lambda name: name,
) -> M:
    """`build()` on the meta device (no random init, no memory), then every tensor from `files`
    (strict, zero-copy where `load_state` can, names mapped by `rename`), on `device`.

    Non-persistent buffers are not in the weights: modules must build them on the CPU (as
    `koe.nn.rotary.inverse_frequencies` does); one left on meta is a `WeightsError` naming it.
    """
    with torch.device("meta"):
        module = build()
    load_state(module, files, rename=rename, dtype=dtype, device=device)
    stray = [n for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if stray:
        raise WeightsError(f"tensors left unloaded after loading: {', '.join(stray[:5])}{' ...' if len(stray) > 5 else ''}")
    return module.to(device)
