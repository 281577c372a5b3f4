"""Fish Speech S2's dual-AR LM: a slow Qwen3-style transformer over the time axis and a fast one that
draws each frame's residual codebooks, with upstream's float operations.

The slow stack embeds a prompt column (text id in row 0, codes in rows 1..N): the token embedding
plus, at semantic positions only, the sum of the N codebook embeddings, then scaled there by
1/sqrt(N + 1). Its normed last hidden state gives the token logits (tied to the token embedding)
and, through `project_in`, the fast stack's first input; the fast stack then runs one position per
codebook on a cache of N positions.

What upstream's bits depend on, and koe keeps:
- rotary tables computed in float32 and rounded to bfloat16 (in the float32 model too), applied
  to (even, odd) pairs in float32;
- the fused q|k|v projection, q/k RMS norms as torch's `nn.RMSNorm`, K/V heads repeated;
- slow attention as SDPA over the preallocated cache with a causal mask, the fast one written out
  (scores, additive -inf mask, softmax, values) over its N positions.
Upstream attends over the whole cache (max_seq_len keys, 32,768 released); koe reads a prefix of
it, as long as gives the same bits (`attended_keys`): SDPA's sums over keys depend on how many
there are only through their blocking, which the prefix keeps (measured at 1 thread).

Weights load strictly (`load_lm`) from the release's safetensors (`text_model.model.*`,
`audio_decoder.*`; one file or shards) or an older `model.pth` with upstream's internal names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.mlp import GatedMLP
from koe.nn.norm import RMSNorm
from koe.runtime.exact import exact_linears, exact_norms
from koe.runtime.precision import PRECISIONS, Backbone
from koe.runtime.precision import apply as apply_precision
from koe.runtime.precision import plan as precision_plan
from koe.runtime.static_cache import StaticLayerCache
from koe.runtime.weights import WeightsError, build_from_weights, weight_files
from koe_fish_speech.config import LMConfig, StackConfig, read_lm_config

__all__ = [
    "DualARLM",
    "FastTransformer",
    "SlowTransformer",
    "attended_keys",
    "cache_positions",
    "lm_name",
    "lm_weights",
    "load_lm",
    "load_lm_in",
    "precision_backbone",
    "pth_name",
    "rotary_table",
]

DECODE_BLOCK = 64  # float32 decode reads the cache in multiples of this many keys (SDPA's math path sums them alike)
PREFILL_BLOCK = 512  # the prefill reads it in multiples of this (SDPA's CPU flash kernel's key blocks)


def rotary_table(positions: int, head_dim: int, base: float) -> torch.Tensor:
    """(positions, head_dim / 2, 2) float32 cos/sin pairs, rounded to bfloat16 as upstream stores them."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, device="cpu")[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(positions, device="cpu"), inv)
    unit = torch.polar(torch.ones_like(angles), angles)
    return torch.stack([unit.real, unit.imag], dim=-1).to(torch.bfloat16).float()


