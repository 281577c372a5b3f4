"""CosyVoice 3's flow estimator: a diffusion transformer (upstream's `cosyvoice.flow.DiT.dit.DiT`,
F5-TTS's DiT made causal), predicting the flow's velocity.

Input: the noisy mel x, the prompt condition, the token frames mu and the speaker vector
(80 each) projected to `dim`, plus a causal convolutional position embedding (two grouped convs,
kernel 31, left-padded); `depth` AdaLN-zero blocks (koe.nn.dit) whose attention takes a mask
(the whole sequence, or with `streaming=True` 50-frame chunks and everything before) and rotary
positions on the first head only (x-transformers applied to the joined heads, as in F5-TTS v1);
the final modulated norm and projection. Parameter names are the release's
(`transformer_blocks.0.attn.to_q.weight`, `rotary_embed.inv_freq`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.cosyvoice.flow_encoder import chunk_mask
from koe.nn.dit import AdaLayerNormFinal, DiTBlock, RotaryFrequencies, SelfAttention, TimestepEmbedding, apply_pair_rotary

__all__ = ["DiT", "DiTConfig", "frame_attention_mask"]


@dataclass(frozen=True)
class DiTConfig:
    """The yaml's `flow.decoder.estimator` arguments (v3)."""

    dim: int = 1024
    depth: int = 22
    heads: int = 16
    dim_head: int = 64
    ff_mult: float = 2
    mel_dim: int = 80
    mu_dim: int = 80
    spk_dim: int = 80
    static_chunk_size: int = 50

    @classmethod
    def from_yaml(cls, args: dict) -> DiTConfig:
        if args.get("long_skip_connection"):
            raise ValueError("flow.decoder.estimator.long_skip_connection: koe runs the released DiT (none)")
        if int(args.get("num_decoding_left_chunks", -1)) >= 0:
            raise ValueError("flow.decoder.estimator.num_decoding_left_chunks: koe attends to every earlier chunk (-1), as the release")
        mel = int(args.get("mel_dim", 80))
        return cls(
            dim=int(args["dim"]),
            depth=int(args.get("depth", 8)),
            heads=int(args.get("heads", 8)),
            dim_head=int(args.get("dim_head", 64)),
            ff_mult=args.get("ff_mult", 4),
            mel_dim=mel,
            mu_dim=int(args.get("mu_dim") or mel),
            spk_dim=int(args.get("spk_dim") or 0),
            static_chunk_size=int(args.get("static_chunk_size", 50)),
        )


def frame_attention_mask(mask: torch.Tensor, chunk: int, streaming: bool) -> torch.Tensor:
    """(B, 1, T) frame mask -> bool (B, 1, T, T), True = attend: every frame, or causal chunks."""
    m = mask.bool()
    length = m.size(-1)
    if streaming and chunk > 0:
        return (m & chunk_mask(length, chunk, m.device).unsqueeze(0)).unsqueeze(1)
    return m.repeat(1, length, 1).unsqueeze(1)


class CausalConvPositionEmbedding(nn.Module):
    """(B, T, C) -> (B, T, C): two grouped convs (kernel 31, 16 groups) on left-padded input, each then Mish."""

    def __init__(self, dim: int, kernel_size: int = 31, groups: int = 16) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.conv1 = nn.Sequential(nn.Conv1d(dim, dim, kernel_size, groups=groups), nn.Mish())
        self.conv2 = nn.Sequential(nn.Conv1d(dim, dim, kernel_size, groups=groups), nn.Mish())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 1)
        x = self.conv1(F.pad(x, (self.kernel_size - 1, 0, 0, 0)))
        x = self.conv2(F.pad(x, (self.kernel_size - 1, 0, 0, 0)))
        return x.permute(0, 2, 1)


