"""CosyVoice 2's flow encoder: speech tokens (embedded, 25 Hz) -> 50 Hz hidden frames.

Upstream's `UpsampleConformerEncoder` as the release configures it (no macaron feed-forward, no
convolution module, so each layer is pre-norm relative-position self-attention plus a SiLU
feed-forward): a linear input embedding, a 3-token look-ahead conv layer, N layers, a 2x
nearest-neighbour upsampling conv, a second embedding, 4 more layers, a final LayerNorm. Widths are
512, as upstream hard-codes them. Streaming (`streaming=True`) restricts attention to chunks of 25
tokens (50 frames after upsampling) and everything before them; a chunk's look-ahead tokens come
in as `context` instead of zero padding. Parameter names are the release's (`encoders.0.self_attn.
linear_pos.weight`, `up_embed.out.1.bias`, ...).

Exactness: attention is computed as upstream computes it (two matmuls for the content and position
terms, ESPnet's relative shift, a division by sqrt(d_k), masked softmax, a matmul), the positional
table in float32 from the same formula, every op in upstream's order (the attention and feed-forward
are `koe.nn.conformer`'s, which IndexTTS's conditioning Conformer runs too).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conformer import FeedForward, RelPositionAttention

__all__ = ["EncoderConfig", "PreLookahead", "UpsampleConformerEncoder", "chunk_mask", "relative_positions"]

WIDTH = 512  # upstream's look-ahead and upsampling layers are built at 512 whatever the yaml says
UP_LAYERS = 4


@dataclass(frozen=True)
class EncoderConfig:
    """The yaml's `flow.encoder` arguments koe reads (the rest must be the release's)."""

    attention_heads: int = 8
    linear_units: int = 2048
    num_blocks: int = 6
    static_chunk_size: int = 25
    pre_lookahead_len: int = 3

    @classmethod
    def from_yaml(cls, args: dict) -> EncoderConfig:
        expected = {
            "output_size": WIDTH,
            "input_size": WIDTH,
            "input_layer": "linear",
            "pos_enc_layer_type": "rel_pos_espnet",
            "selfattention_layer_type": "rel_selfattn",
            "normalize_before": True,
            "use_cnn_module": False,
            "macaron_style": False,
        }
        for key, value in expected.items():
            if key in args and args[key] != value:
                raise ValueError(f"flow.encoder.{key} = {args[key]!r}: koe runs the released encoder ({key} = {value!r})")
        return cls(
            attention_heads=int(args.get("attention_heads", 4)),
            linear_units=int(args.get("linear_units", 2048)),
            num_blocks=int(args.get("num_blocks", 6)),
            static_chunk_size=int(args.get("static_chunk_size", 0)),
        )


def relative_positions(length: int, d_model: int, max_len: int = 5000) -> torch.Tensor:
    """ESPnet's relative positional table (1, 2*length - 1, d_model): positions length-1 .. -(length-1),
    sliced from the table upstream's `EspnetRelPositionalEncoding` computes (for 5000 positions, or
    for `length` when longer: float32 bits can depend on where a value sits in the vectorised loop,
    so the table is made at upstream's size)."""
    table = _position_table(max(max_len, length), d_model)
    centre = table.size(1) // 2
    return table[:, centre - length + 1 : centre + length]


@functools.lru_cache(maxsize=4)
def _position_table(size: int, d_model: int) -> torch.Tensor:
    position = torch.arange(0, size, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
    positive = torch.zeros(size, d_model)
    negative = torch.zeros(size, d_model)
    positive[:, 0::2] = torch.sin(position * div_term)
    positive[:, 1::2] = torch.cos(position * div_term)
    negative[:, 0::2] = torch.sin(-1 * position * div_term)
    negative[:, 1::2] = torch.cos(-1 * position * div_term)
    return torch.cat([torch.flip(positive, [0]).unsqueeze(0), negative[1:].unsqueeze(0)], dim=1)


def chunk_mask(length: int, chunk: int, device: torch.device | None = None) -> torch.Tensor:
    """(length, length) bool: frame i sees every frame of its own chunk and of the chunks before it."""
    pos = torch.arange(length, device=device)
    block_end = (torch.div(pos, chunk, rounding_mode="trunc") + 1) * chunk
    return pos.unsqueeze(0) < block_end.unsqueeze(1)


class LinearEmbed(nn.Module):
    """`LinearNoSubsampling`: Linear, LayerNorm (eps 1e-5), times sqrt(d) (the positional module's scale)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.LayerNorm(dim, eps=1e-5))
        self.xscale = math.sqrt(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x) * self.xscale


class ConformerLayer(nn.Module):
    """Pre-norm self-attention then pre-norm feed-forward, each residual (LayerNorms eps 1e-12)."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.self_attn = RelPositionAttention(heads, dim)
        self.feed_forward = FeedForward(dim, hidden)
        self.norm_ff = nn.LayerNorm(dim, eps=1e-12)
        self.norm_mha = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.norm_mha(x), mask, pos)
        return x + self.feed_forward(self.norm_ff(x))


