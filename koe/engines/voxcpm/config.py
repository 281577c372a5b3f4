"""VoxCPM model config, from the release's own `config.json` (upstream's `VoxCPMConfig` schema).

Two architectures share the schema: `"architecture": "voxcpm2"` (VoxCPM2: AudioVAE V2, 16 kHz in
and 48 kHz out, a fusion projection into the residual LM, LocDiT V2 taking both LM states as two
tokens) and `"voxcpm"` (VoxCPM 1.5 and the 0.5B first release: AudioVAE V1, one sample rate,
residual input and DiT condition as sums). A missing `architecture` means `"voxcpm"`, as upstream
reads it. Fields a config leaves out take upstream's defaults for its architecture; unknown fields
are ignored (pydantic's default, which upstream relies on). The encoder, the residual LM and the
DiT are MiniCPM-4 stacks copied from `lm_config` with their own sizes, as upstream builds them.

Torch-free: the spec reads it to describe a folder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from koe.runtime.files import read_json_object

__all__ = ["ARCHITECTURES", "CfmConfig", "LMConfig", "VoxCPMConfig", "parse_config", "read_config"]

ARCHITECTURES = ("voxcpm2", "voxcpm")


@dataclass(frozen=True)
class RopeScaling:
    """MiniCPM's "longrope": per-frequency factors and a magnitude scale from the context ratio."""

    type: str
    long_factor: tuple[float, ...]
    short_factor: tuple[float, ...]
    original_max_position_embeddings: int


