"""IndexTTS's speech conditioning: a reference's features -> a few latent vectors for the GPT's prefix.

Releases 1.5, 2 and 2.5 run `condition_type: conformer_perceiver`: a Conformer encoder (WeNet
lineage: a 2x convolutional subsampling, relative-position self-attention without the relative
shift, a convolution module, pre-norm blocks each closed by its own LayerNorm) turns (b, C, T)
features into (b, T', d) hidden frames and a padding mask; a Perceiver resampler lets a fixed set
of learnt latents attend to themselves and those frames (padding masked) and returns (b, n, dim).
1.5's speaker conditioning reads a 100-bin mel (32 latents of the GPT's width); 2 reads w2v-BERT
features (1024) and adds an emotion conditioning of the same kind (4 blocks, 1 latent of 1024).

`SpeechConditioning` holds the two halves under the checkpoint's names (`conditioning_encoder.*`,
`perceiver_encoder.*`); `load_conditioning` takes them (or the `emo_` pair) out of a whole `gpt.pth`
state dict and loads them strictly. Every op is upstream's, in upstream's order and shapes, so the
float32 results are upstream's bit for bit (the same convolution calls on the same memory layouts,
two matmuls for the content and position scores, the masked softmax, einsum contractions in the
resampler). The attention and feed-forward are `koe.nn.conformer`'s, which CosyVoice's flow encoder
runs too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conformer import FeedForward, RelPositionAttention

__all__ = [
    "ConditioningConfig",
    "ConformerEncoder",
    "PerceiverResampler",
    "SpeechConditioning",
    "load_conditioning",
    "position_table",
]

POSITIONS = 5000  # rows of the positional table the checkpoint carries (embed.pos_enc.pe)
CONV_KERNEL = 15  # the convolution module's depthwise kernel
HEAD_DIM = 64  # the resampler's attention width per head
LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class ConditioningConfig:
    """One conditioning pair: the Conformer (`gpt.condition_module`) and the resampler it feeds.

    `input_size` is the feature width (100 mel bins in 1.5, 1024 w2v-BERT features in 2), `model_dim`
    the resampler's width (the GPT's `model_dim`, or 1024 for 2's emotion), `num_latents` its
    outputs (`condition_num_latent`, 32; 1 for 2's emotion)."""

    input_size: int = 100
    output_size: int = 512
    linear_units: int = 2048
    attention_heads: int = 8
    num_blocks: int = 6
    input_layer: str = "conv2d2"
    perceiver_mult: float = 2
    model_dim: int = 1280
    num_latents: int = 32

    def __post_init__(self) -> None:
        if self.input_layer != "conv2d2":
            raise ValueError(f"condition_module.input_layer = {self.input_layer!r}: koe runs the released 'conv2d2' subsampling")
        if self.output_size % self.attention_heads:
            raise ValueError(f"condition_module.output_size {self.output_size} is not a multiple of attention_heads {self.attention_heads}")

    @classmethod
    def from_yaml(cls, module: Mapping, *, input_size: int, model_dim: int, num_latents: int) -> ConditioningConfig:
        """A `condition_module` / `emo_condition_module` section of config.yaml's `gpt`."""
        keys = ("output_size", "linear_units", "attention_heads", "num_blocks", "input_layer", "perceiver_mult")
        missing = [k for k in keys if k not in module]
        if missing:
            raise ValueError(f"the conditioning module's config lacks {', '.join(missing)}")
        return cls(
            input_size=int(input_size),
            output_size=int(module["output_size"]),
            linear_units=int(module["linear_units"]),
            attention_heads=int(module["attention_heads"]),
            num_blocks=int(module["num_blocks"]),
            input_layer=str(module["input_layer"]),
            perceiver_mult=module["perceiver_mult"],
            model_dim=int(model_dim),
            num_latents=int(num_latents),
        )

    @classmethod
    def speaker(cls, gpt: Mapping, *, input_size: int = 100) -> ConditioningConfig:
        """The speaker conditioning from config.yaml's `gpt` section (input 100 in 1.5, 1024 in 2)."""
        kind = gpt.get("condition_type", "conformer_perceiver")
        if kind != "conformer_perceiver":
            raise ValueError(f"gpt.condition_type = {kind!r}: koe runs 'conformer_perceiver'")
        return cls.from_yaml(gpt["condition_module"], input_size=input_size, model_dim=gpt["model_dim"], num_latents=gpt.get("condition_num_latent", 32))

    @classmethod
    def emotion(cls, gpt: Mapping) -> ConditioningConfig:
        """Release 2's emotion conditioning (`gpt.emo_condition_module`): 1024 in, one latent of 1024."""
        return cls.from_yaml(gpt["emo_condition_module"], input_size=1024, model_dim=1024, num_latents=1)


def position_table(rows: int, dim: int) -> torch.Tensor:
    """The sinusoidal table (1, rows, dim) upstream builds for its positional buffer, in float32 at
    the same shapes (element-wise bits can depend on a tensor's size, so build it at `POSITIONS`)."""
    table = torch.zeros(rows, dim)
    position = torch.arange(0, rows).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2) * -(math.log(10000.0) / dim))
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table.unsqueeze(0)


