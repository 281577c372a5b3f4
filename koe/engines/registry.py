"""Which engine a model folder needs, read from its own `config.json`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelInfo:
    family: str
    variant: str
    size: str


class UnknownModelError(ValueError):
    """A folder that holds no model koe knows."""


def detect(folder: str | Path) -> ModelInfo:
    """Family, variant and size of the model in `folder`, from its `config.json`."""
    folder = Path(folder)
    path = folder / "config.json"
    if not path.exists():
        raise UnknownModelError(f"{folder}: no config.json — is this a model folder?")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise UnknownModelError(f"{path}: not valid JSON ({e})") from e
    if cfg.get("model_type") == "qwen3_tts" or "tts_model_type" in cfg:
        return ModelInfo("qwen3_tts", str(cfg.get("tts_model_type")), str(cfg.get("tts_model_size", "")))
    raise UnknownModelError(f"{folder}: model_type {cfg.get('model_type')!r} is not supported; koe runs Qwen3-TTS (12 Hz) today")


def load_engine(folder: str | Path, device=None, dtype=None, precision=None):
    info = detect(folder)
    if info.family == "qwen3_tts":
        from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

        return Qwen3TTSEngine.load(folder, device=device, dtype=dtype, precision=precision)
    raise UnknownModelError(f"no engine for family {info.family!r}")
