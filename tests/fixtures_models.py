"""Session-wide random-weight model folders (built once per test session)."""

from __future__ import annotations

from pathlib import Path

from koe.engines.qwen3_tts.fixtures import write_random_model

_BUILT: dict[tuple[str, str], Path] = {}


def model_folder(root: Path, kind: str, size: str = "tiny") -> Path:
    """A random model of `kind` ("custom_voice", "voice_design", "base") and `size` ("tiny" is 0.6B-like,
    "tiny-proj" the 1.7B-like layout whose code predictor has an input projection)."""
    key = (kind, size)
    if key not in _BUILT:
        _BUILT[key] = write_random_model(root / f"{kind}-{size}", kind, size)
    return _BUILT[key]
