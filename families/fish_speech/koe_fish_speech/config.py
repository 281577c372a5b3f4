"""Fish Speech S2's `config.json` (`model_type: fish_qwen3_omni`) as frozen dataclasses.

The release nests two transformers: `text_config` (the slow, Qwen3-style stack over the time axis)
and `audio_decoder_config` (the fast stack that draws a frame's residual codebooks). Upstream reads
them into one flat argument set with these rules, which `read_lm_config` follows:

- required: `text_config.{vocab_size, n_layer, n_head, dim}` and
  `audio_decoder_config.{vocab_size (the codebook size), num_codebooks, n_layer}`;
- `n_local_heads` defaults to `n_head`; `head_dim` to 64 (not dim / n_head: upstream's dataclass
  default wins when the key is absent); `intermediate_size` to 2/3 of 4 * dim rounded up to a
  multiple of 256; `rope_base` 10000, `norm_eps` 1e-5, `max_seq_len` 2048, tied output;
- the fast stack's `dim`, `n_head`, `n_local_heads`, `head_dim`, `intermediate_size` and its
  attention options fall back to the slow stack's; its rotary base, norm eps and the whole model's
  context come from `text_config` (upstream ignores the audio decoder's own `rope_base`,
  `norm_eps` and `max_seq_len`);
- always for this model type: semantic positions' embeddings are scaled by 1/sqrt(codebooks + 1)
  and the fast stack reads the slow stack's normed hidden state.

The semantic token range comes from the tokenizer upstream (`<|semantic:i|>`), so the LM takes it
as arguments; the config's own `semantic_start_token_id` / `semantic_end_token_id` are kept for
reference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LMConfig", "LMConfigError", "StackConfig", "read_lm_config", "parse_lm_config"]

MODEL_TYPE = "fish_qwen3_omni"


class LMConfigError(ValueError):
    """A config.json that is not a Fish Speech S2 LM's, or one whose values do not fit together."""


@dataclass(frozen=True)
class StackConfig:
    """One transformer stack (slow or fast)."""

    layers: int
    dim: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    qkv_bias: bool
    o_bias: bool
    qk_norm: bool

    def __post_init__(self) -> None:
        for name in ("layers", "dim", "heads", "kv_heads", "head_dim", "intermediate_size"):
            if getattr(self, name) <= 0:
                raise LMConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.heads % self.kv_heads:
            raise LMConfigError(f"n_head ({self.heads}) must be a multiple of n_local_heads ({self.kv_heads})")
        if self.dim % self.heads:
            raise LMConfigError(f"dim ({self.dim}) must be a multiple of n_head ({self.heads})")
        if self.head_dim % 2:
            raise LMConfigError(f"head_dim must be even (rotary pairs), got {self.head_dim}")


@dataclass(frozen=True)
class LMConfig:
    """The dual-AR LM: the slow stack, the fast stack and what they share."""

    vocab_size: int
    slow: StackConfig
    fast: StackConfig
    codebook_size: int
    num_codebooks: int
    rope_base: float
    norm_eps: float
    max_seq_len: int
    tie_word_embeddings: bool
    semantic_start_token_id: int = 0
    semantic_end_token_id: int = 0

    def __post_init__(self) -> None:
        if self.vocab_size <= 0 or self.codebook_size <= 0 or self.num_codebooks < 1:
            raise LMConfigError("vocab_size, audio_decoder_config.vocab_size and num_codebooks must be positive")
        if self.max_seq_len < 8 or self.max_seq_len % 8:
            raise LMConfigError(
                f"text_config.max_seq_len must be a positive multiple of 8 (upstream's cache rounds it up to one and its mask then misses keys), got {self.max_seq_len}"
            )

    @property
    def cache_len(self) -> int:
        """The slow KV cache's length (upstream's: max_seq_len, a multiple of 8)."""
        return self.max_seq_len


