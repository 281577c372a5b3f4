"""A voice prompt's files, for every family: `prompt.safetensors` (tensors) + `prompt.json` (metadata).

Written into a temporary folder beside them and moved into place, so a failed save never leaves a
half-written prompt; read back with one error type per family. Never pickle.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

__all__ = ["read_prompt", "write_prompt"]


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
        return json.loads(meta_path.read_text(encoding="utf-8")), load_file(str(tensor_path))
    except Exception as e:  # noqa: BLE001 - any parse failure is a corrupt prompt
        raise error(f"{folder}: not a readable voice prompt ({e})") from e
