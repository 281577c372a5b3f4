"""What a family says about a model folder without loading it (torch-free).

Each family's `spec.py` defines a `FamilySpec` named `SPEC`; the registry imports it lazily. The
service plans requests, lists models and maps OpenAI voice names from these answers alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from koe.engines.base import Capabilities


@dataclass(frozen=True)
class ModelInfo:
    """Which family a folder holds, and its variant and size as the family names them."""

    family: str
    variant: str
    size: str


@dataclass(frozen=True)
class ModelDescription:
    """A model folder as its family reads it: capabilities, files it needs, files it lacks.

    `weight_files` are the checkpoint files (for sizes and parameter counts); `uses` says in one
    line what the model is for; `extra` holds family facts worth showing (`koe models info`).
    """

    info: ModelInfo
    capabilities: Capabilities
    required_files: tuple[str, ...]
    missing: tuple[str, ...]
    weight_files: tuple[Path, ...]
    stored_dtype: str
    uses: str
    extra: dict[str, Any] | None = None


@dataclass(frozen=True)
class VoiceAlias:
    """What an OpenAI voice name means on a model: a preset speaker, or a voice description."""

    speaker: str | None = None
    design: str | None = None


@dataclass(frozen=True)
class ReleasedModel:
    """A published checkpoint koe runs: its hub id, variant and size."""

    repo_id: str
    variant: str
    size: str


class FamilySpec(Protocol):
    """A family's torch-free face (see module doc)."""

    family: str
    title: str
    engine: str  # "module:Class" of the engine, imported only to load a model
    released: tuple[ReleasedModel, ...]
    fixture: str  # "module:function" writing a random-weight folder: f(folder, variant, size="tiny") -> Path
    fixture_variants: tuple[str, ...]  # the variants that function can write (the first is the demo's)

    def probe(self, folder: Path) -> ModelInfo | None:
        """This family's info for `folder`, or None if the folder is not one of its models."""
        ...

    def describe(self, folder: Path) -> ModelDescription:
        """Capabilities and files of a folder `probe` accepted (reads configs only)."""
        ...

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        """What OpenAI voice `name` (alloy, echo, ...) means on this model, or None."""
        ...


class SpecError(ValueError):
    """A folder a family claims but cannot read (malformed config)."""


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; `SpecError` naming the file if it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: cannot read it ({e})") from e
    except json.JSONDecodeError as e:
        raise SpecError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a JSON object")
    return data


def safetensors_dtype(path: Path) -> str | None:
    """The dtype most tensors in a safetensors file have (from its header), e.g. "bfloat16"."""
    header = safetensors_header(path)
    counts: dict[str, int] = {}
    for k, v in header.items():
        if k != "__metadata__" and isinstance(v, dict):
            counts[v.get("dtype", "?")] = counts.get(v.get("dtype", "?"), 0) + 1
    names = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
    return names.get(max(counts, key=counts.get)) if counts else None


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file ({} if unreadable)."""
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if n <= 0 or n > 100_000_000:
                return {}
            return json.loads(f.read(n))
    except (OSError, ValueError):
        return {}