def rotate_pairs(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """x (B, T, H, D) rotated by `table` (T, D/2, 2) on its (even, odd) pairs, in float32, back in x's dtype."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)  # (B, T, H, D/2, 2)
    t = table.view(1, pairs.size(1), 1, pairs.size(3), 2)
    even, odd, cos, sin = pairs[..., 0], pairs[..., 1], t[..., 0], t[..., 1]
    out = torch.stack([even * cos - odd * sin, odd * cos + even * sin], -1)
    return out.flatten(3).type_as(x)


def attended_keys(queries_end: int, queries: int, capacity: int, dtype: torch.dtype) -> int:
    """How many cache positions the slow attention reads for queries ending at `queries_end`: upstream's
    bits from fewer keys than its whole cache (see the module docstring). A prompt (several queries):
    a multiple of PREFILL_BLOCK; a float32 step: of DECODE_BLOCK; a bfloat16 step (SDPA's math path
    sums in float32 there): exactly the filled positions."""
    if queries > 1:
        block = PREFILL_BLOCK
    elif dtype == torch.float32:
        block = DECODE_BLOCK
    else:
        block = 1
    return min(capacity, -(-queries_end // block) * block)


def cache_positions(positions: int, capacity: int) -> int:
    """How many cache positions a request of `positions` in all needs for upstream's bits: what
    `attended_keys` reads at most (`positions` rounded up to PREFILL_BLOCK, the largest block),
    at most `capacity`. The released cache (32,768 positions, 36 layers) is 9 GiB in float32."""
    return min(capacity, -(-positions // PREFILL_BLOCK) * PREFILL_BLOCK)


class Attention(nn.Module):
    """Grouped-query attention with a fused q|k|v projection (`wqkv`, `wo`; optional `q_norm`, `k_norm`)."""

    def __init__(self, stack: StackConfig, eps: float, written_out: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = stack.heads, stack.kv_heads, stack.head_dim
        self.wqkv = nn.Linear(stack.dim, (stack.heads + 2 * stack.kv_heads) * stack.head_dim, bias=stack.qkv_bias)
        self.wo = nn.Linear(stack.heads * stack.head_dim, stack.dim, bias=stack.o_bias)
        self.q_norm = nn.RMSNorm(stack.head_dim, eps) if stack.qk_norm else None
        self.k_norm = nn.RMSNorm(stack.head_dim, eps) if stack.qk_norm else None
        self.written_out = written_out  # the fast stack's attention: scores, mask, softmax, values by hand

    def forward(self, x: torch.Tensor, table: torch.Tensor, cache: StaticLayerCache, start: int, keys: int, mask: torch.Tensor) -> torch.Tensor:
        """x (1, T, C) at cache positions [start, start + T); attends over the first `keys` cache
        positions under `mask` (T, keys) bool."""
        b, t, _ = x.shape
        q_width, kv_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        q, k, v = self.wqkv(x).split([q_width, kv_width, kv_width], dim=-1)
        q = q.view(b, t, self.heads, self.head_dim)
        k = k.view(b, t, self.kv_heads, self.head_dim)
        v = v.view(b, t, self.kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = rotate_pairs(q, table).transpose(1, 2)  # (B, H, T, D)
        k = rotate_pairs(k, table).transpose(1, 2)
        cache.keys[:, :, start : start + t] = k
        cache.values[:, :, start : start + t] = v.transpose(1, 2)
        groups = self.heads // self.kv_heads
        k = cache.keys[:, :, :keys].repeat_interleave(groups, dim=1)  # (B, H, S, D)
        v = cache.values[:, :, :keys].repeat_interleave(groups, dim=1)
        if self.written_out:
            bias = torch.zeros(1, 1, t, keys, dtype=q.dtype, device=q.device)
            bias = torch.where(mask.logical_not(), float("-inf"), bias)
            scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(self.head_dim))
            scores += bias
            y = torch.softmax(scores, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None])
        return self.wo(y.transpose(1, 2).contiguous().view(b, t, q_width))


class Block(nn.Module):
    """`h = x + attention(norm(x))`, then `h + feed_forward(norm(h))` (names as released)."""

    def __init__(self, stack: StackConfig, eps: float, written_out: bool) -> None:
        super().__init__()
        self.attention = Attention(stack, eps, written_out)
        self.feed_forward = GatedMLP(stack.dim, stack.intermediate_size)  # released w1, w3, w2
        self.attention_norm = RMSNorm(stack.dim, eps=eps)
        self.ffn_norm = RMSNorm(stack.dim, eps=eps)

    def forward(self, x: torch.Tensor, table: torch.Tensor, cache: StaticLayerCache, start: int, keys: int, mask: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), table, cache, start, keys, mask)
        return h + self.feed_forward(self.ffn_norm(h))


def _caches(stack: StackConfig, length: int, dtype: torch.dtype, device: torch.device) -> list[StaticLayerCache]:
    return [StaticLayerCache(1, stack.kv_heads, length, stack.head_dim, dtype, device) for _ in range(stack.layers)]


class SlowTransformer(nn.Module):
    """The time-axis stack (`text_model.model.*`; the codebook embeddings are `audio_decoder.*` in the release)."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        s = config.slow
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, s.dim)
        self.codebook_embeddings = nn.Embedding(config.codebook_size * config.num_codebooks, s.dim)
        self.layers = nn.ModuleList(Block(s, config.norm_eps, written_out=False) for _ in range(s.layers))
        self.norm = RMSNorm(s.dim, eps=config.norm_eps)
        self.output = None if config.tie_word_embeddings else nn.Linear(s.dim, config.vocab_size, bias=False)
        self.register_buffer("rotary", rotary_table(config.max_seq_len, s.head_dim, config.rope_base), persistent=False)

    def new_cache(self, positions: int | None = None) -> list[StaticLayerCache]:
        """Empty keys/values for every layer, in the weights' dtype: `cache_len` positions (upstream's
        whole cache), or enough for `positions` (`cache_positions`: the same bits, a fraction of the memory)."""
        w = self.embeddings.weight
        length = self.config.cache_len if positions is None else cache_positions(positions, self.config.cache_len)
        return _caches(self.config.slow, length, w.dtype, w.device)

    def embed(self, columns: torch.Tensor, semantic: tuple[int, int]) -> torch.Tensor:
        """columns (1, N + 1, T) -> (1, T, C): token embedding, plus the codebooks' sum (then scaled) where row 0 is semantic."""
        n, size = self.config.num_codebooks, self.config.codebook_size
        parts = [self.codebook_embeddings(columns[:, i + 1] + i * size) for i in range(n)]
        codes = torch.stack(parts, dim=1).sum(dim=1)  # (1, T, C)
        ids = columns[:, 0]
        is_semantic = (ids >= semantic[0]) & (ids <= semantic[1])
        codes[~is_semantic] = 0
        x = self.embeddings(ids) + codes
        return torch.where(is_semantic.unsqueeze(-1).expand_as(x), x / math.sqrt(n + 1), x)

    def forward(self, columns: torch.Tensor, start: int, cache: list[StaticLayerCache], semantic: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        """columns (1, N + 1, T) at positions [start, start + T) -> (token logits (1, 1, V), normed hidden state (1, 1, C)) of the last position."""
        t = columns.shape[-1]
        x = self.embed(columns, semantic)
        end = start + t
        keys = attended_keys(end, t, cache[0].capacity, x.dtype)
        positions = torch.arange(start, end, device=x.device)
        mask = torch.arange(keys, device=x.device)[None, :] <= positions[:, None]  # (T, S)
        table = self.rotary[start:end]
        for layer, layer_cache in zip(self.layers, cache, strict=True):
            x = layer(x, table, layer_cache, start, keys, mask)
        out = self.norm(x[:, -1:] if t > 1 else x)
        logits = F.linear(out, self.embeddings.weight) if self.output is None else self.output(out)
        return logits, out


class FastTransformer(nn.Module):
    """The per-frame codebook stack (`audio_decoder.*` in the release, `fast_*` upstream)."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        f = config.fast
        self.config = config
        self.project_in = nn.Linear(config.slow.dim, f.dim) if f.dim != config.slow.dim else nn.Identity()
        self.embeddings = nn.Embedding(config.codebook_size, f.dim)
        self.layers = nn.ModuleList(Block(f, config.norm_eps, written_out=True) for _ in range(f.layers))
        self.norm = RMSNorm(f.dim, eps=config.norm_eps)
        self.output = nn.Linear(f.dim, config.codebook_size, bias=False)
        self.register_buffer("rotary", rotary_table(config.num_codebooks, f.head_dim, config.rope_base), persistent=False)
        positions = torch.arange(config.num_codebooks, device="cpu")
        self.register_buffer("causal", positions[None, :] <= positions[:, None], persistent=False)  # (N, N)

    def new_cache(self) -> list[StaticLayerCache]:
        """Keys/values for the N positions of one frame (reused frame after frame: later positions are masked)."""
        w = self.embeddings.weight
        return _caches(self.config.fast, self.config.num_codebooks, w.dtype, w.device)

    def forward(self, x: torch.Tensor, position: int, cache: list[StaticLayerCache]) -> torch.Tensor:
        """x (1, 1, C) at frame position `position` -> codebook logits (1, 1, codebook_size)."""
        n = self.config.num_codebooks
        mask = self.causal[position : position + 1]  # (1, N)
        table = self.rotary[position : position + 1]
        for layer, layer_cache in zip(self.layers, cache, strict=True):
            x = layer(x, table, layer_cache, position, n, mask)
        return self.output(self.norm(x))


class DualARLM(nn.Module):
    """The slow and fast stacks together (`load_lm` builds one from a release folder)."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.config = config
        self.slow = SlowTransformer(config)
        self.fast = FastTransformer(config)

    precision: str = "float32"  # what results name (`koe.runtime.precision.reported`); set by `load_lm_in`
    kernel: str | None = None  # what runs the quantized products ("koe-avx512vnni", ...), None: torch

    @property
    def dtype(self) -> torch.dtype:
        return self.slow.norm.weight.dtype


#: A released feed-forward layer's linear names -> koe's GatedMLP's (the LM's and the codec's transformers).
RELEASED_MLP = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}