class PreLookahead(nn.Module):
    """`PreLookaheadLayer`: a conv over each token and the next `look` (zeros past the end, or the
    given context tokens), LeakyReLU, a causal conv (kernel 3), residual. (B, T, C) -> (B, T, C)."""

    def __init__(self, in_channels: int, channels: int, look: int) -> None:
        super().__init__()
        self.look = look
        self.conv1 = nn.Conv1d(in_channels, channels, kernel_size=look + 1)
        self.conv2 = nn.Conv1d(channels, in_channels, kernel_size=3)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        h = x.transpose(1, 2).contiguous()
        if context is None or context.size(1) == 0:
            h = F.pad(h, (0, self.look), mode="constant", value=0.0)
        else:
            if context.size(1) != self.look:
                raise ValueError(f"look-ahead context of {context.size(1)} tokens; the layer takes {self.look}")
            h = torch.concat([h, context.transpose(1, 2).contiguous()], dim=2)
        h = F.leaky_relu(self.conv1(h))
        h = self.conv2(F.pad(h, (self.conv2.kernel_size[0] - 1, 0), mode="constant", value=0.0))
        return h.transpose(1, 2).contiguous() + x


class UpsampleConv(nn.Module):
    """`Upsample1D`: nearest 2x, 4 zeros on the left, a conv of kernel 5. (B, C, T) -> (B, C, 2T)."""

    def __init__(self, dim: int, stride: int = 2) -> None:
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv1d(dim, dim, stride * 2 + 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=float(self.stride), mode="nearest")
        return self.conv(F.pad(x, (self.stride * 2, 0), value=0.0))


class UpsampleConformerEncoder(nn.Module):
    """Embedded tokens (B, T, 512) -> hidden frames (B, 2T, 512); see the module docstring."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = LinearEmbed(WIDTH)
        self.pre_lookahead_layer = PreLookahead(WIDTH, WIDTH, config.pre_lookahead_len)
        self.encoders = nn.ModuleList([ConformerLayer(WIDTH, config.attention_heads, config.linear_units) for _ in range(config.num_blocks)])
        self.up_layer = UpsampleConv(WIDTH)
        self.up_embed = LinearEmbed(WIDTH)
        self.up_encoders = nn.ModuleList([ConformerLayer(WIDTH, config.attention_heads, config.linear_units) for _ in range(UP_LAYERS)])
        self.after_norm = nn.LayerNorm(WIDTH, eps=1e-5)

    def _mask(self, x: torch.Tensor, chunk: int, streaming: bool) -> torch.Tensor:
        """Upstream's `add_optional_chunk_mask` for one unpadded sequence: (1, 1, T), or (1, T, T) by chunks."""
        length = x.size(1)
        pad = torch.ones(x.size(0), 1, length, dtype=torch.bool, device=x.device)
        if streaming and chunk > 0:
            return pad & chunk_mask(length, chunk, x.device).unsqueeze(0)
        return pad

    def forward(self, xs: torch.Tensor, context: torch.Tensor | None = None, streaming: bool = False) -> torch.Tensor:
        """xs (1, T, 512) embedded tokens; `context` (1, look, 512) the look-ahead tokens of a streamed
        chunk (None: zeros). Returns (1, 2T, 512)."""
        chunk = self.config.static_chunk_size
        x = self.embed(xs)
        pos = relative_positions(x.size(1), WIDTH).to(x.dtype)
        if context is not None and context.size(1) != 0:
            context = self.embed(context)
        mask = self._mask(x, chunk, streaming)
        x = self.pre_lookahead_layer(x, context)
        for layer in self.encoders:
            x = layer(x, mask, pos)
        x = self.up_layer(x.transpose(1, 2).contiguous()).transpose(1, 2).contiguous()
        x = self.up_embed(x)
        pos = relative_positions(x.size(1), WIDTH).to(x.dtype)
        mask = self._mask(x, chunk * self.up_layer.stride, streaming)
        for layer in self.up_encoders:
            x = layer(x, mask, pos)
        return self.after_norm(x)
