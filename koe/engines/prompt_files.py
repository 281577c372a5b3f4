"""A voice prompt's files, for every family: `prompt.safetensors` (tensors) + `prompt.json` (metadata).

Written into a temporary folder beside them and moved into place, so a failed save never leaves a
half-written prompt; read back with one error type per family. Never pickle. What is read back is
checked as one (`prompt_tensor`, `prompt_rate`): a damaged prompt raises the family's error, and the
voice library then prepares the voice again from its reference.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from koe.audio.decode import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from koe.runtime.files import read_json_object

__all__ = ["prompt_rate", "prompt_tensor", "read_prompt", "write_prompt"]


def write_prompt(folder: str | Path, tensors: dict[str, torch.Tensor], meta: dict) -> Path:
    """Save `tensors` and `meta` as `folder/prompt.safetensors` + `folder/prompt.json`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        save_file({k: t.detach().cpu().contiguous() for k, t in tensors.items()}, os.path.join(tmp, "prompt.safetensors"))
        Path(tmp, "prompt.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
        os.replace(os.path.join(tmp, "prompt.safetensors"), folder / "prompt.safetensors")
        os.replace(os.path.join(tmp, "prompt.json"), folder / "prompt.json")
    return folder


def read_prompt(folder: str | Path, error: type[Exception]) -> tuple[dict, dict[str, torch.Tensor]]:
    """(metadata, tensors) of a saved prompt; a missing or unreadable one raises `error`."""
    folder = Path(folder)
    meta_path, tensor_path = folder / "prompt.json", folder / "prompt.safetensors"
    if not meta_path.is_file() or not tensor_path.is_file():
        raise error(f"{folder}: not a readable voice prompt (expected prompt.json and prompt.safetensors)")
    try:
        return read_json_object(meta_path), load_file(str(tensor_path))
    except Exception as e:  # noqa: BLE001 - any parse failure is a corrupt prompt
        raise error(f"{folder}: not a readable voice prompt ({e})") from e


def check_header(folder: str | Path, meta: dict, error: type[Exception], *, family: str, title: str, version: int) -> None:
    """A saved prompt's `prompt.json` names this `family` (else it was made for another family's model)
    and this format `version`; else `error`, naming what it was made for."""
    made_for = meta.get("family") or (meta.get("model") or {}).get("family")
    if made_for != family:
        raise error(
            f"{folder}: this voice prompt was made for a {made_for or 'model of another family'} model, not {title}; prepare the voice again with this model"
        )
    if meta.get("format_version") != version:
        raise error(f"{folder}: unknown {title} voice prompt format {meta.get('format_version')!r}")


def prompt_tensor(
    folder: str | Path,
    tensors: dict[str, torch.Tensor],
    name: str,
    error: type[Exception],
    *,
    dtype: torch.dtype,
    shape: tuple[int | None, ...],
    max_len: int,
    low: int | None = None,
) -> torch.Tensor:
    """`tensors[name]` if it is what a family saves: of `dtype`, with `shape` (None: any size), its
    first dimension 1 to `max_len` long, every value finite (and at least `low`). Anything else
    (empty, a dimension more, NaN, longer than any prepared prompt, another dtype: a prompt damaged
    or not made by koe) raises `error` naming the folder, the tensor and what is wrong."""
    t = tensors.get(name)
    wanted = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    if t is None:
        problem = "is missing"
    elif t.dtype != dtype:
        problem = f"holds {str(t.dtype).removeprefix('torch.')} values, not {str(dtype).removeprefix('torch.')}"
    elif t.dim() != len(shape) or any(s is not None and n != s for n, s in zip(t.shape, shape, strict=True)):
        problem = f"has shape {tuple(t.shape)}, not {wanted}"
    elif t.shape[0] == 0:
        problem = "is empty"
    elif t.shape[0] > max_len:
        problem = f"is {t.shape[0]} long, more than the {max_len} a prepared prompt holds"
    elif t.is_floating_point() and not bool(torch.isfinite(t).all()):
        problem = "holds NaN or infinite values"
    elif low is not None and t.numel() and int(t.min()) < low:
        problem = f"holds values under {low}"
    else:
        return t
    raise error(f"{folder}: a damaged voice prompt: {name} {problem}; prepare the voice again")


def prompt_rate(folder: str | Path, meta: dict[str, Any], error: type[Exception], key: str = "sample_rate") -> int:
    """`meta[key]`: a sample rate koe reads audio at (whole Hz), else `error` naming the folder."""
    rate = meta.get(key)
    if isinstance(rate, bool) or not isinstance(rate, int) or not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise error(f"{folder}: a damaged voice prompt: {key} {rate!r} in prompt.json is not a sample rate; prepare the voice again")
    return rate
