"""OmniVoice's config, from the release's own files: `config.json` (the OmniVoice fields and its
Qwen3 `llm_config`) and `audio_tokenizer/config.json` (the HiggsAudio-v2 tokenizer: a DAC codec,
a HuBERT semantic model, RVQ codebooks). Fields a config leaves out take upstream's defaults
(transformers' `Qwen3Config`, `HiggsAudioV2TokenizerConfig`, `DacConfig`, `HubertConfig`); unknown
fields are ignored.

Torch-free: the spec reads it to describe a folder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koe.nn.hubert_config import HubertConfig
from koe.runtime.files import read_json_object

__all__ = [
    "AcousticConfig",
    "AudioTokenizerConfig",
    "LLMConfig",
    "OmniVoiceConfig",
    "SemanticConfig",
    "parse_audio_tokenizer_config",
    "parse_config",
    "read_audio_tokenizer_config",
    "read_config",
]

MODEL_TYPE = "omnivoice"
TOKENIZER_MODEL_TYPE = "higgs_audio_v2_tokenizer"


class ConfigError(ValueError):
    """A config.json that is not OmniVoice's, or one with impossible sizes."""


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class LLMConfig:
    """The Qwen3 backbone (`llm_config`), run bidirectionally."""

    vocab_size: int = 151936
    hidden_size: int = 4096
    intermediate_size: int = 22016
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 32
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    attention_bias: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim"):
            _positive(f"llm_config.{name}", getattr(self, name))
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                f"llm_config: num_attention_heads ({self.num_attention_heads}) must be a multiple of num_key_value_heads ({self.num_key_value_heads})"
            )


@dataclass(frozen=True)
class OmniVoiceConfig:
    """The masked-diffusion LM: 8 audio codebooks of 1024 entries plus a mask id, on a Qwen3 stack."""

    llm: LLMConfig
    audio_vocab_size: int = 1025
    audio_mask_id: int = 1024
    num_audio_codebook: int = 8
    audio_codebook_weights: tuple[float, ...] = (8, 8, 6, 6, 4, 4, 2, 2)

    def __post_init__(self) -> None:
        _positive("audio_vocab_size", self.audio_vocab_size)
        _positive("num_audio_codebook", self.num_audio_codebook)
        if not 0 <= self.audio_mask_id < self.audio_vocab_size:
            raise ConfigError(f"audio_mask_id ({self.audio_mask_id}) must be an id of the audio vocabulary (0..{self.audio_vocab_size - 1})")


@dataclass(frozen=True)
class AcousticConfig:
    """The DAC codec of the tokenizer (`acoustic_model_config`, transformers' `DacConfig`)."""

    encoder_hidden_size: int = 64
    decoder_hidden_size: int = 1024
    hidden_size: int = 256
    downsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)

    @property
    def hop_length(self) -> int:
        return math.prod(self.downsampling_ratios)


SemanticConfig = HubertConfig  # the tokenizer's HuBERT semantic model (`semantic_model_config`)


