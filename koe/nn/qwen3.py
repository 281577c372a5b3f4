"""Qwen3 decoder blocks: RMSNorm, gated MLP, grouped-query attention with q/k norms, rotary tables.

One decoder layer serves every Qwen3-style stack in koe (the Qwen3-TTS talker and its code
predictor). Parameter names follow the released checkpoints (`self_attn.q_proj`, `mlp.gate_proj`,
`input_layernorm`, ...), so state dicts load strictly.

Exactness: on the CPU in float32 these blocks give the bits of the reference implementation
(transformers' Qwen3 with SDPA attention): same op order, same casts, and attention goes through
`F.scaled_dot_product_attention` with the same arguments (GQA via `enable_gqa` when no mask is
given, repeated K/V heads when a padding mask is).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.runtime.kv_cache import LayerCache


@dataclass(frozen=True)
class DecoderSpec:
    """The shape of one Qwen3 decoder stack."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    attention_bias: bool = False

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_attention_heads ({self.num_heads}) must be a multiple of num_key_value_heads ({self.num_kv_heads})")


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32, scaled by a learned weight."""

    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


class GatedMLP(nn.Module):
    """`down(silu(gate(x)) * up(x))`."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.gate_up_proj: nn.Module | None = None  # set only by an opt-in mode that fuses gate and up (koe.runtime.quant)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_proj is not None:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
            return self.down_proj(F.silu(gate) * up)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def inverse_frequencies(head_dim: int, theta: float) -> torch.Tensor:
    """Rotary inverse frequencies, float32, computed as the reference does (`theta ** (2i / d)`).

    Always computed on the CPU (modules move it with `.to()`): under `torch.device("meta")` the
    same ops would run torch's Python reference kernels, whose first use imports torch._dynamo
    (~3 s of a model load)."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").to(dtype=torch.float) / head_dim))


def rotary_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables for `positions` (..., T) -> (..., T, head_dim), in `dtype`.

    Frequencies are `position * inv_freq` in float32 (a product with one term, so exact whatever
    the batching), duplicated over both halves before cos/sin as the reference does.
    """
    freqs = positions.to(torch.float32)[..., :, None] * inv_freq.to(torch.float32)  # (..., T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def multimodal_cos_sin(cos: torch.Tensor, sin: torch.Tensor, sections: list[int], interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge per-axis tables (3, B, T, D) into (B, 1, T, D) following multimodal rotary sections.

    Interleaved layout: frequency i takes axis `i % 3` for the first `3 * sections[k]` slots of
    axis k > 0; otherwise axis 0. Contiguous layout: consecutive blocks of `sections` sizes.
    """

    def merge(table: torch.Tensor) -> torch.Tensor:
        if interleaved:
            half = table[..., : table.shape[-1] // 2]
            merged = half[0].clone()
            n = len(sections)
            for axis, size in enumerate(sections[1:], 1):
                merged[..., axis : size * n : n] = half[axis, ..., axis : size * n : n]
            return torch.cat([merged, merged], dim=-1).unsqueeze(1)
        parts = table.split(sections * 2, dim=-1)
        return torch.cat([part[i % 3] for i, part in enumerate(parts)], dim=-1).unsqueeze(1)

    return merge(cos), merge(sin)


class Attention(nn.Module):
    """Grouped-query self-attention with per-head RMS norms on q and k (Qwen3)."""

    def __init__(self, spec: DecoderSpec) -> None:
        super().__init__()
        self.num_heads = spec.num_heads
        self.num_kv_heads = spec.num_kv_heads
        self.head_dim = spec.head_dim
        self.scaling = spec.head_dim**-0.5
        bias = spec.attention_bias
        self.q_proj = nn.Linear(spec.hidden_size, spec.num_heads * spec.head_dim, bias=bias)
        self.k_proj = nn.Linear(spec.hidden_size, spec.num_kv_heads * spec.head_dim, bias=bias)
        self.v_proj = nn.Linear(spec.hidden_size, spec.num_kv_heads * spec.head_dim, bias=bias)
        self.o_proj = nn.Linear(spec.num_heads * spec.head_dim, spec.hidden_size, bias=bias)
        self.q_norm = RMSNorm(spec.head_dim, eps=spec.rms_norm_eps)
        self.k_norm = RMSNorm(spec.head_dim, eps=spec.rms_norm_eps)
        self.qkv_proj: nn.Module | None = None  # set only by an opt-in mode that fuses q, k and v (koe.runtime.quant)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v projections of x (B, T, C): three products, or one fused product split in three."""
        if self.qkv_proj is not None:
            q_width, kv_width = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
            return self.qkv_proj(x).split((q_width, kv_width, kv_width), dim=-1)
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: LayerCache | None,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """x (B, T, C); cos/sin broadcastable to (B, H, T, D); mask: bool (B, 1, T, S) or None (causal)."""
        b, t, _ = x.shape
        q, k, v = self.project(x)
        q = self.q_norm(q.view(b, t, -1, self.head_dim)).transpose(1, 2)  # (B, H, T, D)
        k = self.k_norm(k.view(b, t, -1, self.head_dim)).transpose(1, 2)  # (B, Hkv, T, D)
        v = v.view(b, t, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(k, v)
        if mask is None:
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scaling, is_causal=t > 1, enable_gqa=True)
        else:
            groups = self.num_heads // self.num_kv_heads
            k, v = repeat_kv(k, groups), repeat_kv(v, groups)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[..., : k.shape[-2]], scale=self.scaling)
        out = out.transpose(1, 2).contiguous().reshape(b, t, -1)  # (B, T, H*D)
        return self.o_proj(out)


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, Hkv, S, D) -> (B, Hkv*groups, S, D), each kv head repeated for its query group."""
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


class DecoderLayer(nn.Module):
    """Pre-norm attention + gated MLP with residuals."""

    def __init__(self, spec: DecoderSpec) -> None:
        super().__init__()
        self.self_attn = Attention(spec)
        self.mlp = GatedMLP(spec.hidden_size, spec.intermediate_size)
        self.input_layernorm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: LayerCache | None, mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


def causal_padding_mask(padding: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor | None:
    """Boolean attention mask (B, 1, T, S) for left-padded batches, or None where none is needed.

    `padding` (B, S) is 1 for real tokens, 0 for padding; `query_positions` (T,) are the cache
    positions of the queries. None when nothing is padded and the queries are either one token or
    the whole sequence: attention then runs with SDPA's own causal flag, as the reference does.
    """
    s = padding.shape[-1]
    t = query_positions.shape[0]
    if bool(padding.all()) and (t == 1 or t == s):
        return None
    kv = torch.arange(s, device=padding.device)
    causal = kv[None, :] <= query_positions[:, None]  # (T, S)
    return (causal[None, None] & padding.bool()[:, None, None, :])  # (B, 1, T, S)
