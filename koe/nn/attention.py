"""Multi-head self-attention with the options model families differ in, and its mask helpers.

Options: per-head RMS norms on q and k (Qwen3) or none (Qwen2, MiniCPM, Mimi, the Qwen codec),
q/k/v bias and output bias, grouped-query heads, causal or bidirectional, a sliding window.
Parameter names follow the released checkpoints (`q_proj`, `k_proj`, `v_proj`, `o_proj`,
`q_norm`, `k_norm`), so state dicts load strictly.

Exactness: attention goes through `F.scaled_dot_product_attention` with the arguments the
reference implementations pass (transformers' SDPA path): without a mask, SDPA's causal flag and
grouped heads via `enable_gqa` (or K/V heads repeated first, `native_gqa=False`, as Mimi does);
with a mask, repeated K/V heads. On the CPU in float32 that gives the reference's bits.

`Packed` sequences (several sequences end to end in one row, each attending to itself) give the
bits of the padded batch a reference runs them in, without its padding rows: the linear layers
see only real rows (under MKL's strict reproducibility a row's product does not depend on the
other rows), and each sequence's attention runs over keys zero-padded to the batch's length with
the padding masked, as the padded row had them (SDPA's sums depend on the key count, not on the
masked keys' values; measured equal for 5 to 1,200 keys at one and two threads). A sequence of
fewer than four positions has its queries padded with zero rows (koe.nn.rows).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.norm import RMSNorm
from koe.nn.rotary import apply_rotary
from koe.nn.rows import with_fewest_rows
from koe.runtime.kv_cache import LayerCache


class Attention(nn.Module):
    """Self-attention over x (B, T, C) with rotary q/k; see the module docstring for the options.

    `qk_norm_eps`: RMS-norm q and k per head with this eps (None: no q/k norm). `out_bias`
    defaults to `qkv_bias` (Qwen3's `attention_bias`; Qwen2 has q/k/v bias only). `window`: keys
    at most `window - 1` positions away (a sliding window), applied when no mask is given.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        qk_norm_eps: float | None = None,
        qkv_bias: bool = False,
        out_bias: bool | None = None,
        causal: bool = True,
        window: int | None = None,
        native_gqa: bool = True,
    ) -> None:
        super().__init__()
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.scaling = head_dim**-0.5
        self.causal, self.window, self.native_gqa = causal, window, native_gqa
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=qkv_bias if out_bias is None else out_bias)
        self.q_norm = self.k_norm = None
        if qk_norm_eps is not None:
            self.q_norm = RMSNorm(head_dim, eps=qk_norm_eps)
            self.k_norm = RMSNorm(head_dim, eps=qk_norm_eps)
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
        cache: LayerCache | None = None,
        mask: torch.Tensor | Packed | None = None,
    ) -> torch.Tensor:
        """x (B, T, C); cos/sin broadcastable to (B, H, T, D); mask: bool (B|1, 1|H, T, S), True = attend,
        or None (causal or bidirectional as built, within the window if one is set), or `Packed`
        (B = 1, no cache: bidirectional attention within each packed sequence)."""
        b, t, _ = x.shape
        q, k, v = self.project(x)
        q, k = q.view(b, t, -1, self.head_dim), k.view(b, t, -1, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = apply_rotary(q.transpose(1, 2), cos, sin)  # (B, H, T, D)
        k = apply_rotary(k.transpose(1, 2), cos, sin)  # (B, Hkv, T, D)
        v = v.view(b, t, -1, self.head_dim).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, S, D)
        if isinstance(mask, Packed):
            out = packed_attention(q, k, v, mask, self.num_heads // self.num_kv_heads, self.scaling)
            return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))
        if mask is None and self.window is not None:
            mask = sliding_window_mask(b, t, k.shape[-2], self.window, x.device, self.causal)
        groups = self.num_heads // self.num_kv_heads
        if mask is None:
            if not self.native_gqa:
                k, v = repeat_kv(k, groups), repeat_kv(v, groups)
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scaling, is_causal=self.causal and t > 1, enable_gqa=self.native_gqa)
        else:
            k, v = repeat_kv(k, groups), repeat_kv(v, groups)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[..., : k.shape[-2]], scale=self.scaling)
        out = out.transpose(1, 2).contiguous().reshape(b, t, -1)  # (B, T, H*D)
        return self.o_proj(out)


