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


# The auxiliary models of a release 2 folder, where upstream's own downloader keeps them
# (`ensure_models_available`: `<model_dir>/hf_cache/...`), so that one folder serves both.
AUX_W2V_BERT = "hf_cache/w2v-bert-2.0"
AUX_SEMANTIC_CODEC = "hf_cache/semantic_codec_model.safetensors"
AUX_SEMANTIC_CODEC_PULLED = "hf_cache/semantic_codec/model.safetensors"  # where `koe models pull` puts it (the hub repo's own path)
AUX_CAMPPLUS = "hf_cache/campplus_cn_common.bin"
AUX_BIGVGAN = "hf_cache/bigvgan"
AUX_W2V_BERT_FILES = tuple(f"{AUX_W2V_BERT}/{f}" for f in ("config.json", "preprocessor_config.json", "model.safetensors"))
AUX_BIGVGAN_FILES = (f"{AUX_BIGVGAN}/config.json", f"{AUX_BIGVGAN}/bigvgan_generator.pt")
EMOTIONS = 8  # the emotion vector's entries: happy, angry, sad, afraid, disgusted, melancholic, surprised, calm


@dataclass(frozen=True)
class Release2:
    """What koe reads from a release 2 config: the sections, the release's own files and the emotion
    matrices' row counts per emotion (`emo_num`)."""

    version: float | None
    gpt: dict[str, Any]
    semantic_codec: dict[str, Any]
    s2mel: dict[str, Any]
    bpe_model: str
    gpt_checkpoint: str
    s2mel_checkpoint: str
    w2v_stat: str
    emo_matrix: str
    spk_matrix: str
    emo_num: tuple[int, ...]
    qwen_emo_path: str | None

    variant = "IndexTTS-2"

    @property
    def files(self) -> tuple[str, ...]:
        """The files koe loads (the auxiliary models' included), relative to the folder."""
        own = (CONFIG, self.gpt_checkpoint, self.s2mel_checkpoint, self.bpe_model, self.w2v_stat, self.emo_matrix, self.spk_matrix)
        return (*own, *AUX_W2V_BERT_FILES, AUX_SEMANTIC_CODEC, AUX_CAMPPLUS, *AUX_BIGVGAN_FILES)

    def missing(self, folder: str | Path) -> tuple[str, ...]:
        """The files of `files` that `folder` lacks (the semantic codec at either of its two places)."""
        folder = Path(folder)
        gone = [f for f in self.files if not (folder / f).is_file()]
        if AUX_SEMANTIC_CODEC in gone and (folder / AUX_SEMANTIC_CODEC_PULLED).is_file():
            gone.remove(AUX_SEMANTIC_CODEC)
        return tuple(gone)

    @classmethod
    def read(cls, folder: str | Path) -> Release2:
        data, fields = read_emotion_release(folder, ("gpt", "semantic_codec", "s2mel", "dataset"))
        bpe_model = _file_name(data["dataset"].get("bpe_model", "bpe.model"), "dataset.bpe_model", Path(folder) / CONFIG)
        return cls(bpe_model=bpe_model, **fields)


def read_emotion_release(folder: str | Path, sections: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`config.yaml` of release 2 or 2.5 and the fields both read from it, checked: the `sections`
    (mappings), the weight files' names (in the folder), `emo_num` (8 positive row counts),
    `version`, `qwen_emo_path` (a folder inside the model folder)."""
    data = read_yaml(folder)
    path = Path(folder) / CONFIG
    for section in sections:
        if not isinstance(data.get(section), dict):
            raise ConfigError(f"{path}: no `{section}` section")
    names = {
        key: _file_name(data.get(key, default), key, path)
        for key, default in (
            ("gpt_checkpoint", "gpt.pth"),
            ("s2mel_checkpoint", "s2mel.pth"),
            ("w2v_stat", "wav2vec2bert_stats.pt"),
            ("emo_matrix", "feat2.pt"),
            ("spk_matrix", "feat1.pt"),
        )
    }
    emo_num = data.get("emo_num")
    if not isinstance(emo_num, list) or len(emo_num) != EMOTIONS or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in emo_num):
        raise ConfigError(f"{path}: emo_num must list {EMOTIONS} positive row counts, one per emotion (got {emo_num!r})")
    version = data.get("version")
    if version is not None and (not isinstance(version, (int, float)) or isinstance(version, bool)):
        raise ConfigError(f"{path}: version {version!r} is not a number")
    qwen = data.get("qwen_emo_path")
    if qwen is not None and (not isinstance(qwen, str) or ".." in Path(qwen).parts or Path(qwen).is_absolute() or "\\" in qwen):
        raise ConfigError(f"{path}: qwen_emo_path {qwen!r} must name a folder in the model folder (the emotion model's)")
    fields = {
        "version": None if version is None else float(version),
        "gpt": data["gpt"],
        "semantic_codec": data["semantic_codec"],
        "s2mel": data["s2mel"],
        "emo_num": tuple(emo_num),
        "qwen_emo_path": str(qwen).strip("/") if qwen else None,
        **names,
    }
    return data, fields


def emotion_lm_folder(folder: str | Path, release: Any) -> Path:
    """The emotion model's folder (upstream's `<model_dir>/<qwen_emo_path>`, released as
    `qwen0.6bemo4-merge/`), which only an emotion read from a text needs: a `ConfigError` naming it
    where the config names none or the folder lacks it."""
    folder = Path(folder)
    if not release.qwen_emo_path:
        raise ConfigError(f"{folder / CONFIG}: no qwen_emo_path: this release names no emotion model to read an emotion from a text")
    path = folder / release.qwen_emo_path
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"the emotion model's folder {path} (qwen_emo_path) is missing or incomplete: an emotion read from a text needs it "
            f"(koe models pull IndexTeam/{release.variant} fetches it)"
        )
    return path


def semantic_codec_file(folder: str | Path) -> Path:
    """The semantic codec's weights in a release 2 folder: where upstream's downloader puts them, or
    where `koe models pull` does."""
    folder = Path(folder)
    upstream = folder / AUX_SEMANTIC_CODEC
    return upstream if upstream.is_file() or not (folder / AUX_SEMANTIC_CODEC_PULLED).is_file() else folder / AUX_SEMANTIC_CODEC_PULLED


def aux_paths(folder: str | Path) -> dict[str, Path]:
    """A release 2 folder's own auxiliary models, by upstream's `aux_paths` keys."""
    folder = Path(folder)
    return {
        "w2v_bert": folder / AUX_W2V_BERT,
        "semantic_codec": semantic_codec_file(folder),
        "campplus": folder / AUX_CAMPPLUS,
        "bigvgan": folder / AUX_BIGVGAN,
    }
