"""F5-TTS model config, from upstream's config schema (the `model:` section of its
`configs/<name>.yaml`: `name`, `tokenizer`, `backbone`, `arch`, `mel_spec`, `vocoder`).

The released checkpoints carry no config: the architecture is the package's yaml, named by the
release (`F5TTS_v1_Base`, `F5TTS_Base`, `E2TTS_Base`). `ARCHS` holds those three, so koe can write
a complete folder for a release (`config.yaml` next to the checkpoint) without upstream installed.
Torch-free: the spec reads it to describe a folder.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ARCHS", "F5Config", "MelConfig", "arch_yaml", "read_config"]

_MEL = {"target_sample_rate": 24000, "n_mel_channels": 100, "hop_length": 256, "win_length": 1024, "n_fft": 1024, "mel_spec_type": "vocos"}

# The `model:` sections of upstream's released configs (f5-tts 1.1.22 `configs/*.yaml`).
ARCHS: dict[str, dict] = {
    "F5TTS_v1_Base": {
        "name": "F5TTS_v1_Base",
        "tokenizer": "pinyin",
        "tokenizer_path": None,
        "backbone": "DiT",
        "arch": {
            "dim": 1024,
            "depth": 22,
            "heads": 16,
            "ff_mult": 2,
            "text_dim": 512,
            "text_mask_padding": True,
            "qk_norm": None,
            "conv_layers": 4,
            "pe_attn_head": None,
            "attn_backend": "torch",
            "attn_mask_enabled": False,
            "checkpoint_activations": False,
        },
        "mel_spec": dict(_MEL),
        "vocoder": {"is_local": False, "local_path": None},
    },
    "F5TTS_Base": {
        "name": "F5TTS_Base",
        "tokenizer": "pinyin",
        "tokenizer_path": None,
        "backbone": "DiT",
        "arch": {
            "dim": 1024,
            "depth": 22,
            "heads": 16,
            "ff_mult": 2,
            "text_dim": 512,
            "text_mask_padding": False,
            "conv_layers": 4,
            "pe_attn_head": 1,
            "attn_backend": "torch",
            "attn_mask_enabled": False,
            "checkpoint_activations": False,
        },
        "mel_spec": dict(_MEL),
        "vocoder": {"is_local": False, "local_path": None},
    },
    "E2TTS_Base": {
        "name": "E2TTS_Base",
        "tokenizer": "pinyin",
        "tokenizer_path": None,
        "backbone": "UNetT",
        "arch": {"dim": 1024, "depth": 24, "heads": 16, "ff_mult": 4, "text_mask_padding": False, "pe_attn_head": 1},
        "mel_spec": dict(_MEL),
        "vocoder": {"is_local": False, "local_path": None},
    },
}

# DiT constructor arguments and their defaults (what a config may leave out).
_DIT_DEFAULTS = {
    "dim_head": 64,
    "ff_mult": 4,
    "text_dim": None,
    "text_mask_padding": True,
    "qk_norm": None,
    "conv_layers": 0,
    "pe_attn_head": None,
    "long_skip_connection": False,
    "text_embedding_average_upsampling": False,
    "dropout": 0.1,
    "attn_mask_enabled": False,
}
_IGNORED = {"attn_backend", "checkpoint_activations"}


@dataclass(frozen=True)
class MelConfig:
    sample_rate: int = 24000
    n_mels: int = 100
    hop_length: int = 256
    win_length: int = 1024
    n_fft: int = 1024
    kind: str = "vocos"


@dataclass(frozen=True)
class F5Config:
    """What koe needs to build the model: the DiT's arguments and the mel front end."""

    name: str
    backbone: str
    dim: int
    depth: int
    heads: int
    dim_head: int = 64
    ff_mult: float = 4
    text_dim: int | None = None
    text_mask_padding: bool = True
    qk_norm: str | None = None
    conv_layers: int = 0
    pe_attn_head: int | None = None
    long_skip_connection: bool = False
    dropout: float = 0.1  # in training only (attention output, feed-forward)
    attn_mask_enabled: bool = False  # training: padded frames masked inside attention (koe trains without)
    mel: MelConfig = field(default_factory=MelConfig)
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def text_width(self) -> int:
        return self.text_dim if self.text_dim is not None else self.mel.n_mels

    @property
    def arch_family(self) -> str:
        """ "v1" (masked text padding, rotary on every head) or "base" (the first release's options)."""
        return "v1" if self.text_mask_padding and self.pe_attn_head is None else "base"


def _unsupported(path: Path | str, what: str) -> ValueError:
    return ValueError(f"{path}: {what}")


def parse_config(model: dict, where: Path | str = "config") -> F5Config:
    """An `F5Config` from a `model:` section; unknown or unsupported settings are a ValueError that names them."""
    if not isinstance(model, dict) or "arch" not in model or "backbone" not in model:
        raise _unsupported(where, "not an F5-TTS config: expected a `model:` section with `backbone` and `arch`")
    backbone = model["backbone"]
    if backbone == "UNetT":
        raise _unsupported(where, "E2-TTS (the UNetT backbone) is not supported yet; koe runs the F5-TTS DiT (F5TTS_v1_Base, F5TTS_Base)")
    if backbone != "DiT":
        raise _unsupported(where, f"backbone {backbone!r} is not supported (koe runs DiT)")
    mel = model.get("mel_spec") or {}
    if mel.get("mel_spec_type", "vocos") != "vocos":
        raise _unsupported(where, f"the {mel.get('mel_spec_type')} mel/vocoder is not supported yet; koe runs F5-TTS with the Vocos vocoder")
    arch = dict(model["arch"])
    unknown = sorted(set(arch) - set(_DIT_DEFAULTS) - {"dim", "depth", "heads"} - _IGNORED)
    if unknown:
        raise _unsupported(where, f"unknown DiT settings: {', '.join(unknown)}")
    if arch.get("text_embedding_average_upsampling"):
        raise _unsupported(where, "text_embedding_average_upsampling is not supported yet")
    try:
        args = {k: arch.get(k, v) for k, v in _DIT_DEFAULTS.items() if k != "text_embedding_average_upsampling"}
        return F5Config(
            name=str(model.get("name") or "F5-TTS"),
            backbone=backbone,
            dim=int(arch["dim"]),
            depth=int(arch["depth"]),
            heads=int(arch["heads"]),
            **args,
            mel=MelConfig(
                sample_rate=int(mel.get("target_sample_rate", 24000)),
                n_mels=int(mel.get("n_mel_channels", 100)),
                hop_length=int(mel.get("hop_length", 256)),
                win_length=int(mel.get("win_length", 1024)),
                n_fft=int(mel.get("n_fft", 1024)),
            ),
            raw=copy.deepcopy(model),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise _unsupported(where, f"bad F5-TTS arch settings ({e})") from e


def read_config(path: Path) -> F5Config:
    """Read a `config.yaml` in upstream's schema (the whole training config or just its `model:` part)."""
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: unreadable config.yaml ({e})") from e
    except RecursionError as e:
        raise ValueError(f"{path}: unreadable config.yaml (nested too deeply)") from e
    model = raw.get("model", raw) if isinstance(raw, dict) else raw
    return parse_config(model, path)


def arch_yaml(name: str, model: dict | None = None) -> str:
    """The `config.yaml` koe writes into a model folder: `model:` in upstream's schema."""
    import yaml

    section = copy.deepcopy(model if model is not None else ARCHS[name])
    return "# F5-TTS model config in upstream's schema (the `model:` section of f5_tts/configs/<name>.yaml)\n" + yaml.safe_dump(
        {"model": section}, sort_keys=False
    )