# -- the Conformer --------------------------------------------------------------------------------------


class PositionTable(nn.Module):
    """Holds the checkpoint's positional table (`pe`, used as loaded) and the input scale sqrt(d)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.xscale = math.sqrt(dim)
        self.register_buffer("pe", position_table(POSITIONS, dim))

    def forward(self, length: int) -> torch.Tensor:
        if length >= self.pe.size(1):
            raise ValueError(f"a reference of {length} frames after subsampling; the positional table covers {self.pe.size(1) - 1}")
        return self.pe[:, :length]


class Subsample2(nn.Module):
    """(b, T, C) -> (b, (T-1)//2, d): a 3x3 stride-2 Conv2d over (time, feature), ReLU, a Linear
    over channels x the remaining features, times sqrt(d); the mask keeps every second frame from 2."""

    def __init__(self, idim: int, odim: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, odim, 3, 2), nn.ReLU())
        self.out = nn.Sequential(nn.Linear(odim * ((idim - 1) // 2), odim))
        self.pos_enc = PositionTable(odim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.conv(x.unsqueeze(1))  # (b, d, T', F')
        b, c, t, f = x.size()
        x = self.out(x.transpose(1, 2).contiguous().view(b, t, c * f))
        return x * self.pos_enc.xscale, self.pos_enc(t), mask[:, :, 2::2]


class ConvModule(nn.Module):
    """Pointwise conv to 2d, GLU, depthwise conv (kernel 15, same padding), LayerNorm, SiLU,
    pointwise conv; padded frames zeroed before and after. (b, T, d) -> (b, T, d)."""

    def __init__(self, dim: int, kernel: int = CONV_KERNEL) -> None:
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(dim, 2 * dim, kernel_size=1, stride=1, padding=0)
        self.depthwise_conv = nn.Conv1d(dim, dim, kernel, stride=1, padding=(kernel - 1) // 2, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pointwise_conv2 = nn.Conv1d(dim, dim, kernel_size=1, stride=1, padding=0)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        padded = ~mask  # (b, 1, T)
        x = x.transpose(1, 2).masked_fill(padded, 0.0)  # (b, d, T), a view of (b, T, d) memory as upstream's
        x = F.glu(self.pointwise_conv1(x), dim=1)
        x = self.depthwise_conv(x).transpose(1, 2)
        x = F.silu(self.norm(x)).transpose(1, 2)
        x = self.pointwise_conv2(x).masked_fill(padded, 0.0)
        return x.transpose(1, 2)


class ConformerBlock(nn.Module):
    """Pre-norm self-attention, convolution module and feed-forward, each residual, then a LayerNorm."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.self_attn = RelPositionAttention(heads, dim)
        self.feed_forward = FeedForward(dim, hidden)
        self.conv_module = ConvModule(dim)
        self.norm_ff = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.norm_mha = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.norm_conv = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.norm_final = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.norm_mha(x), mask, pos)
        x = x + self.conv_module(self.norm_conv(x), mask)
        x = x + self.feed_forward(self.norm_ff(x))
        return self.norm_final(x)