@dataclass(frozen=True)
class LMConfig:
    """One MiniCPM-4 stack (`MiniCPM4Config`): the base LM, or a copy resized for another part."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_hidden_layers: int
    num_key_value_heads: int
    rms_norm_eps: float
    rope_scaling: RopeScaling
    vocab_size: int
    scale_emb: float
    dim_model_base: int
    scale_depth: float
    rope_theta: float
    max_position_embeddings: int
    bos_token_id: int = 1
    eos_token_id: int = 2
    use_mup: bool = True
    kv_channels: int | None = None
    no_rope: bool = False

    @property
    def head_dim(self) -> int:
        return self.kv_channels if self.kv_channels else self.hidden_size // self.num_attention_heads

    @property
    def residual_scale(self) -> float:
        """muP's scale on each block's output before the residual sum (1 without muP)."""
        return self.scale_depth / math.sqrt(self.num_hidden_layers) if self.use_mup else 1.0

    @property
    def embedding_scale(self) -> float:
        return self.scale_emb if self.use_mup else 1.0


@dataclass(frozen=True)
class LocalConfig:
    """The local encoder's or the DiT's size (`encoder_config`, `dit_config`)."""

    hidden_dim: int = 1024
    ffn_dim: int = 4096
    num_heads: int = 16
    num_layers: int = 4
    kv_channels: int | None = None


@dataclass(frozen=True)
class CfmConfig:
    """The flow-matching settings (`dit_config.cfm_config`): inference reads none but the solver;
    training (`finetune/objective.py`) reads the time scheduler, the condition drop rate and the
    condition noise."""

    sigma_min: float = 1e-6
    solver: str = "euler"
    t_scheduler: str = "log-norm"
    inference_cfg_rate: float = 1.0
    training_cfg_rate: float = 0.1
    ratio_r_neq_t_range: tuple[float, float] = (0.25, 0.75)
    noise_cond_prob_range: tuple[float, float] = (0.0, 0.0)
    noise_cond_scale: float = 0.0


@dataclass(frozen=True)
class VoxCPMConfig:
    architecture: str
    lm: LMConfig
    encoder: LocalConfig
    dit: LocalConfig
    cfm: CfmConfig
    patch_size: int
    feat_dim: int
    residual_lm_num_layers: int
    residual_lm_no_rope: bool
    scalar_quantization_latent_dim: int
    scalar_quantization_scale: int
    dit_mean_mode: bool
    max_length: int
    dtype: str
    audio_vae: dict[str, Any] | None = field(default=None, hash=False, compare=False)

    @property
    def v2(self) -> bool:
        return self.architecture == "voxcpm2"

    @property
    def vae_version(self) -> int:
        return 2 if self.v2 else 1

    def _local(self, part: LocalConfig) -> LMConfig:
        return replace(
            self.lm,
            hidden_size=part.hidden_dim,
            intermediate_size=part.ffn_dim,
            num_attention_heads=part.num_heads,
            num_hidden_layers=part.num_layers,
            kv_channels=part.kv_channels,
            vocab_size=0,
        )

    @property
    def residual_lm(self) -> LMConfig:
        return replace(self.lm, num_hidden_layers=self.residual_lm_num_layers, vocab_size=0, no_rope=self.residual_lm_no_rope if self.v2 else self.lm.no_rope)

    @property
    def encoder_lm(self) -> LMConfig:
        return self._local(self.encoder)

    @property
    def dit_lm(self) -> LMConfig:
        return self._local(self.dit)


# upstream's defaults per architecture (VoxCPMConfig in model/voxcpm.py and model/voxcpm2.py)
_DEFAULTS = {
    "voxcpm": {"patch_size": 2, "residual_lm_num_layers": 6, "scalar_quantization_latent_dim": 256, "max_length": 4096},
    "voxcpm2": {"patch_size": 4, "residual_lm_num_layers": 8, "scalar_quantization_latent_dim": 512, "max_length": 8192},
}
_LM_REQUIRED = (
    "hidden_size",
    "intermediate_size",
    "max_position_embeddings",
    "num_attention_heads",
    "num_hidden_layers",
    "num_key_value_heads",
    "rms_norm_eps",
    "rope_scaling",
    "vocab_size",
    "scale_emb",
    "dim_model_base",
    "scale_depth",
    "rope_theta",
    "bos_token_id",
    "eos_token_id",
)


def _need(d: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{where}: missing {key!r}")
    value = d[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise ValueError(f"{where}: {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _opt(d: dict, key: str, default: Any, where: str, kind: type) -> Any:
    if d.get(key) is None:
        return default
    return _need(d, key, where, kind)


def _lm(d: Any, where: str) -> LMConfig:
    if not isinstance(d, dict):
        raise ValueError(f"{where}: lm_config must be an object")
    for key in _LM_REQUIRED:
        if key not in d:
            raise ValueError(f"{where}: lm_config is missing {key!r}")
    rs = d["rope_scaling"]
    if not isinstance(rs, dict):
        raise ValueError(f"{where}: lm_config.rope_scaling must be an object")
    for key in ("type", "long_factor", "short_factor", "original_max_position_embeddings"):
        if key not in rs:
            raise ValueError(f"{where}: lm_config.rope_scaling is missing {key!r}")
    ints = {
        k: _need(d, k, f"{where}: lm_config", int)
        for k in (
            "hidden_size",
            "intermediate_size",
            "max_position_embeddings",
            "num_attention_heads",
            "num_hidden_layers",
            "num_key_value_heads",
            "vocab_size",
            "dim_model_base",
            "bos_token_id",
            "eos_token_id",
        )
    }
    floats = {k: _need(d, k, f"{where}: lm_config", float) for k in ("rms_norm_eps", "scale_emb", "scale_depth", "rope_theta")}
    cfg = LMConfig(
        **ints,
        **floats,
        rope_scaling=RopeScaling(
            str(rs["type"]),
            tuple(float(x) for x in rs["long_factor"]),
            tuple(float(x) for x in rs["short_factor"]),
            int(rs["original_max_position_embeddings"]),
        ),
        use_mup=bool(d.get("use_mup", True)),
        kv_channels=d.get("kv_channels"),
        no_rope=bool(d.get("no_rope", False)),
    )
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise ValueError(f"{where}: num_attention_heads must be a multiple of num_key_value_heads")
    if not cfg.no_rope and len(cfg.rope_scaling.short_factor) != cfg.head_dim // 2:
        raise ValueError(f"{where}: rope_scaling factors must have head_dim / 2 = {cfg.head_dim // 2} entries")
    return cfg


def _local(d: Any, where: str) -> LocalConfig:
    if not isinstance(d, dict):
        raise ValueError(f"{where} must be an object")
    base = LocalConfig()
    return LocalConfig(**{k: _opt(d, k, getattr(base, k), where, int) for k in ("hidden_dim", "ffn_dim", "num_heads", "num_layers", "kv_channels")})


def parse_config(raw: dict, where: str | Path = "config.json") -> VoxCPMConfig:
    """A validated config from a parsed `config.json`; `ValueError` naming the field otherwise."""
    where = str(where)
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not a JSON object")
    arch = str(raw.get("architecture", "voxcpm")).lower()
    if arch not in ARCHITECTURES:
        raise ValueError(f"{where}: unsupported architecture {arch!r}; koe runs {', '.join(ARCHITECTURES)}")
    defaults = _DEFAULTS[arch]
    lm = _lm(raw.get("lm_config"), where)
    dit_raw = raw.get("dit_config")
    if not isinstance(dit_raw, dict):
        raise ValueError(f"{where}: dit_config must be an object")
    cfm_raw = dit_raw.get("cfm_config")
    if not isinstance(cfm_raw, dict):
        raise ValueError(f"{where}: dit_config.cfm_config must be an object")
    cfm = CfmConfig(
        float(cfm_raw.get("sigma_min", 1e-6)),
        str(cfm_raw.get("solver", "euler")),
        str(cfm_raw.get("t_scheduler", "log-norm")),
        float(cfm_raw.get("inference_cfg_rate", 1.0)),
        float(cfm_raw.get("training_cfg_rate", 0.1)),
        _pair(cfm_raw.get("ratio_r_neq_t_range", (0.25, 0.75)), f"{where}: cfm_config.ratio_r_neq_t_range"),
        _pair(cfm_raw.get("noise_cond_prob_range", (0.0, 0.0)), f"{where}: cfm_config.noise_cond_prob_range"),
        float(cfm_raw.get("noise_cond_scale", 0.0)),
    )
    if cfm.solver != "euler":
        raise ValueError(f"{where}: cfm solver {cfm.solver!r} is not supported (upstream runs euler)")
    # VoxCPM2 keeps the mean-velocity switch in dit_config, VoxCPM 1.5 at the top level
    mean_mode = dit_raw.get("dit_mean_mode", False) if arch == "voxcpm2" else raw.get("dit_mean_mode", False)
    vae = raw.get("audio_vae_config")
    if vae is not None and not isinstance(vae, dict):
        raise ValueError(f"{where}: audio_vae_config must be an object")
    cfg = VoxCPMConfig(
        architecture=arch,
        lm=lm,
        encoder=_local(raw.get("encoder_config", {}), f"{where}: encoder_config"),
        dit=_local(dit_raw, f"{where}: dit_config"),
        cfm=cfm,
        patch_size=_opt(raw, "patch_size", defaults["patch_size"], where, int),
        feat_dim=_opt(raw, "feat_dim", 64, where, int),
        residual_lm_num_layers=_opt(raw, "residual_lm_num_layers", defaults["residual_lm_num_layers"], where, int),
        residual_lm_no_rope=bool(raw.get("residual_lm_no_rope", False)),
        scalar_quantization_latent_dim=_opt(raw, "scalar_quantization_latent_dim", defaults["scalar_quantization_latent_dim"], where, int),
        scalar_quantization_scale=_opt(raw, "scalar_quantization_scale", 9, where, int),
        dit_mean_mode=bool(mean_mode),
        max_length=_opt(raw, "max_length", defaults["max_length"], where, int),
        dtype=str(raw.get("dtype", "bfloat16")),
        audio_vae=vae,
    )
    if cfg.patch_size < 1 or cfg.feat_dim < 1 or cfg.max_length < 2:
        raise ValueError(f"{where}: patch_size, feat_dim must be >= 1 and max_length >= 2")
    return cfg


def _pair(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{where} must be two numbers")
    return float(value[0]), float(value[1])


def read_config(path: str | Path) -> VoxCPMConfig:
    path = Path(path)
    return parse_config(read_json_object(path), path)
