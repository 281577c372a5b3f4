"""A release's `config.yaml`, read as data: which release it is and its modules' settings.

Releases are told apart by their files (as upstream's loaders are): `codec.pth` → 2.5, `s2mel.pth`
→ 2, `gpt.pth` + `bigvgan_generator.pth` → 1.5 (1.0 when the config names no version).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CONFIG = "config.yaml"


class ConfigError(ValueError):
    """A release folder whose config.yaml is missing, malformed or not one koe runs."""


def release_of(folder: str | Path) -> str | None:
    """ "1.5", "2", "2.5" by the files in `folder` (None: not an IndexTTS release)."""
    folder = Path(folder)
    if not (folder / CONFIG).is_file():
        return None
    if (folder / "codec.pth").is_file():
        return "2.5"
    if (folder / "s2mel.pth").is_file():
        return "2"
    if (folder / "gpt.pth").is_file() and (folder / "bigvgan_generator.pth").is_file():
        return "1.5"
    return None


def read_yaml(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / CONFIG
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: not found") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not text (UTF-8): a damaged file; pull the release again") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML ({where}{what}): a damaged file; pull the release again") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a mapping of sections was expected")
    return data


@dataclass(frozen=True)
class Release15:
    """What koe reads from a 1.5 (or 1.0) release's config: the sections and the file names."""

    version: float | None
    gpt: dict[str, Any]
    bigvgan: dict[str, Any]
    bpe_model: str
    gpt_checkpoint: str
    bigvgan_checkpoint: str

    @property
    def variant(self) -> str:
        return "IndexTTS-1.5" if self.version is not None and self.version >= 1.5 else "IndexTTS"

    @classmethod
    def read(cls, folder: str | Path) -> Release15:
        data = read_yaml(folder)
        path = Path(folder) / CONFIG
        for section in ("gpt", "bigvgan", "dataset"):
            if not isinstance(data.get(section), dict):
                raise ConfigError(f"{path}: no `{section}` section")
        names = {}
        for key, default in (("gpt_checkpoint", "gpt.pth"), ("bigvgan_checkpoint", "bigvgan_generator.pth")):
            names[key] = _file_name(data.get(key, default), key, path)
        version = data.get("version")
        if version is not None and not isinstance(version, (int, float)):
            raise ConfigError(f"{path}: version {version!r} is not a number")
        condition = data["gpt"].get("condition_type", "conformer_perceiver")
        if condition != "conformer_perceiver":
            raise ConfigError(f"{path}: gpt.condition_type {condition!r}: koe runs the released conformer_perceiver only")
        return cls(
            version=None if version is None else float(version),
            gpt=data["gpt"],
            bigvgan=data["bigvgan"],
            bpe_model=_file_name(data["dataset"].get("bpe_model", "bpe.model"), "dataset.bpe_model", path),
            **names,
        )


def _file_name(value: Any, key: str, path: Path) -> str:
    """A file of the release folder named by the config: a plain name, never a path out of it."""
    if not isinstance(value, str) or not value or "/" in value or "\\" in value or value in (".", ".."):
        raise ConfigError(f"{path}: {key} {value!r} must name a file in the model folder")
    return value