class ConformerEncoder(nn.Module):
    """(b, T, C) features and their lengths -> (b, T', d) hidden frames and the (b, 1, T') mask
    of real frames (True), T' = (T - 1) // 2."""

    def __init__(self, config: ConditioningConfig) -> None:
        super().__init__()
        d = config.output_size
        self.embed = Subsample2(config.input_size, d)
        self.after_norm = nn.LayerNorm(d, eps=LAYER_NORM_EPS)
        self.encoders = nn.ModuleList([ConformerBlock(d, config.attention_heads, config.linear_units) for _ in range(config.num_blocks)])

    def forward(self, xs: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        frames = torch.arange(0, xs.size(1), dtype=torch.int64, device=lengths.device)
        mask = (frames.unsqueeze(0) < lengths.unsqueeze(-1)).unsqueeze(1)  # (b, 1, T)
        x, pos, mask = self.embed(xs, mask)
        for block in self.encoders:
            x = block(x, mask, pos)
        return self.after_norm(x), mask


# -- the Perceiver resampler ----------------------------------------------------------------------------


class LatentAttention(nn.Module):
    """The latents attend to themselves and the context together (64-wide heads, no biases)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        inner = HEAD_DIM * heads
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_kv = nn.Linear(dim, inner * 2, bias=False)
        self.to_out = nn.Linear(inner, dim, bias=False)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3)

    def forward(self, latents: torch.Tensor, context: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """latents (b, n, dim), context (b, s, dim), mask bool (b, n + s), True = attend."""
        q = self._heads(self.to_q(latents))
        k, v = (self._heads(t) for t in self.to_kv(torch.cat((latents, context), dim=-2)).chunk(2, dim=-1))
        sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * q.shape[-1] ** -0.5
        sim = sim.masked_fill(~mask[:, None, None, :], -torch.finfo(sim.dtype).max)
        out = torch.einsum("b h i j, b h j d -> b h i d", sim.softmax(dim=-1), v)
        b, h, n, d = out.shape
        return self.to_out(out.permute(0, 2, 1, 3).reshape(b, n, h * d))


class GatedGelu(nn.Module):
    """Half the features times gelu of the other half."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, gate = x.chunk(2, dim=-1)
        return F.gelu(gate) * x


class RMSNorm(nn.Module):
    """x / |x| * sqrt(dim) * gamma."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) * self.scale * self.gamma


class PerceiverResampler(nn.Module):
    """(b, s, d) frames and a (b, n + s) mask -> (b, n, dim): two rounds of latent attention and a
    gated-GELU feed-forward, each residual, then an RMSNorm."""

    def __init__(self, config: ConditioningConfig, depth: int = 2) -> None:
        super().__init__()
        dim, context = config.model_dim, config.output_size
        self.proj_context = nn.Linear(context, dim) if context != dim else nn.Identity()
        self.latents = nn.Parameter(torch.zeros(config.num_latents, dim))
        inner = int(dim * config.perceiver_mult * 2 / 3)
        self.layers = nn.ModuleList(
            nn.ModuleList([LatentAttention(dim, config.attention_heads), nn.Sequential(nn.Linear(dim, inner * 2), GatedGelu(), nn.Linear(inner, dim))])
            for _ in range(depth)
        )
        self.norm = RMSNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.proj_context(x)
        latents = self.latents.unsqueeze(0).expand(x.shape[0], -1, -1)
        for attn, ff in self.layers:
            latents = attn(latents, x, mask) + latents
            latents = ff(latents) + latents
        return self.norm(latents)


# -- the pair ---------------------------------------------------------------------------------------------


class SpeechConditioning(nn.Module):
    """Features (b, C, T) with lengths (b,) -> latents (b, n, model_dim): upstream's
    `get_conditioning` (and release 2's `get_emo_conditioning`, whose latent the caller squeezes)."""

    def __init__(self, config: ConditioningConfig) -> None:
        super().__init__()
        self.config = config
        self.conditioning_encoder = ConformerEncoder(config)
        self.perceiver_encoder = PerceiverResampler(config)

    def encode(self, features: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The Conformer alone: (b, T', d) frames and their (b, 1, T') mask. `features` (b, C, T) as
        upstream's caller holds them (1.5: the mel; 2: w2v-BERT's (b, T, C) output transposed): the
        encoder reads their (b, T, C) transpose, a view, as upstream's does."""
        if lengths is None:
            lengths = torch.full((features.size(0),), features.size(-1), dtype=torch.long, device=features.device)
        if features.size(1) != self.config.input_size:
            raise ValueError(f"features of width {features.size(1)}; the conditioning encoder reads {self.config.input_size}")
        return self.conditioning_encoder(features.transpose(1, 2), lengths)

    def forward(self, features: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        hidden, mask = self.encode(features, lengths)
        mask = mask.squeeze(1)
        latent_mask = torch.ones(mask.size(0), self.config.num_latents, dtype=torch.bool, device=mask.device)
        return self.perceiver_encoder(hidden, torch.cat((latent_mask, mask), dim=1))


def load_conditioning(
    gpt_state: Mapping[str, torch.Tensor],
    config: ConditioningConfig,
    *,
    encoder: str = "conditioning_encoder",
    perceiver: str = "perceiver_encoder",
) -> SpeechConditioning:
    """A `SpeechConditioning` loaded strictly from a whole `gpt.pth` state dict: the keys under
    `encoder.` and `perceiver.` (release 2's emotion pair: `emo_conditioning_encoder`,
    `emo_perceiver_encoder`), in eval mode."""
    module = SpeechConditioning(config)
    renames = {f"{encoder}.": "conditioning_encoder.", f"{perceiver}.": "perceiver_encoder."}
    state = {}
    for key, value in gpt_state.items():
        for prefix, ours in renames.items():
            if key.startswith(prefix):
                state[ours + key[len(prefix) :]] = value
    module.load_state_dict(state, strict=True)
    return module.eval()