def _default_intermediate(dim: int) -> int:
    hidden = int(2 * (4 * dim) / 3)
    return -(-hidden // 256) * 256


def _field(section: dict, key: str, where: str, kind: type | tuple[type, ...], default: object = None, required: bool = False) -> object:
    value = section.get(key)
    if value is None:
        if required:
            raise LMConfigError(f"config.json: {where}.{key} is missing")
        return default
    if isinstance(value, bool) and kind is not bool:
        raise LMConfigError(f"config.json: {where}.{key} must be a number, got {value!r}")
    if not isinstance(value, kind):
        raise LMConfigError(f"config.json: {where}.{key} has the wrong type: {value!r}")
    return value


def parse_lm_config(data: dict) -> LMConfig:
    """The LM config from a parsed config.json (see the module docstring for the rules)."""
    if not isinstance(data, dict):
        raise LMConfigError("config.json must hold a JSON object")
    if data.get("model_type") != MODEL_TYPE:
        raise LMConfigError(f"config.json: model_type is {data.get('model_type')!r}, expected {MODEL_TYPE!r} (Fish Speech S2)")
    text, audio = data.get("text_config"), data.get("audio_decoder_config")
    if not isinstance(text, dict) or not isinstance(audio, dict):
        raise LMConfigError("config.json: text_config and audio_decoder_config must both be objects")
    t, a = "text_config", "audio_decoder_config"
    dim = _field(text, "dim", t, int, required=True)
    heads = _field(text, "n_head", t, int, required=True)
    kv_heads = _field(text, "n_local_heads", t, int, -1)
    kv_heads = heads if kv_heads == -1 else kv_heads
    head_dim = _field(text, "head_dim", t, int, 64)
    intermediate = _field(text, "intermediate_size", t, int, _default_intermediate(dim))
    qkv_bias = _field(text, "attention_qkv_bias", t, bool, False)
    o_bias = _field(text, "attention_o_bias", t, bool, False)
    qk_norm = _field(text, "attention_qk_norm", t, bool, False)
    slow = StackConfig(_field(text, "n_layer", t, int, required=True), dim, heads, kv_heads, head_dim, intermediate, qkv_bias, o_bias, qk_norm)
    fast = StackConfig(
        layers=_field(audio, "n_layer", a, int, required=True),
        dim=_field(audio, "dim", a, int) or dim,
        heads=_field(audio, "n_head", a, int) or heads,
        kv_heads=_field(audio, "n_local_heads", a, int) or kv_heads,
        head_dim=_field(audio, "head_dim", a, int) or head_dim,
        intermediate_size=_field(audio, "intermediate_size", a, int) or intermediate,
        qkv_bias=_field(audio, "attention_qkv_bias", a, bool, qkv_bias),
        o_bias=_field(audio, "attention_o_bias", a, bool, o_bias),
        qk_norm=_field(audio, "attention_qk_norm", a, bool, qk_norm),
    )
    return LMConfig(
        vocab_size=_field(text, "vocab_size", t, int, required=True),
        slow=slow,
        fast=fast,
        codebook_size=_field(audio, "vocab_size", a, int, required=True),
        num_codebooks=_field(audio, "num_codebooks", a, int, required=True),
        rope_base=float(_field(text, "rope_base", t, (int, float), 10000)),
        norm_eps=float(_field(text, "norm_eps", t, (int, float), 1e-5)),
        max_seq_len=_field(text, "max_seq_len", t, int, 2048),
        tie_word_embeddings=_field(text, "tie_word_embeddings", t, bool, True),
        semantic_start_token_id=_field(data, "semantic_start_token_id", "config", int, 0),
        semantic_end_token_id=_field(data, "semantic_end_token_id", "config", int, 0),
    )


def read_lm_config(folder: str | Path) -> LMConfig:
    """The LM config from `folder/config.json` (or a config.json path)."""
    path = Path(folder)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LMConfigError(f"{path}: no config.json (a Fish Speech S2 folder has one)") from None
    except json.JSONDecodeError as e:
        raise LMConfigError(f"{path}: not valid JSON ({e})") from e
    return parse_lm_config(data)
