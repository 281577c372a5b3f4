"""CosyVoice 2's flow estimator: a causal 1-D U-Net with transformer blocks (upstream's
`CausalConditionalDecoder`, Matcha-TTS's decoder made causal), predicting the flow's velocity.

Input: the noisy mel x, the encoder's mu, the speaker vector and the prompt condition, each
(B, 80, T), stacked to 320 channels, and the flow time t (B,). One down level (the release's
`channels: [256]`), `num_mid_blocks` middle blocks, one up level; every level is a causal ResNet
block (conv k3 left-padded, LayerNorm, Mish; the time embedding added between its two convs) and
`n_blocks` transformer blocks (LayerNorm, self-attention without q/k/v bias, LayerNorm, GELU MLP),
attending over the whole sequence, or with `streaming=True` within 50-frame chunks and everything
before. Parameter names are the release's (`down_blocks.0.1.0.attn1.to_q.weight`, ...).

Exactness: attention as diffusers' `AttnProcessor2_0` runs it (an additive -1e10 bias mask repeated
per head, SDPA), masks multiplied in where upstream multiplies them, the same op order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.cosyvoice.flow_encoder import chunk_mask
from koe.nn.dit import sinusoidal_embedding

__all__ = ["CausalUNet", "UNetConfig", "attention_bias", "head_bias"]


@dataclass(frozen=True)
class UNetConfig:
    """The yaml's `flow.decoder.estimator` arguments."""

    in_channels: int = 320
    out_channels: int = 80
    channels: int = 256
    attention_head_dim: int = 64
    n_blocks: int = 4
    num_mid_blocks: int = 12
    num_heads: int = 8
    static_chunk_size: int = 50

    @classmethod
    def from_yaml(cls, args: dict) -> UNetConfig:
        channels = list(args.get("channels", [256, 256]))
        if len(channels) != 1:
            raise ValueError(f"flow.decoder.estimator.channels = {channels}: koe runs the released one-level U-Net (one width)")
        if args.get("act_fn", "gelu") != "gelu":
            raise ValueError(f"flow.decoder.estimator.act_fn = {args['act_fn']!r}: koe runs the released 'gelu'")
        if int(args.get("num_decoding_left_chunks", -1)) >= 0:
            raise ValueError("flow.decoder.estimator.num_decoding_left_chunks: koe attends to every earlier chunk (-1), as the release")
        return cls(
            in_channels=int(args.get("in_channels", 320)),
            out_channels=int(args.get("out_channels", 80)),
            channels=int(channels[0]),
            attention_head_dim=int(args.get("attention_head_dim", 64)),
            n_blocks=int(args.get("n_blocks", 1)),
            num_mid_blocks=int(args.get("num_mid_blocks", 2)),
            num_heads=int(args.get("num_heads", 4)),
            static_chunk_size=int(args.get("static_chunk_size", 50)),
        )


def attention_bias(mask: torch.Tensor, chunk: int, streaming: bool, dtype: torch.dtype) -> torch.Tensor:
    """Upstream's additive mask (B, T, T) from a (B, 1, T) frame mask: 0 where a frame may attend,
    -1e10 where not (`mask_to_bias`); whole sequence, or causal chunks when streaming."""
    m = mask.bool()
    length = m.size(-1)
    if streaming and chunk > 0:
        m = m & chunk_mask(length, chunk, m.device).unsqueeze(0)
    else:
        m = m.repeat(1, length, 1)
    return (1.0 - m.to(dtype)) * -1.0e10


def head_bias(bias: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, T) -> (B, H, T, T), laid out as diffusers' `prepare_attention_mask` repeats it."""
    return bias.repeat_interleave(heads, dim=0).view(bias.shape[0], heads, -1, bias.shape[-1])


