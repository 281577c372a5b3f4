"""Pre-norm transformer decoder layer (attention + gated MLP with residuals) and its spec.

One layer serves every Qwen-style stack in koe: the Qwen3-TTS talker and code predictor (q/k
norms, GQA) and the Qwen codec's sliding-window transformer (no q/k norm, layer scales). A Qwen2
or MiniCPM decoder is the same layer with `qk_norm=False, qkv_bias=True`. Parameter names follow
the released checkpoints (`self_attn.q_proj`, `mlp.gate_proj`, `input_layernorm`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from koe.nn.attention import Attention, Packed
from koe.nn.mlp import GatedMLP
from koe.nn.norm import LayerScale, RMSNorm
from koe.nn.rows import FEWEST_ROWS, with_fewest_rows
from koe.runtime.kv_cache import LayerCache


@dataclass(frozen=True)
class DecoderSpec:
    """The shape of one decoder stack.

    `attention_bias` puts biases on q/k/v and the output (Qwen3); `qkv_bias` overrides it for q/k/v
    only (Qwen2: True, with `attention_bias` False). `layer_scale`: initial value of per-channel
    residual scales (`self_attn_layer_scale`, `mlp_layer_scale`), None for none.
    """

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    attention_bias: bool = False
    qkv_bias: bool | None = None
    qk_norm: bool = True
    causal: bool = True
    sliding_window: int | None = None
    layer_scale: float | None = None

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_attention_heads ({self.num_heads}) must be a multiple of num_key_value_heads ({self.num_kv_heads})")


class DecoderLayer(nn.Module):
    """`x + attn(norm(x))`, then `x + mlp(norm(x))`, each branch scaled first when the spec has layer scales."""

    def __init__(self, spec: DecoderSpec) -> None:
        super().__init__()
        self.self_attn = Attention(
            spec.hidden_size,
            spec.num_heads,
            spec.num_kv_heads,
            spec.head_dim,
            qk_norm_eps=spec.rms_norm_eps if spec.qk_norm else None,
            qkv_bias=spec.attention_bias if spec.qkv_bias is None else spec.qkv_bias,
            out_bias=spec.attention_bias,
            causal=spec.causal,
            window=spec.sliding_window,
        )
        self.mlp = GatedMLP(spec.hidden_size, spec.intermediate_size)
        self.input_layernorm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)
        self.self_attn_layer_scale: nn.Module | None = None
        self.mlp_layer_scale: nn.Module | None = None
        if spec.layer_scale is not None:
            self.self_attn_layer_scale = LayerScale(spec.hidden_size, spec.layer_scale)
            self.mlp_layer_scale = LayerScale(spec.hidden_size, spec.layer_scale)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: LayerCache | None, mask: torch.Tensor | Packed | None) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C); cos, sin, cache and mask as `Attention.forward` takes them.
        `Packed` sequences of fewer positions in all than `FEWEST_ROWS` get zero rows after them (as
        many as the padded batch has, at most), dropped again: its products multiply that many rows."""
        if isinstance(mask, Packed) and x.shape[1] < min(FEWEST_ROWS, mask.reference_rows):
            t = x.shape[1]
            x = with_fewest_rows(x, dim=1, reference=mask.reference_rows)
            cos, sin = (with_fewest_rows(y, dim=-2, reference=mask.reference_rows) for y in (cos, sin))  # (B|1, 1, T, D)
            return self.forward(x, cos, sin, cache, mask)[:, :t]  # now as many rows as that: no second pass
        h = self.self_attn(self.input_layernorm(x), cos, sin, cache, mask)
        x = x + (h if self.self_attn_layer_scale is None else self.self_attn_layer_scale(h))
        h = self.mlp(self.post_attention_layernorm(x))
        return x + (h if self.mlp_layer_scale is None else self.mlp_layer_scale(h))
