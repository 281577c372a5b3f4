"""The families koe runs: a lazy table of specs, asked in turn which one a model folder holds.

As vLLM's model registry: a family costs nothing until asked (its spec module is imported on first
use; its engine only when a model is loaded). Adding a family is one line here.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from typing import Any

from koe.engines.spec import FamilySpec, ModelDescription, ModelInfo, SpecError, read_json

FAMILIES: dict[str, str] = {
    "qwen3_tts": "koe.engines.qwen3_tts.spec:SPEC",
    "f5_tts": "koe.engines.f5_tts.spec:SPEC",
    "voxcpm": "koe.engines.voxcpm.spec:SPEC",
}
DEMO_FAMILY = "qwen3_tts"  # `koe demo` builds a tiny random-weight model of this family


class UnknownModelError(ValueError):
    """A folder that holds no model koe knows."""


def _import(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@cache
def spec(family: str) -> FamilySpec:
    """The spec of `family` (imported on first use)."""
    if family not in FAMILIES:
        raise UnknownModelError(f"unknown model family {family!r}; koe runs: {', '.join(FAMILIES)}")
    return _import(FAMILIES[family])


def specs() -> list[FamilySpec]:
    return [spec(f) for f in FAMILIES]


def detect(folder: str | Path) -> ModelInfo:
    """Family, variant and size of the model in `folder`: the first spec that claims it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UnknownModelError(f"{folder}: not a folder")
    for s in specs():
        info = s.probe(folder)
        if info is not None:
            return info
    names = ", ".join(s.title for s in specs())
    config = folder / "config.json"
    if config.is_file():
        try:
            model_type = read_json(config).get("model_type")
        except SpecError as e:
            raise UnknownModelError(str(e)) from e
        raise UnknownModelError(f"{folder}: model_type {model_type!r} is not supported; koe runs: {names}")
    if not any(folder.glob("*.yaml")):
        raise UnknownModelError(f"{folder}: no config.json — is this a model folder? koe runs: {names}")
    raise UnknownModelError(f"{folder}: not a model koe knows (layout not recognised); koe runs: {names}")


def describe(folder: str | Path) -> ModelDescription:
    """What the model in `folder` can do and which files it needs, without loading weights."""
    info = detect(folder)
    return spec(info.family).describe(Path(folder))


def engine_class(family: str) -> Any:
    """The engine class of `family` (imports its torch code)."""
    return _import(spec(family).engine)


def write_fixture(folder: str | Path, family: str = DEMO_FAMILY, variant: str | None = None, size: str = "tiny", **options: Any) -> Path:
    """A small random-weight model of `family` in its released on-disk layout (tests, `koe demo`).

    `options`: keywords of the family's fixture writer (Qwen3-TTS: `vocabulary=`, see
    `koe.text.qwen_vocab`)."""
    s = spec(family)
    return _import(s.fixture)(Path(folder), variant or s.fixture_variants[0], size, **options)


def load_engine(folder: str | Path, device=None, dtype=None, precision=None):
    """Load the model in `folder` with its family's engine."""
    info = detect(folder)
    return engine_class(info.family).load(folder, device=device, dtype=dtype, precision=precision)
