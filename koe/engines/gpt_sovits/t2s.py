"""GPT-SoVITS's AR text-to-semantic model ("GPT", upstream's `Text2SemanticDecoder`), v1/v2/v3/v4.

Phonemes (with their BERT features) and the reference's semantic tokens are one sequence to a
post-norm transformer (a VALL-E style decoder): text positions see all text and no audio; audio
positions see all text and the audio before them. Each new semantic token is embedded and decoded
against a growing key/value cache; `ar_predict_layer` gives logits over the semantic codebook and
EOS (the last id).

- Text: `ar_text_embedding(phones) + bert_proj(bert.T)` (BERT features, 1024 per phoneme), then a
  sine positional table (`SinePositions`) scaled by its learned `alpha`.
- Audio: `ar_audio_embedding(tokens)` plus its own positional table and `alpha`; the token decoded
  at step i sits at position `prompt_len + i`.
- Blocks (`T2SBlock`): the weights of a `nn.TransformerEncoderLayer`-like layer
  (`self_attn.in_proj_*`, `self_attn.out_proj`, `linear1`/`linear2` with ReLU, `norm1`/`norm2`,
  eps 1e-5, post-norm), run the way upstream's inference runs them (its TorchScript `T2SBlock`):
  one fused q/k/v product split in three, SDPA with upstream's boolean mask (True = masked,
  inverted for SDPA), the cache kept as (B, S, C) rows grown by `torch.cat` (koe's `ConcatCache`,
  whose sequence axis is the second last), exactly as upstream keeps it, so attention sees tensors
  of the same shapes and layouts and the float bits match.

Parameter names are the released ones without upstream's `model.` prefix (gpt_weights.py), but for
the fused q/k/v (`RELEASED_NAMES`), so the file loads strictly. Decoding loops are in t2s_decode.py, sampling in sampling.py.

Precision: the model declares its backbone (`Text2Semantic.backbone`: the blocks' linear layers)
to the kit's precision layer (`koe.runtime.precision`): `load_t2s(..., precision="fp32")` (exact)
on a CPU where koe's exact kernel gives torch's float32 bits (`koe.runtime.exact`) runs them there
from packed weights (the same bits, checked per layer shape at load; `Text2Semantic.kernel` names
it); "int8" / "int4" (opt-in, other bits: docs/precision.md) quantize them onto koe's C kernels,
the LayerNorms, embeddings, BERT projection and output layer staying float32; without a
precision, torch's own products.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.gpt_sovits.gpt_weights import GPTConfig, read_gpt
from koe.engines.gpt_sovits.spec import PRECISIONS
from koe.runtime import precision as numeric
from koe.runtime.kv_cache import ConcatCache, ConcatLayerCache
from koe.runtime.weights import WeightsError

__all__ = ["BERT_DIM", "PRECISIONS", "RELEASED_NAMES", "SinePositions", "T2SBlock", "Text2Semantic", "load_t2s", "module_name"]

BERT_DIM = 1024  # upstream's bert_proj input: chinese-roberta-wwm-ext-large's width, fixed
PE_LENGTH = 4000  # positions upstream's tables are built with at construction
NORM_EPS = 1e-5
RELEASED_NAMES = {"self_attn.in_proj_weight": "self_attn.in_proj.weight", "self_attn.in_proj_bias": "self_attn.in_proj.bias"}


def sine_table(length: int, dim: int) -> torch.Tensor:
    """(1, length, dim) float32: sin at even channels, cos at odd, as upstream's `extend_pe` builds it."""
    pe = torch.zeros(length, dim)
    position = torch.arange(0, length, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.unsqueeze(0)


class SinePositions(nn.Module):
    """Upstream's `SinePositionalEmbedding(scale=False, alpha=True)`: `x + alpha * pe[position]`.

    Upstream builds its table for 4,000 positions and rebuilds it at a longer sequence's length
    (which it then keeps); the values of a position do not depend on the table's length, except
    through the vectorised sin/cos, so a longer table is built per call here and the 4,000 kept.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1))
        self.register_buffer("pe", sine_table(PE_LENGTH, dim), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) at positions 0..T-1."""
        pe = self.pe if x.shape[1] <= self.pe.shape[1] else sine_table(x.shape[1], x.shape[2]).to(x.device)
        return x * 1.0 + self.alpha * pe[:, : x.shape[1]]  # upstream's x_scale is 1.0

    def at(self, x: torch.Tensor, position: int) -> torch.Tensor:
        """x (B, 1, C) at `position` (upstream's decode step: `y_emb * x_scale + alpha * pe[:, pos]`)."""
        return x * 1.0 + self.alpha * self.pe[:, position].to(dtype=x.dtype)


class TokenEmbedding(nn.Module):
    """Upstream's `TokenEmbedding`: an `nn.Embedding` under the name `word_embeddings`."""

    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.word_embeddings(ids)


class FusedSelfAttention(nn.Module):
    """The weights of upstream's `MultiheadAttention`: q, k, v stacked in one (3C, C) product, released
    as `in_proj_weight` / `in_proj_bias` and held here as the linear layer `in_proj` (renamed at load,
    `RELEASED_NAMES`), so that koe's precision modes see it as they see every other linear."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.in_proj = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.in_proj(x).chunk(3, dim=-1)


class T2SBlock(nn.Module):
    """One post-norm transformer layer (see the module docstring)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.self_attn = FusedSelfAttention(dim)
        self.linear1 = nn.Linear(dim, 4 * dim)
        self.linear2 = nn.Linear(4 * dim, dim)
        self.norm1 = nn.LayerNorm(dim, eps=NORM_EPS)
        self.norm2 = nn.LayerNorm(dim, eps=NORM_EPS)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, masked: torch.Tensor | None) -> torch.Tensor:
        b, t, s = q.shape[0], q.shape[1], k.shape[1]
        q = q.view(b, t, self.heads, -1).transpose(1, 2)  # (B, H, T, D)
        k = k.view(b, s, self.heads, -1).transpose(1, 2)  # (B, H, S, D)
        v = v.view(b, s, self.heads, -1).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, None if masked is None else ~masked)
        return out.transpose(1, 2).reshape(b, t, -1)  # (B, T, C)

    def _rest(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.self_attn.out_proj(attn))
        return self.norm2(x + self.linear2(F.relu(self.linear1(x))))

    def forward(self, x: torch.Tensor, cache: ConcatLayerCache, masked: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, C), its keys and values appended to `cache` (B, S, C) and attended under `masked`
        (B, H, T, S) bool, True = not seen (None: every key; upstream's serial decode steps)."""
        q, k, v = self.self_attn.qkv(x)
        keys, values = cache.update(k, v)
        return self._rest(x, self._attend(q, keys, values, masked))


class Text2Semantic(nn.Module):
    """The decoder's modules under the released names (see the module docstring)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        dim = config.hidden_dim
        self.bert_proj = nn.Linear(BERT_DIM, dim)
        self.ar_text_embedding = TokenEmbedding(config.phoneme_vocab_size, dim)
        self.ar_text_position = SinePositions(dim)
        self.ar_audio_embedding = TokenEmbedding(config.vocab_size, dim)
        self.ar_audio_position = SinePositions(dim)
        self.h = nn.Module()
        self.h.layers = nn.ModuleList(T2SBlock(dim, config.heads) for _ in range(config.layers))
        self.ar_predict_layer = nn.Linear(dim, config.vocab_size, bias=False)
        self.kernel: str | None = None  # what runs the linears' products (`load_t2s`), None: torch
        self.precision = "float32"  # what results say (`load_t2s`): float32, int8 or int4

    def backbone(self) -> numeric.Backbone:
        """What the precision layer rewrites: the blocks' linear layers (all but 0.5 M of the
        weights a step reads); their norms are LayerNorms, which stay torch's in every mode (no RMS
        norm to declare). The BERT projection
        stays torch's: it reads the features transposed, and torch's product of a transposed input
        sums in another order than of a contiguous one; the output layer, small, stays too."""
        return numeric.Backbone(self.h, None)

    @property
    def eos(self) -> int:
        return self.config.eos

    @property
    def heads(self) -> int:
        return self.config.heads

    def embed_text(self, phones: torch.Tensor, bert: torch.Tensor) -> torch.Tensor:
        """phones (B, T) ids, bert (B, 1024, T) -> (B, T, C) with positions."""
        x = self.ar_text_embedding(phones)
        x = x + self.bert_proj(bert.transpose(1, 2))
        return self.ar_text_position(x)

    def embed_audio(self, tokens: torch.Tensor) -> torch.Tensor:
        """Prompt semantic tokens (B, P) -> (B, P, C) at positions 0..P-1."""
        return self.ar_audio_position(self.ar_audio_embedding(tokens))

    def embed_next(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        """The last decoded tokens (B, 1) -> (B, 1, C) at audio position `position`."""
        return self.ar_audio_position.at(self.ar_audio_embedding(tokens), position)

    def new_cache(self) -> ConcatCache:
        return ConcatCache(len(self.h.layers))

    def forward(self, x: torch.Tensor, cache: ConcatCache, masked: torch.Tensor | None = None) -> torch.Tensor:
        """Every block over x (B, T, C) (the prompt on an empty cache, or new positions) -> (B, T, C)."""
        for block, layer_cache in zip(self.h.layers, cache.layers, strict=True):
            x = block(x, layer_cache, masked)
        return x

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The last position's logits (B, vocab_size) of hidden (B, T, C)."""
        return self.ar_predict_layer(hidden[:, -1])


