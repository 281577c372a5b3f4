"""Configuration of Qwen3-TTS's 12 Hz speech tokenizer, read from `speech_tokenizer/config.json`.

The file has a top level (sample rates, how many encoder quantizers are kept), an `encoder_config`
in the form of a Mimi configuration, and a `decoder_config`. Unknown keys are ignored, as upstream
ignores them; values koe cannot run (another `model_type`, non-causal convolutions, ...) are errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from koe.runtime.files import read_json_object

MODEL_TYPE = "qwen3_tts_tokenizer_12hz"


class CodecConfigError(ValueError):
    """A speech tokenizer configuration koe cannot run."""


def _take(cls: type, raw: dict[str, Any], renames: dict[str, str] | None = None) -> dict[str, Any]:
    """The entries of `raw` that are fields of dataclass `cls` (after renaming keys)."""
    renames = renames or {}
    names = {f.name for f in fields(cls)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key = renames.get(key, key)
        if key in names:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


@dataclass
class DecoderConfig:
    """`decoder_config`: codes -> waveform. Defaults are upstream's constructor defaults."""

    codebook_dim: int = 512
    codebook_size: int = 2048
    hidden_size: int = 1024
    latent_dim: int = 1024
    max_position_embeddings: int = 8000
    rope_theta: float = 10000.0
    num_attention_heads: int = 16
    num_key_value_heads: int = 16
    head_dim: int | None = None
    attention_bias: bool = False
    sliding_window: int = 72
    intermediate_size: int = 3072
    hidden_act: str = "silu"
    layer_scale_initial_scale: float = 0.01
    rms_norm_eps: float = 1e-5
    num_hidden_layers: int = 8
    num_quantizers: int = 16
    upsample_rates: list[int] = field(default_factory=lambda: [8, 5, 4, 3])
    upsampling_ratios: list[int] = field(default_factory=lambda: [2, 2])
    decoder_dim: int = 1536

    def __post_init__(self) -> None:
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.hidden_act != "silu":
            raise CodecConfigError(f"decoder_config.hidden_act {self.hidden_act!r} is not supported (only 'silu')")
        if self.num_attention_heads % self.num_key_value_heads:
            raise CodecConfigError("decoder_config: num_attention_heads must be a multiple of num_key_value_heads")
        if self.codebook_dim % 2:
            raise CodecConfigError("decoder_config.codebook_dim must be even (the quantizer works at half of it)")
        if self.num_quantizers < 2:
            raise CodecConfigError("decoder_config.num_quantizers must be at least 2 (1 semantic + acoustic)")
        if self.decoder_dim % 2 ** len(self.upsample_rates):
            raise CodecConfigError("decoder_config.decoder_dim must halve evenly at every upsample stage")

    @property
    def total_upsample(self) -> int:
        """Waveform samples per code frame (product of all upsampling factors)."""
        return int(math.prod(list(self.upsample_rates) + list(self.upsampling_ratios)))