def _internal_name(key: str) -> str:
    """Upstream's internal name (`layers.0.feed_forward.w1.weight`, `fast_norm.weight`) -> koe's
    (`slow.layers.0.feed_forward.gate_proj.weight`, `fast.norm.weight`)."""
    stack = "slow"
    if key.startswith("fast_"):
        stack, key = "fast", key[len("fast_") :]
    parts = key.split(".")
    if len(parts) >= 4 and parts[0] == "layers" and parts[2] == "feed_forward" and parts[3] in RELEASED_MLP:
        parts[3] = RELEASED_MLP[parts[3]]
    return f"{stack}.{'.'.join(parts)}"


def lm_name(key: str) -> str:
    """A safetensors tensor name -> koe's module name: the release's (`text_model.model.*`, and
    `audio_decoder.*` for the fast stack, whose `codebook_embeddings` the slow stack reads), else
    upstream's internal one (`layers.*`, `fast_*`), as upstream's key remap leaves it."""
    if key.startswith("text_model.model."):
        return _internal_name(key[len("text_model.model.") :])
    if key.startswith("audio_decoder."):
        rest = key[len("audio_decoder.") :]
        return _internal_name(rest if rest.startswith("codebook_embeddings.") else "fast_" + rest)
    return _internal_name(key)