def module_name(released: str) -> str:
    """A released weight's name (without `model.`) -> its name in `Text2Semantic`."""
    for suffix, name in RELEASED_NAMES.items():
        if released.endswith(suffix):
            return released.removesuffix(suffix) + name
    return released


def load_t2s(path: str | Path, device: torch.device | str = "cpu", precision: str | None = None) -> Text2Semantic:
    """A GPT `.ckpt` (gpt_weights.py) as a float32 `Text2Semantic` in eval mode, loaded strictly, its
    backbone in `precision` (`PRECISIONS`, see the module's doc; None: torch's own products)."""
    device = torch.device(device)
    plan = None if precision is None else numeric.plan(precision, device, torch.float32, PRECISIONS, "GPT-SoVITS's GPT")
    config, released = read_gpt(path)
    state = {module_name(name): tensor for name, tensor in released.items()}
    model = Text2Semantic(config)
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise WeightsError(f"{path}: the GPT weights do not fit the model: missing {missing[:8]}, unexpected {unexpected[:8]}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise WeightsError(f"{path}: tensor {name} has shape {tuple(tensor.shape)}, the model expects {tuple(expected[name].shape)}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})
    model = model.to(device).eval()
    if plan is not None:
        model.kernel = numeric.apply(plan, model, [model.backbone()])
        model.precision = plan.reported
    return model
