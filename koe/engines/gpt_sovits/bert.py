"""The BERT encoder GPT-SoVITS reads text features from (`chinese-roberta-wwm-ext-large`), and G2PW's.

Upstream loads the released folder with transformers' `AutoModelForMaskedLM` (a `BertForMaskedLM`)
and asks for every hidden state; only the encoder matters, the masked-LM head (`cls.*`) is never
used, so koe does not build it. This is a post-LN BERT as transformers computes it in float32:

* embeddings: `(word + token type) + absolute position`, then a layer norm;
* each layer: q/k/v projections split into heads, SDPA with no mask when every position is real
  (transformers drops an all-ones mask and SDPA then picks the same kernel), else the additive
  mask transformers builds (0 where attended, float32's minimum where not); the heads merged,
  a projection, `LayerNorm(h + x)`; a feed-forward with erf GELU (`hidden_act: "gelu"`), a
  projection, `LayerNorm(h + x)`.

`Bert.forward` returns the hidden states as transformers' `hidden_states` does (the embeddings'
output, then each layer's), up to `layers` layers: GPT-SoVITS reads `hidden_states[-3]`, so the
last two of 24 layers need not run (`layers=num_hidden_layers - 2`).

Parameter names are the released checkpoint's without `bert.`; `read_bert` loads a folder's
`pytorch_model.bin` (`torch.load(weights_only=True)`: the release is a plain fp16 state dict) or
`model.safetensors`, skips the head (`cls.*`), a pooler, and the `position_ids` buffer
transformers 4.30 saved, and reads TF-era `gamma`/`beta` layer-norm names as transformers does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.runtime.files import read_json_object
from koe.runtime.weights import WeightsError, build_from_weights

__all__ = ["Bert", "BertConfig", "bert_weight_file", "read_bert", "rename_bert_key"]


class BertConfigError(ValueError):
    """A BERT folder's config.json is missing, unreadable or describes another model."""


@dataclass(frozen=True)
class BertConfig:
    """The encoder's sizes from a transformers BERT `config.json`."""

    vocab_size: int
    hidden_size: int = 1024
    num_hidden_layers: int = 24
    num_attention_heads: int = 16
    intermediate_size: int = 4096
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    position_embedding_type: str = "absolute"

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise BertConfigError(f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}")
        if self.hidden_act != "gelu":
            raise BertConfigError(f"hidden_act {self.hidden_act!r}: koe's BERT runs transformers' 'gelu' (erf) only")
        if self.position_embedding_type != "absolute":
            raise BertConfigError(f"position_embedding_type {self.position_embedding_type!r}: koe's BERT runs 'absolute' only")
        if min(self.vocab_size, self.num_hidden_layers, self.intermediate_size, self.max_position_embeddings, self.type_vocab_size) < 1:
            raise BertConfigError("BERT sizes must be positive")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        d = read_json_object(path, BertConfigError)
        if d.get("model_type", "bert") != "bert":
            raise BertConfigError(f"{path}: model_type {d.get('model_type')!r} is not a BERT")
        if "vocab_size" not in d:
            raise BertConfigError(f"{path}: no vocab_size")
        try:
            return cls(**{k: type(getattr(_DEFAULTS, k))(d[k]) for k in _FIELDS if k in d})
        except (TypeError, ValueError) as e:
            raise BertConfigError(f"{path}: {e}") from e


_FIELDS = tuple(BertConfig.__dataclass_fields__)
_DEFAULTS = BertConfig(vocab_size=1)


class _Embeddings(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]  # (1, T)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        return self.LayerNorm(x)


class _SelfAttention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = c.num_attention_heads, c.head_dim
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, t, width = x.shape
        q = self.query(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        k = self.key(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.value(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.transpose(1, 2).reshape(b, t, width)


class _DenseNorm(nn.Module):
    """`LayerNorm(dense(h) + x)`: BERT's `BertSelfOutput` and `BertOutput`."""

    def __init__(self, c_in: int, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c_in, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(h) + x)


class _Attention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.self = _SelfAttention(c)
        self.output = _DenseNorm(c.hidden_size, c)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class _Intermediate(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.attention = _Attention(c)
        self.intermediate = _Intermediate(c)
        self.output = _DenseNorm(c.intermediate_size, c)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class _Encoder(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(c) for _ in range(c.num_hidden_layers))


def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """transformers' SDPA mask from a (B, T) 0/1 mask: None when every position is attended (it
    drops such a mask), else (B, 1, T, T) with 0 where attended and `finfo(dtype).min` where not."""
    if attention_mask is None or bool((attention_mask == 1).all()):
        return None
    b, t = attention_mask.shape
    expanded = attention_mask[:, None, None, :].expand(b, 1, t, t).to(dtype)
    inverted = 1.0 - expanded
    return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)


class Bert(nn.Module):
    """A BERT encoder: token ids (B, T) -> hidden states, as transformers' `BertModel` gives them."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.config = c
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        layers: int | None = None,
    ) -> list[torch.Tensor]:
        """`hidden_states` (each (B, T, C)): the embeddings' output, then the output of each of the
        first `layers` layers (all by default). `token_type_ids` default to zeros, `attention_mask`
        (B, T) of 0/1 to all ones."""
        n = len(self.encoder.layer) if layers is None else layers
        if not 0 <= n <= len(self.encoder.layer):
            raise ValueError(f"layers must be in 0..{len(self.encoder.layer)}, got {layers}")
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise ValueError(f"{input_ids.shape[1]} tokens: this BERT takes at most {self.config.max_position_embeddings}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        mask = additive_mask(attention_mask, x.dtype)
        states = [x]
        for layer in self.encoder.layer[:n]:
            x = layer(x, mask)
            states.append(x)
        return states


def rename_bert_key(key: str) -> str | None:
    """A released `BertForMaskedLM` / `BertModel` tensor name -> `Bert`'s, or None to skip it."""
    if key.startswith("bert."):
        key = key[len("bert.") :]
    if key.startswith(("cls.", "pooler.")) or key == "embeddings.position_ids":
        return None
    if key.endswith(".gamma"):
        return key[: -len("gamma")] + "weight"
    if key.endswith(".beta"):
        return key[: -len("beta")] + "bias"
    return key


def bert_weight_file(folder: str | Path) -> Path:
    """The folder's weights: `model.safetensors` if there, else `pytorch_model.bin` (transformers' order)."""
    folder = Path(folder)
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return folder / name
    raise WeightsError(f"no BERT weights in {folder}: expected model.safetensors or pytorch_model.bin")


def read_bert(folder: str | Path, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> Bert:
    """The encoder of a transformers BERT folder (`config.json` + weights), in `dtype` (the fp16
    release is widened, as transformers loads it for upstream's float32 path), in eval mode."""
    folder = Path(folder)
    config = BertConfig.from_json(folder / "config.json")
    return build_from_weights(lambda: Bert(config), [bert_weight_file(folder)], dtype=dtype, device=device, rename=rename_bert_key).eval()
