"""MiniCPM-4, as VoxCPM uses it: the base LM, the residual LM, and the stacks inside the local
encoder and the DiT — one module with a whole-sequence pass and a one-token step over a KV cache.

What the config names, as upstream computes it (float32 bits equal on the CPU):
- "longrope" rotary tables: `inv_freq` from `rope_theta`, positions divided by per-frequency
  factors (the long factors when `max_position_embeddings` exceeds the original context, else
  the short ones, decided once for the whole table as upstream does), cos/sin times
  `sqrt(1 + log(max / original) / log(original))`; rotate-half layout.
- muP: token embeddings times `scale_emb` (applied by the caller), each block's output times
  `scale_depth / sqrt(num_layers)` before the residual sum.
- RMS norms (float32), SwiGLU MLPs, grouped-query attention through SDPA with upstream's
  arguments (`is_causal`, `enable_gqa`, the default scale).

The step attends over the cache's filled span rounded up to `SPAN_BLOCK` slots, with upstream's
mask. Upstream attends over its whole static cache (`max_length` slots, 8192 for VoxCPM2) with a
mask hiding the empty slots. Masked slots add exactly zero to SDPA's online softmax (a factor
`exp(m - m) = 1`, terms `exp(-inf) = 0`), so any span gives the same sums — except that SDPA's
CPU kernel reduces a span whose length is not a multiple of its vector width with a different
tail (a span of exactly the filled length differs from upstream in the last bit); padded to a
multiple of 64 it equals upstream's bits (tests/engines/voxcpm checks it) while a step reads a
fraction of the memory. Caches are allocated in whole blocks for the same reason.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.voxcpm.config import LMConfig
from koe.nn.mlp import GatedMLP
from koe.nn.norm import RMSNorm
from koe.nn.rotary import apply_rotary, inverse_frequencies
from koe.runtime.precision import Backbone

__all__ = ["SPAN_BLOCK", "KVCache", "LongRope", "MiniCPM", "step_mask"]

SPAN_BLOCK = 64  # a step attends over the filled cache rounded up to this many slots (see the module doc)


class LongRope(nn.Module):
    """MiniCPM's longrope cos/sin tables; computed per position on demand (each entry depends on
    its position alone, so a table of any length has upstream's values).

    Computed in float32 whatever the module's dtype, then rounded to it: upstream builds its tables
    in float32 at init and `model.to(dtype)` rounds those buffers (bfloat16 releases on a CPU)."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        rs = cfg.rope_scaling
        self.inv_freq = inverse_frequencies(cfg.head_dim, cfg.rope_theta)
        long = cfg.max_position_embeddings > rs.original_max_position_embeddings
        self.factors = torch.tensor(rs.long_factor if long else rs.short_factor, dtype=torch.float32, device="cpu")
        scale = cfg.max_position_embeddings / rs.original_max_position_embeddings
        self.magnitude = math.sqrt(1 + math.log(scale) / math.log(rs.original_max_position_embeddings))
        self.dtype = torch.float32
        self._table: tuple[torch.Tensor, torch.Tensor] | None = None

    def table(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (length, head_dim) for positions 0..length-1 (cached, grown on demand)."""
        if self._table is None or self._table[0].shape[0] < length:
            size = max(length, 2 * self._table[0].shape[0] if self._table is not None else 256)
            t = torch.arange(size, device=self.inv_freq.device, dtype=torch.float32)
            freqs = torch.mul(torch.outer(t, 1.0 / self.factors), self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self._table = ((emb.cos() * self.magnitude).to(self.dtype), (emb.sin() * self.magnitude).to(self.dtype))
        cos, sin = self._table
        return cos[:length], sin[:length]

    def _apply(self, fn, recurse=True):
        """Moves follow the module (device; the tables' dtype), the float32 inputs stay float32."""
        probe = fn(torch.zeros(1, device=self.inv_freq.device))
        self.dtype = probe.dtype if probe.is_floating_point() else self.dtype
        self.inv_freq, self.factors = self.inv_freq.to(probe.device), self.factors.to(probe.device)
        self._table = None
        return super()._apply(fn, recurse)


def rotate(x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """upstream's rotary application: in float32, back to x's dtype."""
    return apply_rotary(x.to(torch.float32), *rope).to(x.dtype)


def step_mask(position: int, capacity: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The attention mask (1, 1, 1, span) of a step at `position`: the filled slots rounded up to
    `SPAN_BLOCK` (at most `capacity`), True up to `position`."""
    span = min(capacity, -(-(position + 1) // SPAN_BLOCK) * SPAN_BLOCK)
    return (torch.arange(span, device=device) <= position).view(1, 1, 1, -1)


class KVCache:
    """Keys and values of every layer: (layers, B, kv_heads, capacity, head_dim) each, `length` filled."""

    def __init__(self, layers: int, batch: int, heads: int, capacity: int, head_dim: int, device: torch.device, dtype: torch.dtype) -> None:
        self.k = torch.zeros(layers, batch, heads, capacity, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.k.shape[3]


class Attention(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=False)

    def _qkv(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = rotate(q, rope), rotate(k, rope)
        return q, k, v

    def forward(self, x: torch.Tensor, rope, causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> (out (B, T, C), k, v (B, kv_heads, T, D))."""
        b, t, _ = x.shape
        q, k, v = self._qkv(x, rope)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).contiguous().reshape(b, t, -1)), k, v

    def step(self, x: torch.Tensor, rope, k_cache: torch.Tensor, v_cache: torch.Tensor, position: int, mask: torch.Tensor) -> torch.Tensor:
        """x (B, C), one token at `position`; writes its k/v into the caches (B, kv_heads, S, D) and
        attends over their first `mask.shape[-1]` slots (`mask`: True up to `position`)."""
        b = x.shape[0]
        q, k, v = self._qkv(x[:, None], rope)
        k_cache[:, :, position] = k[:, :, 0]
        v_cache[:, :, position] = v[:, :, 0]
        span = mask.shape[-1]
        out = F.scaled_dot_product_attention(q.contiguous(), k_cache[:, :, :span], v_cache[:, :, :span], attn_mask=mask, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).contiguous().reshape(b, -1))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = GatedMLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.use_mup = cfg.use_mup
        self.scale = cfg.residual_scale

    def _residual(self, residual: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return residual + h * self.scale if self.use_mup else residual + h

    def forward(self, x: torch.Tensor, rope, causal: bool):
        h, k, v = self.self_attn(self.input_layernorm(x), rope, causal)
        x = self._residual(x, h)
        return self._residual(x, self.mlp(self.post_attention_layernorm(x))), k, v

    def step(self, x: torch.Tensor, rope, k_cache, v_cache, position: int, mask: torch.Tensor) -> torch.Tensor:
        x = self._residual(x, self.self_attn.step(self.input_layernorm(x), rope, k_cache, v_cache, position, mask))
        return self._residual(x, self.mlp(self.post_attention_layernorm(x)))


class MiniCPM(nn.Module):
    """A MiniCPM-4 stack; `embed_tokens` only when the config has a vocabulary (the base LM)."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.vocab_size > 0:
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.rope = None if cfg.no_rope else LongRope(cfg)

    def backbone(self) -> Backbone:
        """This stack as the precision layer rewrites it (`koe.runtime.precision`): every linear
        layer (q, k, v, o; gate, up, down), every RMSNorm, the token embedding read row by row."""
        return Backbone(self, RMSNorm, embeddings=((self, "embed_tokens"),) if self.cfg.vocab_size > 0 else ())

    def new_cache(self, capacity: int, batch: int = 1) -> KVCache:
        w = self.norm.weight  # the stack's float dtype and device, whatever runs its products (int8 layers hold no parameters)
        return KVCache(len(self.layers), batch, self.cfg.num_key_value_heads, capacity, self.cfg.head_dim, w.device, w.dtype)

    def forward(self, x: torch.Tensor, causal: bool = True, cache: KVCache | None = None) -> torch.Tensor:
        """x (B, T, C) embeddings -> (B, T, C); with `cache`, its first T slots are filled (a prefill)."""
        t = x.shape[1]
        rope = self.rope.table(t) if self.rope is not None else None
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, rope, causal)
            if cache is not None:
                cache.k[i, :, :, :t] = k
                cache.v[i, :, :, :t] = v
        if cache is not None:
            cache.length = t
        return self.norm(x)

    def step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One token x (B, C) at position `cache.length` -> (B, C); the cache grows by one."""
        position = cache.length
        if position >= cache.capacity:
            raise ValueError("KV cache is full")
        rope = None
        if self.rope is not None:
            cos, sin = self.rope.table(position + 1)
            rope = (cos[position : position + 1], sin[position : position + 1])
        mask = step_mask(position, cache.capacity, x.device)  # one for every layer
        for i, layer in enumerate(self.layers):
            x = layer.step(x, rope, cache.k[i], cache.v[i], position, mask)
        cache.length = position + 1
        return self.norm(x)