@dataclass(frozen=True)
class AudioTokenizerConfig:
    """HiggsAudio-v2's tokenizer: DAC acoustic branch + HuBERT semantic branch, fused, RVQ-coded."""

    acoustic: AcousticConfig = field(default_factory=AcousticConfig)
    semantic: SemanticConfig = field(default_factory=SemanticConfig)
    sample_rate: int = 24000
    semantic_sample_rate: int = 16000
    downsample_factor: int = 320
    codebook_size: int = 1024
    codebook_dim: int = 64
    kernel_size: int = 3
    unit_kernel_size: int = 3
    strides: tuple[int, ...] = (1, 1)
    channel_ratios: tuple[float, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)
    target_bandwidths: tuple[float, ...] = (0.5, 1, 1.5, 2, 4)

    def __post_init__(self) -> None:
        if len(self.strides) != len(self.channel_ratios):
            raise ConfigError("audio tokenizer: strides and channel_ratios must have the same length")
        if self.num_quantizers < 1:
            raise ConfigError("audio tokenizer: target_bandwidths give no codebook")

    @property
    def hop_length(self) -> int:
        return self.acoustic.hop_length

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def hidden_size(self) -> int:
        """Width of the fused acoustic + semantic features that the RVQ codes."""
        return self.acoustic.hidden_size + self.semantic.hidden_size

    @property
    def num_quantizers(self) -> int:
        """Codebooks at the highest bandwidth, as upstream counts them."""
        bits = math.ceil(math.log2(self.codebook_size))
        return int(1000 * self.target_bandwidths[-1] // (self.frame_rate * bits))

    @property
    def semantic_downsample_factor(self) -> int:
        return int(self.hop_length / (self.sample_rate / self.semantic_sample_rate) / self.downsample_factor)


def _known(cls: type, raw: dict, renames: dict[str, str] | None = None) -> dict:
    names = set(cls.__dataclass_fields__)
    out = {}
    for key, value in raw.items():
        key = (renames or {}).get(key, key)
        if key in names:
            out[key] = tuple(value) if isinstance(value, list) else value
    return out


def parse_config(raw: dict) -> OmniVoiceConfig:
    """`OmniVoiceConfig` from the dict of a release's `config.json`."""
    if raw.get("model_type") != MODEL_TYPE:
        raise ConfigError(f"not an OmniVoice config (model_type {raw.get('model_type')!r}, expected {MODEL_TYPE!r})")
    llm_raw = raw.get("llm_config")
    if not isinstance(llm_raw, dict) or llm_raw.get("model_type", "qwen3") != "qwen3":
        raise ConfigError("config.json: llm_config must be a Qwen3 config")
    llm_fields = _known(LLMConfig, llm_raw)
    rope = llm_raw.get("rope_parameters") or llm_raw.get("rope_scaling") or {}
    if "rope_theta" not in llm_fields and isinstance(rope, dict) and "rope_theta" in rope:
        llm_fields["rope_theta"] = rope["rope_theta"]
    if isinstance(rope, dict) and rope.get("rope_type", "default") != "default":
        raise ConfigError(f"llm_config: rope type {rope.get('rope_type')!r} is not supported (only the default rotary)")
    if llm_raw.get("use_sliding_window"):
        raise ConfigError("llm_config: sliding-window attention is not supported")
    if "head_dim" not in llm_fields:
        llm_fields["head_dim"] = llm_fields.get("hidden_size", LLMConfig.hidden_size) // llm_fields.get("num_attention_heads", LLMConfig.num_attention_heads)
    llm = LLMConfig(**llm_fields)
    fields_ = _known(OmniVoiceConfig, raw)
    fields_.pop("llm", None)
    return OmniVoiceConfig(llm=llm, **fields_)


def parse_audio_tokenizer_config(raw: dict) -> AudioTokenizerConfig:
    """`AudioTokenizerConfig` from the dict of `audio_tokenizer/config.json` (defaults as transformers fills them)."""
    if raw.get("model_type") != TOKENIZER_MODEL_TYPE:
        raise ConfigError(f"not a HiggsAudio-v2 tokenizer config (model_type {raw.get('model_type')!r}, expected {TOKENIZER_MODEL_TYPE!r})")
    acoustic_raw = raw.get("acoustic_model_config") or {}
    semantic_raw = raw.get("semantic_model_config") or {}
    if acoustic_raw.get("model_type", "dac") != "dac" or semantic_raw.get("model_type", "hubert") != "hubert":
        raise ConfigError("audio tokenizer: only a DAC acoustic model and a HuBERT semantic model are supported")
    fields_ = _known(AudioTokenizerConfig, raw)
    fields_.pop("acoustic", None)
    fields_.pop("semantic", None)
    return AudioTokenizerConfig(
        acoustic=AcousticConfig(**_known(AcousticConfig, acoustic_raw)), semantic=SemanticConfig(**_known(SemanticConfig, semantic_raw)), **fields_
    )


def read_config(folder: Path) -> OmniVoiceConfig:
    return parse_config(read_json_object(Path(folder) / "config.json"))


def read_audio_tokenizer_config(folder: Path) -> AudioTokenizerConfig:
    return parse_audio_tokenizer_config(read_json_object(Path(folder) / "audio_tokenizer" / "config.json"))
