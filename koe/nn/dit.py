"""Diffusion-transformer blocks: timestep embedding, AdaLN-zero modulation, the DiT block, the
convolutional position embedding and ConvNeXt-V2 (with global response normalisation).

F5-TTS's DiT is built from these; CosyVoice 3's flow, GPT-SoVITS v3/v4 and IndexTTS 2 reuse the
same kinds of blocks. Parameter names are the released checkpoints' (`attn_norm.linear`,
`attn.to_q`, `ff.ff.0.0`, ...). Every op runs in the order the reference does, so float32 results
are the reference's bits: e.g. the modulation is `norm(x) * (1 + scale) + shift`, the rotary
embedding pairs adjacent channels, GRN takes its L2 norm over the sequence axis.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.norm import RMSNorm

__all__ = [
    "AdaLayerNorm",
    "AdaLayerNormFinal",
    "ConvNeXtV2Block",
    "ConvPositionEmbedding",
    "DiTBlock",
    "FeedForward",
    "GlobalResponseNorm",
    "InputEmbedding",
    "RotaryFrequencies",
    "SelfAttention",
    "TimestepEmbedding",
    "apply_pair_rotary",
    "pair_rotary_freqs",
    "pair_rotary_tables",
    "sinusoidal_embedding",
    "text_position_table",
]


def sinusoidal_embedding(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """Timesteps (B,) -> (B, dim): `[sin(scale * t * w), cos(scale * t * w)]`, `w_i = 10000^(-i / (dim/2 - 1))`."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    freqs = torch.exp(torch.arange(half, device=t.device).float() * -step)
    angles = scale * t.unsqueeze(1) * freqs.unsqueeze(0)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


class TimestepEmbedding(nn.Module):
    """Flow time t (B,) -> conditioning vector (B, dim): sinusoid (256) then Linear-SiLU-Linear."""

    def __init__(self, dim: int, freq_dim: int = 256) -> None:
        super().__init__()
        self.freq_dim = freq_dim
        self.time_mlp = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.time_mlp(sinusoidal_embedding(t, self.freq_dim).to(t.dtype))


class GlobalResponseNorm(nn.Module):
    """ConvNeXt-V2's GRN on (B, T, C): L2 norm over T, divided by its mean over C."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gx = torch.norm(x, p=2, dim=1, keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * nx) + self.beta + x


class ConvNeXtV2Block(nn.Module):
    """(B, T, C) -> (B, T, C): depthwise conv (7), LayerNorm, Linear-GELU, GRN, Linear, residual."""

    def __init__(self, dim: int, intermediate_dim: int, dilation: int = 1) -> None:
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=7, padding=dilation * 3, groups=dim, dilation=dilation)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.grn = GlobalResponseNorm(intermediate_dim)
        self.pwconv2 = nn.Linear(intermediate_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x.transpose(1, 2)).transpose(1, 2)
        h = F.gelu(self.pwconv1(self.norm(h)))
        return x + self.pwconv2(self.grn(h))


class ConvPositionEmbedding(nn.Module):
    """(B, T, C) -> (B, T, C): two grouped convs (kernel 31, 16 groups), each followed by Mish."""

    def __init__(self, dim: int, kernel_size: int = 31, groups: int = 16) -> None:
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError("ConvPositionEmbedding needs an odd kernel size")
        pad = kernel_size // 2
        self.conv1d = nn.Sequential(
            nn.Conv1d(dim, dim, kernel_size, groups=groups, padding=pad),
            nn.Mish(),
            nn.Conv1d(dim, dim, kernel_size, groups=groups, padding=pad),
            nn.Mish(),
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask` (B, T), True on real frames (a padded training batch): padding is zeroed before
        each conv and after it, as the reference does."""
        if mask is None:
            return self.conv1d(x.permute(0, 2, 1)).permute(0, 2, 1)
        pad = ~mask.unsqueeze(1)
        x = x.permute(0, 2, 1).masked_fill(pad, 0.0)
        for layer in self.conv1d:
            x = layer(x)
            if isinstance(layer, nn.Conv1d):
                x = x.masked_fill(pad, 0.0)
        return x.permute(0, 2, 1)


