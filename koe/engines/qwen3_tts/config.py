"""Qwen3-TTS configuration, read from the checkpoint's own `config.json` and `generation_config.json`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koe.engines.qwen3_tts.spec import GENERATION_DEFAULTS, drops_instruct
from koe.nn.decoder import DecoderSpec
from koe.runtime.files import read_json_object

MODEL_TYPES = ("base", "custom_voice", "voice_design")
SUPPORTED_TOKENIZER = "qwen3_tts_tokenizer_12hz"


class ConfigError(ValueError):
    """A model folder's configuration is missing, malformed or unsupported."""


def _need(d: dict, key: str, where: str) -> Any:
    if key not in d:
        raise ConfigError(f"{where}: missing '{key}'")
    return d[key]


def _decoder_spec(d: dict, where: str) -> DecoderSpec:
    hidden = int(_need(d, "hidden_size", where))
    heads = int(d.get("num_attention_heads", 16))
    return DecoderSpec(
        hidden_size=hidden,
        intermediate_size=int(_need(d, "intermediate_size", where)),
        num_layers=int(_need(d, "num_hidden_layers", where)),
        num_heads=heads,
        num_kv_heads=int(d.get("num_key_value_heads") or heads),
        head_dim=int(d.get("head_dim") or hidden // heads),
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        rope_theta=d.get("rope_theta", 10000),
        attention_bias=bool(d.get("attention_bias", False)),
    )


@dataclass(frozen=True)
class CodePredictorConfig:
    """The sub-talker that predicts codebooks 1..G-1 of each frame."""

    decoder: DecoderSpec
    vocab_size: int
    num_code_groups: int

    @classmethod
    def from_dict(cls, d: dict) -> CodePredictorConfig:
        where = "talker_config.code_predictor_config"
        if d.get("use_sliding_window"):
            raise ConfigError(f"{where}: sliding-window attention is not supported")
        return cls(
            decoder=_decoder_spec(d, where),
            vocab_size=int(d.get("vocab_size", 2048)),
            num_code_groups=int(d.get("num_code_groups", 32)),
        )


@dataclass(frozen=True)
class TalkerConfig:
    """The talker: a Qwen3 decoder over text + codec embeddings that predicts codebook 0."""

    decoder: DecoderSpec
    code_predictor: CodePredictorConfig
    vocab_size: int
    text_vocab_size: int
    text_hidden_size: int
    num_code_groups: int
    mrope_section: tuple[int, ...]
    mrope_interleaved: bool
    codec_eos_id: int
    codec_think_id: int
    codec_nothink_id: int
    codec_think_bos_id: int
    codec_think_eos_id: int
    codec_pad_id: int
    codec_bos_id: int
    speaker_ids: dict[str, int] = field(default_factory=dict)
    speaker_dialects: dict[str, str | bool] = field(default_factory=dict)
    language_ids: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> TalkerConfig:
        where = "talker_config"
        if d.get("use_sliding_window"):
            raise ConfigError(f"{where}: sliding-window attention is not supported")
        rope = d.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ConfigError(f"{where}: rope type {rope.get('rope_type')!r} is not supported")
        spec = _decoder_spec(d, where)
        section = tuple(int(s) for s in rope.get("mrope_section", (spec.head_dim // 2, 0, 0)))
        if sum(section) != spec.head_dim // 2:
            raise ConfigError(f"{where}: mrope_section {list(section)} must sum to head_dim/2 = {spec.head_dim // 2}")
        cfg = cls(
            decoder=spec,
            code_predictor=CodePredictorConfig.from_dict(d.get("code_predictor_config") or {}),
            vocab_size=int(d.get("vocab_size", 3072)),
            text_vocab_size=int(d.get("text_vocab_size", 151936)),
            text_hidden_size=int(d.get("text_hidden_size", 2048)),
            num_code_groups=int(d.get("num_code_groups", 32)),
            mrope_section=section,
            mrope_interleaved=bool(rope.get("interleaved", False)),
            codec_eos_id=int(_need(d, "codec_eos_token_id", where)),
            codec_think_id=int(_need(d, "codec_think_id", where)),
            codec_nothink_id=int(_need(d, "codec_nothink_id", where)),
            codec_think_bos_id=int(_need(d, "codec_think_bos_id", where)),
            codec_think_eos_id=int(_need(d, "codec_think_eos_id", where)),
            codec_pad_id=int(_need(d, "codec_pad_id", where)),
            codec_bos_id=int(_need(d, "codec_bos_id", where)),
            speaker_ids={k.lower(): int(v) for k, v in (d.get("spk_id") or {}).items()},
            speaker_dialects={k.lower(): v for k, v in (d.get("spk_is_dialect") or {}).items()},
            language_ids={k.lower(): int(v) for k, v in (d.get("codec_language_id") or {}).items()},
        )
        if cfg.code_predictor.num_code_groups != cfg.num_code_groups:
            raise ConfigError(f"{where}: code predictor has {cfg.code_predictor.num_code_groups} code groups, talker {cfg.num_code_groups}")
        return cfg

    @property
    def languages(self) -> list[str]:
        """Languages a request may name: `auto` and every non-dialect language id."""
        return ["auto"] + [name for name in self.language_ids if "dialect" not in name]


@dataclass(frozen=True)
class Qwen3TTSConfig:
    """A whole Qwen3-TTS checkpoint's `config.json`."""

    talker: TalkerConfig
    model_type: str
    model_size: str
    tokenizer_type: str
    speaker_encoder: dict
    im_start_id: int = 151644
    im_end_id: int = 151645
    tts_pad_id: int = 151671
    tts_bos_id: int = 151672
    tts_eos_id: int = 151673
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: dict) -> Qwen3TTSConfig:
        model_type = d.get("tts_model_type")
        if model_type not in MODEL_TYPES:
            raise ConfigError(f"config.json: tts_model_type {model_type!r} is not one of {list(MODEL_TYPES)}")
        tokenizer_type = d.get("tokenizer_type")
        if tokenizer_type != SUPPORTED_TOKENIZER:
            raise ConfigError(f"config.json: tokenizer_type {tokenizer_type!r} is not supported (only {SUPPORTED_TOKENIZER!r}, the 12 Hz models)")
        return cls(
            talker=TalkerConfig.from_dict(_need(d, "talker_config", "config.json")),
            model_type=model_type,
            model_size=str(d.get("tts_model_size", "")),
            tokenizer_type=tokenizer_type,
            speaker_encoder=dict(d.get("speaker_encoder_config") or {}),
            im_start_id=int(d.get("im_start_token_id", 151644)),
            im_end_id=int(d.get("im_end_token_id", 151645)),
            tts_pad_id=int(d.get("tts_pad_token_id", 151671)),
            tts_bos_id=int(d.get("tts_bos_token_id", 151672)),
            tts_eos_id=int(d.get("tts_eos_token_id", 151673)),
            raw=d,
        )

    @classmethod
    def from_folder(cls, folder: Path) -> Qwen3TTSConfig:
        return cls.from_dict(read_json(Path(folder) / "config.json"))

    @property
    def drops_instruct(self) -> bool:
        """Upstream ignores instructions on the 0.6B CustomVoice model (`spec.drops_instruct`)."""
        return drops_instruct(self.model_type, self.model_size)


@dataclass(frozen=True)
class GenerationDefaults:
    """Sampling defaults: `generation_config.json` over upstream's (`spec.GENERATION_DEFAULTS`)."""

    do_sample: bool
    top_k: int
    top_p: float
    temperature: float
    repetition_penalty: float
    subtalker_dosample: bool
    subtalker_top_k: int
    subtalker_top_p: float
    subtalker_temperature: float
    max_new_tokens: int

    @classmethod
    def from_folder(cls, folder: Path) -> GenerationDefaults:
        path = Path(folder) / "generation_config.json"
        given = read_json(path) if path.exists() else {}
        return cls(**{k: given.get(k, v) for k, v in GENERATION_DEFAULTS.items()})


def read_json(path: Path) -> dict:
    if not path.exists():
        raise ConfigError(f"missing file: {path}")
    return read_json_object(path, ConfigError)