class Transpose(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.transpose(x, 1, 2)


class CausalConv1d(nn.Conv1d):
    """A conv (stride 1) on the input padded with kernel-1 zeros on the left."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int) -> None:
        super().__init__(c_in, c_out, kernel_size)
        self.causal_padding = kernel_size - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.causal_padding, 0), value=0.0))


class CausalBlock(nn.Module):
    """Masked input, causal conv k3, LayerNorm over channels, Mish, masked output."""

    def __init__(self, dim: int, dim_out: int) -> None:
        super().__init__()
        self.block = nn.Sequential(CausalConv1d(dim, dim_out, 3), Transpose(), nn.LayerNorm(dim_out), Transpose(), nn.Mish())

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.block(x * mask) * mask


class CausalResnetBlock(nn.Module):
    """Two causal blocks with the time embedding's projection added between them, plus a 1x1 residual."""

    def __init__(self, dim: int, dim_out: int, time_dim: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Mish(), nn.Linear(time_dim, dim_out))
        self.block1 = CausalBlock(dim, dim_out)
        self.block2 = CausalBlock(dim_out, dim_out)
        self.res_conv = nn.Conv1d(dim, dim_out, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = self.block1(x, mask)
        h += self.mlp(t).unsqueeze(-1)
        h = self.block2(h, mask)
        return h + self.res_conv(x * mask)


class SelfAttention(nn.Module):
    """diffusers' `Attention` (no q/k/v bias) through `AttnProcessor2_0`, with an additive mask."""

    def __init__(self, dim: int, heads: int, head_dim: int) -> None:
        super().__init__()
        inner = heads * head_dim
        self.heads = heads
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_k = nn.Linear(dim, inner, bias=False)
        self.to_v = nn.Linear(dim, inner, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner, dim), nn.Identity()])

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, C); mask (B, H, T, T) additive (`head_bias`), or None: every frame."""
        b = x.shape[0]
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        head_dim = k.shape[-1] // self.heads
        q, k, v = (y.view(b, -1, self.heads, head_dim).transpose(1, 2) for y in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
        out = out.transpose(1, 2).reshape(b, -1, self.heads * head_dim).to(q.dtype)
        return self.to_out[0](out)


class GELUProj(nn.Module):
    def __init__(self, dim: int, inner: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(x), approximate="none")


class FeedForward(nn.Module):
    """Matcha's FeedForward with GELU: `net.0.proj`, `net.2` (4x wide)."""

    def __init__(self, dim: int, mult: int = 4) -> None:
        super().__init__()
        self.net = nn.ModuleList([GELUProj(dim, dim * mult), nn.Identity(), nn.Linear(dim * mult, dim)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net[2](self.net[0](x))


class TransformerBlock(nn.Module):
    """Matcha's `BasicTransformerBlock` as the estimator uses it (layer norms, self-attention, MLP)."""

    def __init__(self, dim: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = SelfAttention(dim, heads, head_dim)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        x = self.attn1(self.norm1(x), bias) + x
        return self.ff(self.norm3(x)) + x


class TimeMLP(nn.Module):
    def __init__(self, dim: int, out: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(dim, out)
        self.linear_2 = nn.Linear(out, out)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(t)))


class CausalUNet(nn.Module):
    """The v2 estimator: (x, mask, mu, t, spks, cond) -> velocity (B, 80, T)."""

    def __init__(self, config: UNetConfig) -> None:
        super().__init__()
        c = self.config = config
        ch, time_dim = c.channels, c.channels * 4
        self.time_mlp = TimeMLP(c.in_channels, time_dim)

        def level(dim_in: int) -> nn.ModuleList:
            return nn.ModuleList(
                [CausalResnetBlock(dim_in, ch, time_dim), nn.ModuleList([TransformerBlock(ch, c.num_heads, c.attention_head_dim) for _ in range(c.n_blocks)])]
            )

        down = level(c.in_channels)
        down.append(CausalConv1d(ch, ch, 3))
        self.down_blocks = nn.ModuleList([down])
        self.mid_blocks = nn.ModuleList([level(ch) for _ in range(c.num_mid_blocks)])
        up = level(2 * ch)
        up.append(CausalConv1d(ch, ch, 3))
        self.up_blocks = nn.ModuleList([up])
        self.final_block = CausalBlock(ch, ch)
        self.final_proj = nn.Conv1d(ch, c.out_channels, 1)

    @staticmethod
    def _transformers(blocks: nn.ModuleList, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        x = x.transpose(1, 2).contiguous()  # (B, T, C)
        for block in blocks:
            x = block(x, bias)
        return x.transpose(1, 2).contiguous()

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor, streaming: bool = False
    ) -> torch.Tensor:
        """x, mu, cond (B, 80, T); mask (B, 1, T); t (B,); spks (B, 80)."""
        c = self.config
        t = self.time_mlp(sinusoidal_embedding(t, c.in_channels).to(t.dtype))
        x = torch.cat([x, mu, spks.unsqueeze(-1).expand(-1, -1, x.shape[-1]), cond], dim=1)
        # one mask for every block: each level runs at the full frame rate with the same frame mask.
        # Where it hides nothing (offline, no padding) SDPA runs without it: adding its zeros is exact,
        # and torch's CPU kernel gives the same bits with and without an all-zero mask (tested)
        bias = None if not streaming and bool(mask.all()) else head_bias(attention_bias(mask, c.static_chunk_size, streaming, x.dtype), c.num_heads)
        (resnet, blocks, downsample) = self.down_blocks[0]
        x = self._transformers(blocks, resnet(x, mask, t), bias)
        skip = x
        x = downsample(x * mask)
        for resnet, blocks in self.mid_blocks:
            x = self._transformers(blocks, resnet(x, mask, t), bias)
        (resnet, blocks, upsample) = self.up_blocks[0]
        x = torch.cat([x[:, :, : skip.shape[-1]], skip], dim=1)
        x = self._transformers(blocks, resnet(x, mask, t), bias)
        x = upsample(x * mask)
        x = self.final_block(x, mask)
        return self.final_proj(x * mask) * mask