def pth_name(key: str) -> str | None:
    """A `model.pth` tensor name (upstream's internal names, maybe under `state_dict.` and `model.`)
    -> koe's module name; None for the `audio_*` tensors upstream drops from it."""
    key = key.removeprefix("state_dict.").replace("model.", "")
    return None if "audio_" in key else _internal_name(key)


def lm_weights(folder: str | Path) -> tuple[list[Path], Callable[[str], str | None]]:
    """The LM's weight files in `folder` and their name map, in upstream's order of preference:
    sharded safetensors (the shards its index lists), one model.safetensors, model.pth."""
    folder = Path(folder)
    if (folder / "model.safetensors.index.json").exists() or (folder / "model.safetensors").exists():
        return weight_files(folder, index_first=True), lm_name
    if (folder / "model.pth").exists():
        return [folder / "model.pth"], pth_name
    raise WeightsError(f"no LM weights in {folder}: expected model.safetensors.index.json, model.safetensors or model.pth")


def load_lm(folder: str | Path, dtype: torch.dtype = torch.float32, config: LMConfig | None = None, exact_kernels: bool = True) -> DualARLM:
    """The LM of a Fish Speech S2 folder in `dtype` (float32 or bfloat16), loaded strictly: a missing,
    unexpected or misshapen tensor is a `WeightsError` naming it. In float32 with `exact_kernels`, the
    linear layers and RMS norms run on koe's CPU kernels where they give torch's bits here
    (`koe.runtime.exact`: each shape checked at load; torch's otherwise)."""
    config = config or read_lm_config(folder)
    files, rename = lm_weights(folder)
    model = build_from_weights(lambda: DualARLM(config), files, dtype=dtype, rename=rename).eval()
    if exact_kernels and dtype == torch.float32:
        exact_linears(model)
        exact_norms(model, RMSNorm)
        exact_norms(model, nn.RMSNorm)
    return model


def precision_backbone(lm: DualARLM) -> list[Backbone]:
    """The stacks as koe's precision layer rewrites them in int8 / int4 (`koe.runtime.precision`):
    every layer's linears (q|k|v, o, gate|up fused, down) quantized and the RMSNorms in C, in the
    slow stack and in the fast one (as wide as the slow one, and run at each of a frame's N
    positions: 4 layers x 10 positions read more weights a frame than the slow stack's 36 layers).
    The token embedding (the tied head), the codebook embeddings, the fast head and the q/k norms
    stay float32."""
    return [Backbone(lm.slow, RMSNorm, keep_float=("output",)), Backbone(lm.fast, RMSNorm, keep_float=("output", "project_in"))]


def load_lm_in(folder: str | Path, precision: str | None = None, config: LMConfig | None = None) -> DualARLM:
    """The LM of a folder in one of koe's precisions (`koe.runtime.precision.PRECISIONS`; None: fp32),
    on the CPU. fp32: `load_lm` in float32 (upstream's bits, koe's exact kernels where they give
    them); bf16: `load_lm` in bfloat16 (upstream's bfloat16 bits); int8 / int4: the weights read as
    stored, both stacks' layers quantized (`precision_backbone`), the rest float32 (other bits,
    opt-in). The LM carries `precision` (the name results report) and `kernel`."""
    numeric = precision_plan(precision, torch.device("cpu"), torch.float32, PRECISIONS, "Fish Speech")
    config = config or read_lm_config(folder)
    if numeric.quantized:
        files, rename = lm_weights(folder)
        lm = build_from_weights(lambda: DualARLM(config), files, rename=rename, as_stored=True).eval()
        lm.kernel = apply_precision(numeric, lm, precision_backbone(lm))
    else:
        lm = load_lm(folder, numeric.dtype, config)
    lm.precision = numeric.reported
    return lm