class InputEmbedding(nn.Module):
    """F5-TTS's `input_embed`: [noisy mel, reference mel, text (or feature) embedding] (each (B, T, .))
    -> the model width (`proj`), plus its conv position embedding; `drop_cond` zeroes the reference
    mel first (classifier-free guidance's unconditional row)."""

    def __init__(self, mel_dim: int, text_dim: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(mel_dim * 2 + text_dim, dim)
        self.conv_pos_embed = ConvPositionEmbedding(dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, text: torch.Tensor, drop_cond: bool = False, mask: torch.Tensor | None = None) -> torch.Tensor:
        if drop_cond:
            cond = torch.zeros_like(cond)
        x = self.proj(torch.cat((x, cond, text), dim=-1))
        return self.conv_pos_embed(x, mask) + x


def text_position_table(dim: int, length: int, theta: float = 10000.0) -> torch.Tensor:
    """(length, dim) `[cos(p * w), sin(p * w)]` with `w_i = theta^(-2i / dim)`: F5-TTS's
    `precompute_freqs_cis`, the positions added to the text embedding before its ConvNeXt blocks."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device="cpu")[: dim // 2].float() / dim))
    angles = torch.outer(torch.arange(length, device="cpu"), freqs).float()
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


def pair_rotary_freqs(inv_freq: torch.Tensor, length: int) -> torch.Tensor:
    """Rotary angles (1, length, head_dim) for positions 0..length-1, each frequency repeated for
    the two channels of its pair (`f0, f0, f1, f1, ...`)."""
    positions = torch.arange(length, device=inv_freq.device).type_as(inv_freq)
    freqs = positions[:, None] * inv_freq[None, :]
    return torch.stack((freqs, freqs), dim=-1).reshape(1, length, -1)


def pair_rotary_tables(freqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, signed sin) tables (1, 1, T, R) from pair-layout angles (1, T, R), made once per forward.

    The sine carries the pair rotation's sign (-sin on even channels, +sin on odd), so applying it
    needs no negation: `x1 * -sin` equals `-x1 * sin` bit for bit.
    """
    sin = freqs.sin()
    sign = torch.tensor([-1.0, 1.0], dtype=sin.dtype, device=sin.device).repeat(sin.shape[-1] // 2)
    return freqs.cos().unsqueeze(1), (sin * sign).unsqueeze(1)


class RotaryFrequencies(nn.Module):
    """x-transformers' `RotaryEmbedding` as the DiTs hold it: the rotary `inv_freq` (a persistent
    buffer, stored in the released checkpoints) -> `pair_rotary_tables` for a length."""

    def __init__(self, dim_head: int) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim_head, 2, device="cpu").float() / dim_head)))

    def forward(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return pair_rotary_tables(pair_rotary_freqs(self.inv_freq, length))


def _swap_pairs(x: torch.Tensor) -> torch.Tensor:
    """(x0, x1, x2, x3, ...) -> (x1, x0, x3, x2, ...) on the last dimension."""
    return x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)