class InputEmbedding(nn.Module):
    """[x, cond, mu, speaker] (each (B, T, 80); the speaker repeated over T) -> Linear -> + its conv position embedding."""

    def __init__(self, mel_dim: int, mu_dim: int, dim: int, spk_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(mel_dim * 2 + mu_dim + spk_dim, dim)
        self.conv_pos_embed = CausalConvPositionEmbedding(dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, mu: torch.Tensor, spks: torch.Tensor) -> torch.Tensor:
        parts = [x, cond, mu]
        if spks is not None:
            parts.append(spks.unsqueeze(1).expand(-1, x.shape[1], -1))
        x = self.proj(torch.cat(parts, dim=-1))
        return self.conv_pos_embed(x) + x


class MaskedSelfAttention(SelfAttention):
    """`koe.nn.dit.SelfAttention` with upstream's boolean mask (B, 1, T, T): given to SDPA, and the
    output rows zeroed where the last query's row is False (upstream's padding rule)."""

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, mask: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        batch = x.shape[0]
        q, k, v = (proj(x).view(batch, -1, self.heads, proj.out_features // self.heads).transpose(1, 2) for proj in (self.to_q, self.to_k, self.to_v))
        if rope is not None:
            n = self.rotary_heads
            q = torch.cat((apply_pair_rotary(q[:, :n], rope), q[:, n:]), dim=1)
            k = torch.cat((apply_pair_rotary(k[:, :n], rope), k[:, n:]), dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
        out = self.to_out[0](out.transpose(1, 2).reshape(batch, -1, q.shape[1] * q.shape[-1]))
        if mask is not None:
            out = out.masked_fill(~mask[:, 0, -1].unsqueeze(-1), 0.0)
        return out


class MaskedDiTBlock(DiTBlock):
    """`koe.nn.dit.DiTBlock` whose attention takes the frame mask."""

    def __init__(self, dim: int, heads: int, dim_head: int, ff_mult: float) -> None:
        super().__init__(dim, heads, dim_head, ff_mult=ff_mult, rotary_heads=1)
        self.attn = MaskedSelfAttention(dim, heads, dim_head, rotary_heads=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, mask: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        norm, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.attn_norm(x, t)
        x = self.attn(norm, rope, mask).mul_(gate_msa.unsqueeze(1)).add_(x)
        ff_in = self.ff_norm(x).mul_(1 + scale_mlp[:, None]).add_(shift_mlp[:, None])
        return self.ff(ff_in).mul_(gate_mlp.unsqueeze(1)).add_(x)


class DiT(nn.Module):
    """The v3 estimator: (x, mask, mu, t, spks, cond) -> velocity (B, 80, T)."""

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        c = self.config = config
        self.time_embed = TimestepEmbedding(c.dim)
        self.input_embed = InputEmbedding(c.mel_dim, c.mu_dim, c.dim, c.spk_dim)
        self.rotary_embed = RotaryFrequencies(c.dim_head)
        self.transformer_blocks = nn.ModuleList([MaskedDiTBlock(c.dim, c.heads, c.dim_head, c.ff_mult) for _ in range(c.depth)])
        self.norm_out = AdaLayerNormFinal(c.dim)
        self.proj_out = nn.Linear(c.dim, c.mel_dim)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor, streaming: bool = False
    ) -> torch.Tensor:
        """x, mu, cond (B, 80, T); mask (B, 1, T); t (B,); spks (B, 80)."""
        x, mu, cond = x.transpose(1, 2), mu.transpose(1, 2), cond.transpose(1, 2)
        if t.ndim == 0:
            t = t.repeat(x.shape[0])
        t = self.time_embed(t)
        h = self.input_embed(x, cond, mu, spks)
        rope = self.rotary_embed(h.shape[1])
        # offline without padding the mask hides nothing: SDPA without it gives the same bits (tested)
        attn_mask = None if not streaming and bool(mask.all()) else frame_attention_mask(mask, self.config.static_chunk_size, streaming)
        for block in self.transformer_blocks:
            h = block(h, t, rope, attn_mask)
        return self.proj_out(self.norm_out(h, t)).transpose(1, 2)