@dataclass
class EncoderConfig:
    """`encoder_config` (transformers' Mimi form): waveform -> codes."""

    sampling_rate: int = 24000
    frame_rate: float | None = None
    audio_channels: int = 1
    hidden_size: int = 512
    num_filters: int = 64
    num_residual_layers: int = 1
    upsampling_ratios: list[int] = field(default_factory=lambda: [8, 6, 5, 4])
    kernel_size: int = 7
    last_kernel_size: int = 3
    residual_kernel_size: int = 3
    dilation_growth_rate: int = 2
    use_causal_conv: bool = True
    pad_mode: str = "constant"
    compress: int = 2
    trim_right_ratio: float = 1.0
    codebook_size: int = 2048
    codebook_dim: int = 256
    num_quantizers: int = 32
    use_conv_shortcut: bool = False
    vector_quantization_hidden_dimension: int = 256
    num_semantic_quantizers: int = 1
    upsample_groups: int = 512
    num_hidden_layers: int = 8
    intermediate_size: int = 2048
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int | None = None
    hidden_act: str = "gelu"
    max_position_embeddings: int = 8000
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    sliding_window: int = 250
    layer_scale_initial_scale: float = 0.01
    attention_bias: bool = False

    def __post_init__(self) -> None:
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        problems = []
        if not self.use_causal_conv:
            problems.append("use_causal_conv must be true")
        if self.pad_mode != "constant":
            problems.append(f"pad_mode {self.pad_mode!r} is not supported (only 'constant')")
        if self.use_conv_shortcut:
            problems.append("use_conv_shortcut is not supported")
        if self.audio_channels != 1:
            problems.append("only mono audio (audio_channels 1) is supported")
        if self.hidden_act != "gelu":
            problems.append(f"hidden_act {self.hidden_act!r} is not supported (only 'gelu')")
        if self.num_semantic_quantizers >= self.num_quantizers:
            problems.append("num_semantic_quantizers must be below num_quantizers")
        if 2 ** int(math.log2(self.codebook_size)) != self.codebook_size:
            problems.append("codebook_size must be a power of 2")
        if self.hidden_size % self.num_attention_heads:
            problems.append("hidden_size must be divisible by num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            problems.append("num_attention_heads must be a multiple of num_key_value_heads")
        if self.resolved_frame_rate == self.encodec_frame_rate:
            problems.append("frame_rate equals the SEANet frame rate: no downsampling layer (not supported)")
        if problems:
            raise CodecConfigError("encoder_config: " + "; ".join(problems))

    @property
    def encodec_frame_rate(self) -> int:
        """Frame rate at the SEANet encoder's output, before the stride-2 downsampling."""
        return math.ceil(self.sampling_rate / math.prod(self.upsampling_ratios))

    @property
    def resolved_frame_rate(self) -> float:
        """Frames per second of the codes (stored as `_frame_rate` in the release)."""
        if self.frame_rate is not None:
            return self.frame_rate
        return self.sampling_rate / (math.prod(self.upsampling_ratios) * 2)

    @property
    def downsample_kernel_size(self) -> int:
        return 2 * int(self.encodec_frame_rate / self.resolved_frame_rate)


@dataclass
class SpeechTokenizerConfig:
    """The whole `speech_tokenizer/config.json`."""

    encoder: EncoderConfig
    decoder: DecoderConfig
    encoder_valid_num_quantizers: int = 16
    input_sample_rate: int = 24000
    output_sample_rate: int = 24000
    decode_upsample_rate: int = 1920
    encode_downsample_rate: int = 1920

    def __post_init__(self) -> None:
        if not 0 < self.encoder_valid_num_quantizers <= self.encoder.num_quantizers:
            raise CodecConfigError("encoder_valid_num_quantizers must be in 1..encoder_config.num_quantizers")
        if self.encoder_valid_num_quantizers < self.encoder.num_semantic_quantizers:
            raise CodecConfigError("encoder_valid_num_quantizers must cover the semantic quantizers")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SpeechTokenizerConfig:
        """Build and validate from the parsed JSON; an unknown `model_type` is an error."""
        model_type = raw.get("model_type")
        if model_type != MODEL_TYPE:
            raise CodecConfigError(f"unsupported speech tokenizer model_type {model_type!r}: koe supports only {MODEL_TYPE!r}")
        try:
            encoder = EncoderConfig(**_take(EncoderConfig, raw.get("encoder_config") or {}, {"_frame_rate": "frame_rate"}))
            decoder = DecoderConfig(**_take(DecoderConfig, raw.get("decoder_config") or {}))
        except TypeError as exc:  # pragma: no cover - dataclass argument errors
            raise CodecConfigError(str(exc)) from exc
        top = {
            k: raw[k]
            for k in ("encoder_valid_num_quantizers", "input_sample_rate", "output_sample_rate", "decode_upsample_rate", "encode_downsample_rate")
            if k in raw
        }
        return cls(encoder=encoder, decoder=decoder, **top)

    @classmethod
    def from_file(cls, path: str | Path) -> SpeechTokenizerConfig:
        """Read `config.json` (a file, or the folder holding it)."""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            raise FileNotFoundError(f"{path} not found")
        return cls.from_dict(read_json_object(path, CodecConfigError))