def apply_pair_rotary(x: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate x (B, H, T, D) by `pair_rotary_tables` (R <= D channels; the rest pass unrotated):
    `x * cos + rotate_pairs(x) * sin`, the reference's arithmetic."""
    cos, sin = tables
    rot = cos.shape[-1]
    if rot == x.shape[-1]:
        return x * cos + _swap_pairs(x) * sin
    head = x[..., :rot]
    return torch.cat((head * cos + _swap_pairs(head) * sin, x[..., rot:]), dim=-1)


class SelfAttention(nn.Module):
    """Multi-head self-attention with rotary positions on the first `rotary_heads` heads (all when None)."""

    def __init__(self, dim: int, heads: int, dim_head: int, qk_norm: str | None = None, rotary_heads: int | None = None, dropout: float = 0.0) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.rotary_heads = rotary_heads
        self.dropout = dropout  # on the output, in training (the reference's `to_out[1]`)
        self.to_q = nn.Linear(dim, inner)
        self.to_k = nn.Linear(dim, inner)
        self.to_v = nn.Linear(dim, inner)
        if qk_norm not in (None, "rms_norm"):
            raise ValueError(f"unknown qk_norm {qk_norm!r} (known: rms_norm)")
        # the reference's RMSNorm takes its float32 path on torch >= 2.10 (its version check reads "2.1")
        self.q_norm = RMSNorm(dim_head, eps=1e-6) if qk_norm else None
        self.k_norm = RMSNorm(dim_head, eps=1e-6) if qk_norm else None
        self.to_out = nn.ModuleList([nn.Linear(inner, dim), nn.Identity()])

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask` (B, T), True on real frames: padded frames' outputs are zeroed (attention itself
        is not masked, as the reference's torch backend without `attn_mask_enabled`)."""
        batch = x.shape[0]
        q, k, v = (proj(x).view(batch, -1, self.heads, proj.out_features // self.heads).transpose(1, 2) for proj in (self.to_q, self.to_k, self.to_v))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            n = self.rotary_heads
            if n is None:
                q, k = apply_pair_rotary(q, rope), apply_pair_rotary(k, rope)
            else:
                q = torch.cat((apply_pair_rotary(q[:, :n], rope), q[:, n:]), dim=1)
                k = torch.cat((apply_pair_rotary(k[:, :n], rope), k[:, n:]), dim=1)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False)
        out = self.to_out[0](out.transpose(1, 2).reshape(batch, -1, q.shape[1] * q.shape[-1]))
        if self.training and self.dropout:
            out = F.dropout(out, self.dropout, training=True)
        return out if mask is None else out.masked_fill(~mask.unsqueeze(-1), 0.0)


class FeedForward(nn.Module):
    """Linear-GELU(tanh)-Linear, named as the reference (`ff.0.0`, `ff.2`)."""

    def __init__(self, dim: int, mult: float = 4, dropout: float = 0.0) -> None:
        super().__init__()
        inner = int(dim * mult)
        self.ff = nn.Sequential(nn.Sequential(nn.Linear(dim, inner), nn.GELU(approximate="tanh")), nn.Identity(), nn.Linear(inner, dim))
        self.dropout = dropout  # after the activation, in training (the reference's `ff.1`)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ff[0][0](x)
        if not _recording(self):
            return self.ff[2](torch.ops.aten.gelu_(h, approximate="tanh"))  # in place: the same bits, one tensor less
        h = F.gelu(h, approximate="tanh")
        if self.training and self.dropout:
            h = F.dropout(h, self.dropout, training=True)
        return self.ff[2](h)


class AdaLayerNorm(nn.Module):
    """AdaLN-zero: (x, t) -> modulated norm(x) for attention and the five other modulation vectors."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim * 6)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x: torch.Tensor, t: torch.Tensor):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = torch.chunk(self.linear(F.silu(t)), 6, dim=1)
        return _modulate(self.norm(x), scale_msa, shift_msa, _recording(self)), gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNormFinal(nn.Module):
    """The output modulation: norm(x) * (1 + scale) + shift, from t."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim * 2)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        scale, shift = torch.chunk(self.linear(F.silu(t)), 2, dim=1)
        return _modulate(self.norm(x), scale, shift, _recording(self))


class DiTBlock(nn.Module):
    """AdaLN-zero transformer block: gated attention and gated feed-forward, both modulated by t."""

    def __init__(
        self, dim: int, heads: int, dim_head: int, ff_mult: float = 4, qk_norm: str | None = None, rotary_heads: int | None = None, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.attn_norm = AdaLayerNorm(dim)
        self.attn = SelfAttention(dim, heads, dim_head, qk_norm=qk_norm, rotary_heads=rotary_heads, dropout=dropout)
        self.ff_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim, mult=ff_mult, dropout=dropout)

    def forward(self, x: torch.Tensor, t: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, mask: torch.Tensor | None = None) -> torch.Tensor:
        norm, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.attn_norm(x, t)
        if _recording(self):  # autograd keeps the operands: out of place (the same bits as below)
            x = x + gate_msa.unsqueeze(1) * self.attn(norm, rope, mask)
            return x + gate_mlp.unsqueeze(1) * self.ff(_modulate(self.ff_norm(x), scale_mlp, shift_mlp, True))
        # x + gate * f(x), in place on f's fresh output (IEEE products and sums commute: same bits)
        x = self.attn(norm, rope, mask).mul_(gate_msa.unsqueeze(1)).add_(x)
        return self.ff(_modulate(self.ff_norm(x), scale_mlp, shift_mlp)).mul_(gate_mlp.unsqueeze(1)).add_(x)


def _modulate(normed: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, recording: bool = False) -> torch.Tensor:
    """AdaLN's `norm(x) * (1 + scale) + shift`, in place on the fresh normalised tensor unless
    autograd is `recording` (its backward needs the normalised values)."""
    if recording:
        return normed * (1 + scale[:, None]) + shift[:, None]
    return normed.mul_(1 + scale[:, None]).add_(shift[:, None])


def _recording(module: nn.Module) -> bool:
    """Whether this forward is for training: the module is in training mode or autograd records
    (in-place shortcuts would overwrite what backward needs; dropout draws only in training)."""
    return module.training or torch.is_grad_enabled()