@dataclass(frozen=True)
class Packed:
    """Sequences end to end along the time axis of one row, each attending (bidirectionally) to
    itself only: `spans` their (start, length), `keys` the length of the padded batch a reference
    runs them in (at least the longest), which sets each sequence's key count."""

    spans: tuple[tuple[int, int], ...]
    keys: int

    @property
    def reference_rows(self) -> int:
        """The rows of the padded batch: one per position of each sequence's padded row."""
        return len(self.spans) * self.keys

    def __post_init__(self) -> None:
        if any(n > self.keys for _, n in self.spans):
            raise ValueError(f"a packed sequence is longer than the padded length {self.keys}")


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packed: Packed, groups: int, scale: float) -> torch.Tensor:
    """q (1, H, T, D), k and v (1, Hkv, T, D) of packed sequences -> (1, H, T, D): each sequence's
    queries over its own keys, zero-padded to `packed.keys` and masked there, K/V heads repeated,
    as a padded batch's row computes them."""
    out = torch.empty_like(q)
    for start, n in packed.spans:
        keys, values = (_repeated_padded(x[:, :, start : start + n], groups, packed.keys) for x in (k, v))
        queries = with_fewest_rows(q[:, :, start : start + n], reference=packed.keys)  # the padded row's queries
        mask = _leading(n, queries.shape[2], packed.keys, q.device)
        out[:, :, start : start + n] = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale)[:, :, :n]
    return out


def _repeated_padded(x: torch.Tensor, groups: int, length: int) -> torch.Tensor:
    """(B, Hkv, n, D) -> (B, Hkv*groups, length, D): `repeat_kv`'s values, zeros after n (one copy)."""
    b, h, n, d = x.shape
    out = x.new_zeros(b, h, groups, length, d)
    out[:, :, :, :n] = x[:, :, None]
    return out.view(b, h * groups, length, d)


@functools.lru_cache(maxsize=64)
def _leading(n: int, queries: int, length: int, device: torch.device) -> torch.Tensor:
    """(1, 1, queries, length) bool: queries that see the first n of `length` keys (read-only, shared)."""
    mask = torch.zeros(1, 1, queries, length, dtype=torch.bool, device=device)
    mask[..., :n] = True
    return mask


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, Hkv, S, D) -> (B, Hkv*groups, S, D), each kv head repeated for its query group."""
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


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
    return causal[None, None] & padding.bool()[:, None, None, :]  # (B, 1, T, S)


def sliding_window_allowed(query_positions: torch.Tensor, key_positions: torch.Tensor, window: int, causal: bool = True) -> torch.Tensor:
    """(T, S) bool, True where a query may see a key: at most `window - 1` positions apart
    (causal: the key not after the query)."""
    q, kv = query_positions[:, None], key_positions[None, :]
    if causal:
        return (kv <= q) & (kv > q - window)
    return (kv > q - window) & (kv < q + window)


def sliding_window_mask(batch: int, queries: int, keys: int, window: int, device: torch.device, causal: bool = True) -> torch.Tensor | None:
    """Boolean (B, 1, T, S) window mask for the last T of S positions, or None where the window
    does not bind (fewer keys than `window`) and attention without a mask gives the same
    (bidirectional, or causal with T == S or T == 1)."""
    if keys < window and (not causal or queries in (1, keys)):
        return None
    positions = torch.arange(keys, device=device)
    allowed = sliding_window_allowed(positions[keys - queries :], positions, window, causal)  # (T, S)
    return allowed[None, None].expand(batch, 1, queries, keys)
