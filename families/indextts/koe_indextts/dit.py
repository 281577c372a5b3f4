"""IndexTTS 2's flow-matching estimator: a diffusion transformer (Seed-VC's DiT) with a WaveNet head.

    x (B, 80, T) noisy mel, prompt_x (B, 80, T) reference mel then zeros, cond (B, T, content_dim),
    style (B, style_dim), t (B,)
      -> cond_x_merge_linear([x, prompt_x, cond_projection(cond), style]) (B, T, D)
      -> transformer: depth blocks of RMSNorm modulated by t (AdaptiveLayerNorm), rotary attention
         over the frames (a padding mask), SwiGLU; U-ViT skips from the first half to the second
      -> skip_linear([h, x]) -> conv1 -> WaveNet(g = t_embedder2(t)) + res_projection(h)
      -> final_layer (LayerNorm modulated by t) -> conv2 -> velocity (B, 80, T)

Parameter names are `s2mel.pth`'s (`net["cfm"]` under `estimator.`): the transformer keeps
gpt-fast's (`transformer.layers.N.attention.wqkv`, `feed_forward.w1`, `attention_norm.project_layer`),
the weight-normed layers their `weight_g` / `weight_v` (old-style weight norm over dim 0), the
WaveNet convs their wrappers' nesting (`wavenet.in_layers.N.conv.conv`). Modules upstream builds
but never calls at inference (`x_embedder`, `cond_embedder`, `content_mask_embedder`) are kept so
the checkpoint loads strictly. Every op is upstream's, in its order and on its shapes (the same
matmuls, the same `scaled_dot_product_attention` call with the same boolean mask, the rotary table
computed for upstream's 16384 positions), so CPU float32 gives upstream's bits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.norm import RMSNorm

__all__ = ["DiT", "DiTConfig", "WaveNet", "sequence_mask"]

MAX_POSITIONS = 16384  # upstream's position table (`input_pos`) and rotary block size
MAX_CAUSAL_POSITIONS = 8192  # upstream's causal mask (its caches are set up for 8192 frames)
ROPE_BASE = 10000
# The cut after the transformer (`DiT.forward`'s `from_frame`: the frames read, less the WaveNet's
# reach) keeps at least this many frames, and is taken only for a batch of two or more (the flow's
# conditioned and unconditioned rows): upstream runs every frame, and on an AVX2-only AMD EPYC
# (torch 2.13, oneDNN's and MKL's AVX2 kernels, `MKL_CBWR=AUTO,STRICT`) a frame's bits depend on how
# many frames a layer gets. Measured there against 400 frames: batch 2, a 1x1 conv1d of 11 frames or
# fewer and a float32 product of 1 to 3 rows differed (kernel-5 convs never); batch 1, a kernel-5
# conv differed up to about 20480 / in_channels frames (36 at 512 channels, every count below 200 at
# 64: another kernel for a small input). On the AVX-512 machines no count did.
MIN_CUT_FRAMES = 32


@dataclass(frozen=True)
class DiTConfig:
    """The estimator's part of `config.yaml`'s `s2mel` section (`DiT`, `wavenet`, `style_encoder.dim`)."""

    hidden_dim: int
    num_heads: int
    depth: int
    in_channels: int
    content_dim: int
    content_codebook_size: int
    style_dim: int
    style_condition: bool = True
    final_layer_type: str = "wavenet"
    long_skip_connection: bool = True
    uvit_skip_connection: bool = True
    is_causal: bool = False
    zero_prompt_speech_token: bool = False
    wavenet_hidden_dim: int = 512
    wavenet_layers: int = 8
    wavenet_kernel_size: int = 5
    wavenet_dilation_rate: int = 1

    def __post_init__(self) -> None:
        for name in ("hidden_dim", "num_heads", "depth", "in_channels", "content_dim", "content_codebook_size", "style_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"s2mel DiT config: {name} must be a positive int, got {value!r}")
        if self.hidden_dim % self.num_heads or (self.hidden_dim // self.num_heads) % 2:
            raise ValueError(f"s2mel DiT config: hidden_dim {self.hidden_dim} must split into {self.num_heads} heads of an even width")
        if self.final_layer_type not in ("wavenet", "mlp"):
            raise ValueError(f"s2mel DiT config: final_layer_type must be 'wavenet' or 'mlp', got {self.final_layer_type!r}")
        if self.final_layer_type == "wavenet":
            for name in ("wavenet_hidden_dim", "wavenet_layers", "wavenet_kernel_size", "wavenet_dilation_rate"):
                value = getattr(self, name)
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise ValueError(f"s2mel wavenet config: {name.removeprefix('wavenet_')} must be a positive int, got {value!r}")
            if self.wavenet_kernel_size % 2 == 0:
                raise ValueError("s2mel wavenet config: kernel_size must be odd")
            if self.wavenet_hidden_dim != self.hidden_dim:  # its final layer is modulated by the DiT's time embedding
                raise ValueError(f"s2mel config: wavenet.hidden_dim ({self.wavenet_hidden_dim}) must equal DiT.hidden_dim ({self.hidden_dim})")

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    @property
    def intermediate_size(self) -> int:
        """gpt-fast's SwiGLU width: 2/3 of 4 D, rounded up to a multiple of 256."""
        hidden = int(2 * (4 * self.hidden_dim) / 3)
        return hidden if hidden % 256 == 0 else hidden + 256 - hidden % 256

    @classmethod
    def from_dict(cls, s2mel: Mapping[str, Any]) -> DiTConfig:
        """From the yaml's `s2mel` mapping (its `DiT`, `wavenet` and `style_encoder` sections)."""
        dit, wavenet = s2mel.get("DiT"), s2mel.get("wavenet") or {}
        if not isinstance(dit, Mapping):
            raise ValueError("s2mel config: missing the DiT section")
        if s2mel.get("dit_type", "DiT") != "DiT":
            raise ValueError(f"s2mel config: dit_type {s2mel.get('dit_type')!r} (upstream knows only 'DiT')")
        for flag in ("time_as_token", "style_as_token"):
            if dit.get(flag, False):
                raise ValueError(f"s2mel DiT config: {flag}: true is not supported (IndexTTS 2 uses false)")
        missing = [k for k in ("hidden_dim", "num_heads", "depth", "in_channels", "content_dim", "content_codebook_size", "style_condition") if k not in dit]
        style = s2mel.get("style_encoder")
        if not isinstance(style, Mapping) or "dim" not in style:
            missing.append("style_encoder.dim")
        final = dit.get("final_layer_type", "wavenet")
        if final == "wavenet":
            missing += [f"wavenet.{k}" for k in ("hidden_dim", "num_layers", "kernel_size", "dilation_rate", "style_condition") if k not in wavenet]
        if missing:
            raise ValueError(f"s2mel config: missing {', '.join(missing)}")
        if final == "wavenet" and bool(wavenet["style_condition"]) != bool(dit["style_condition"]):
            raise ValueError("s2mel config: DiT.style_condition and wavenet.style_condition must agree")
        extra = {}
        if final == "wavenet":
            extra = {
                "wavenet_hidden_dim": wavenet["hidden_dim"],
                "wavenet_layers": wavenet["num_layers"],
                "wavenet_kernel_size": wavenet["kernel_size"],
                "wavenet_dilation_rate": wavenet["dilation_rate"],
            }
        return cls(
            hidden_dim=dit["hidden_dim"],
            num_heads=dit["num_heads"],
            depth=dit["depth"],
            in_channels=dit["in_channels"],
            content_dim=dit["content_dim"],
            content_codebook_size=dit["content_codebook_size"],
            style_dim=s2mel["style_encoder"]["dim"],
            style_condition=bool(dit["style_condition"]),
            final_layer_type=final,
            long_skip_connection=bool(dit.get("long_skip_connection", False)),
            uvit_skip_connection=bool(dit.get("uvit_skip_connection", False)),
            is_causal=bool(dit.get("is_causal", False)),
            zero_prompt_speech_token=bool(dit.get("zero_prompt_speech_token", False)),
            **extra,
        )


def sequence_mask(lengths: torch.Tensor, max_length: int | None = None) -> torch.Tensor:
    """(B,) lengths -> (B, max_length) bool, True inside each sequence."""
    if max_length is None:
        max_length = lengths.max()
    positions = torch.arange(max_length, dtype=lengths.dtype, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


# -- weight-normed layers (the checkpoint's weight_g / weight_v) -------------------------------------


class _WeightNormed(nn.Module):
    """`bias`, `weight_g`, `weight_v` as `torch.nn.utils.weight_norm` leaves a layer (dim 0); the
    weight `torch._weight_norm(v, g, 0)` (upstream's hook, every call) is kept until they change."""

    def __init__(self, weight_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(weight_shape[0]))
        self.weight_g = nn.Parameter(torch.ones(weight_shape[0], *([1] * (len(weight_shape) - 1))))
        self.weight_v = nn.Parameter(torch.zeros(weight_shape))
        self._folded: tuple | None = None

    def weight(self) -> torch.Tensor:
        g, v = self.weight_g, self.weight_v
        if torch.is_grad_enabled() and (g.requires_grad or v.requires_grad):
            return torch._weight_norm(v, g, 0)
        key = (g.data_ptr(), g._version, v.data_ptr(), v._version, g.device, g.dtype, torch.is_inference_mode_enabled())
        if self._folded is None or self._folded[0] != key:
            # the detached aliases keep the storages alive, so no new tensor can take their addresses
            self._folded = (key, torch._weight_norm(v, g, 0), g.detach(), v.detach())
        return self._folded[1]


class WeightNormLinear(_WeightNormed):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__((out_features, in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight(), self.bias)


class WeightNormConv1d(_WeightNormed):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1) -> None:
        super().__init__((out_channels, in_channels, kernel_size))
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, self.weight(), self.bias, 1, 0, self.dilation)


class _Wrapped(nn.Module):
    """The checkpoint's nesting of a WaveNet conv (`<layer>.conv.conv.*`)."""

    def __init__(self, conv: nn.Module) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class ReflectConv1d(nn.Module):
    """A weight-normed stride-1 conv, reflect padded to keep the length (the right side gets the
    smaller half); an input no longer than the padding gets zeros on the right first, as upstream's
    `pad1d` does."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1) -> None:
        super().__init__()
        self.conv = _Wrapped(WeightNormConv1d(in_channels, out_channels, kernel_size, dilation))
        total = (kernel_size - 1) * dilation
        self.padding = (total - total // 2, total // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left, right = self.padding
        length, widest = x.shape[-1], max(left, right)
        extra = widest - length + 1 if length <= widest else 0
        if extra:
            x = F.pad(x, (0, extra))
        x = F.pad(x, (left, right), "reflect")
        if extra:
            x = x[..., : x.shape[-1] - extra]
        return self.conv(x)


# -- the transformer (gpt-fast's, time-modulated norms) ---------------------------------------------


def rope_table(head_dim: int, positions: int = MAX_POSITIONS, base: int = ROPE_BASE) -> torch.Tensor:
    """(positions, head_dim // 2, 2) cos / sin of the rotary angles, float32, as gpt-fast builds it."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(positions), inv_freq)  # (positions, head_dim / 2)
    rotation = torch.polar(torch.ones_like(angles), angles)
    return torch.stack([rotation.real, rotation.imag], dim=-1).to(torch.float32)


def apply_rotary(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent channel pairs of x (B, T, H, D) by table (T, D / 2, 2)."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)  # (B, T, H, D/2, 2)
    table = table.view(1, pairs.size(1), 1, pairs.size(3), 2)
    rotated = torch.stack(
        [
            pairs[..., 0] * table[..., 0] - pairs[..., 1] * table[..., 1],
            pairs[..., 1] * table[..., 0] + pairs[..., 0] * table[..., 1],
        ],
        -1,
    )
    return rotated.flatten(3).type_as(x)


class AdaptiveLayerNorm(nn.Module):
    """`scale * norm(x) + shift`, both from the time embedding."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.project_layer = nn.Linear(dim, 2 * dim)
        self.norm = RMSNorm(dim, eps=1e-5)
        self.dim = dim

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        scale, shift = torch.split(self.project_layer(c), split_size_or_sections=self.dim, dim=-1)
        return scale * self.norm(x) + shift


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.heads, self.head_dim = heads, dim // heads

    def forward(self, x: torch.Tensor, table: torch.Tensor, mask: torch.Tensor, first: int = 0) -> torch.Tensor:
        """Every frame attends; only frames from `first` on are returned (`wo` makes only those).

        The attention itself runs every frame's query, as upstream's does: torch's CPU flash
        attention splits the queries into blocks by their count (32, 64 or 256 rows) and multiplies
        each block with one product, and a float32 product of 1 to 3 rows sums in another order than
        one of 4 or more on an AVX2-only AMD EPYC (MKL, `MKL_CBWR=AUTO,STRICT`): measured, the
        queries from `first` on alone (a last block of 2 rows) gave outputs a last bit off the
        whole attention's, hence a mel off upstream's; on the AVX-512 machines it made no difference."""
        batch, length, dim = x.shape
        q, k, v = self.wqkv(x).split([dim, dim, dim], dim=-1)
        q = apply_rotary(q.view(batch, length, self.heads, self.head_dim), table)
        k = apply_rotary(k.view(batch, length, self.heads, self.head_dim), table)
        v = v.view(batch, length, self.heads, self.head_dim)
        q, k, v = (y.transpose(1, 2) for y in (q, k, v))  # (B, H, T, hd)
        # upstream repeats k and v for grouped heads (here once each): the same copies, the same kernel
        k, v = k.repeat_interleave(1, dim=1), v.repeat_interleave(1, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        return self.wo(y[:, :, first:].transpose(1, 2).contiguous().view(batch, length - first, dim))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        dim = config.hidden_dim
        self.attention = Attention(dim, config.num_heads)
        self.feed_forward = FeedForward(dim, config.intermediate_size)
        self.ffn_norm = AdaptiveLayerNorm(dim)
        self.attention_norm = AdaptiveLayerNorm(dim)
        if config.uvit_skip_connection:
            self.skip_in_linear = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor, c: torch.Tensor, table: torch.Tensor, mask: torch.Tensor, skip: torch.Tensor | None, first: int = 0) -> torch.Tensor:
        """The block's output for the frames from `first` on (all frames feed its attention)."""
        if skip is not None:
            x = self.skip_in_linear(torch.cat([x, skip], dim=-1))
        h = x[:, first:] + self.attention(self.attention_norm(x, c), table, mask, first)
        return h + self.feed_forward(self.ffn_norm(h, c))


class Transformer(nn.Module):
    """The blocks and the final modulated norm; with U-ViT skips, block i < depth // 2 hands its
    output to block depth - 1 - i (the most recent first, a stack), the middle block to none."""

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TransformerBlock(config) for _ in range(config.depth))
        self.norm = AdaptiveLayerNorm(config.hidden_dim)
        depth = config.depth
        self.emit = set(range(depth // 2)) if config.uvit_skip_connection else set()
        self.receive = set(range(depth // 2 + 1, depth)) if config.uvit_skip_connection else set()
        self.head_dim = config.head_dim
        self._table: torch.Tensor | None = None

    def rope(self, device: torch.device) -> torch.Tensor:
        if self._table is None or self._table.device != device:
            self._table = rope_table(self.head_dim).to(device)
        return self._table

    def forward(self, x: torch.Tensor, c: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, first: int = 0) -> torch.Tensor:
        """(B, T, D) -> the frames from `first` on, (B, T - first, D): the last block makes only those."""
        table = self.rope(x.device)[positions]
        skips: list[torch.Tensor] = []
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x, c, table, mask, skips.pop(-1) if i in self.receive else None, first if i == last else 0)
            if i in self.emit:
                skips.append(x)
        return self.norm(x, c)


# -- time embedding, WaveNet head, final layer -------------------------------------------------------


class TimestepEmbedder(nn.Module):
    """t (B,) -> (B, D): `[cos, sin](1000 t * freqs)` (256 channels) -> Linear-SiLU-Linear."""

    def __init__(self, dim: int, frequency_dim: int = 256) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(frequency_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        half = frequency_dim // 2
        self.register_buffer("freqs", torch.exp(-math.log(10000) * torch.arange(start=0, end=half, dtype=torch.float32) / half))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        angles = 1000 * t[:, None].float() * self.freqs[None]
        return self.mlp(torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1))


class WaveNet(nn.Module):
    """Non-causal gated WaveNet (VITS's WN) conditioned on a global vector: per layer a dilated
    reflect-padded conv, `tanh * sigmoid` with the layer's slice of cond_layer(g), then a 1x1
    conv into the residual and the skip sum (the last layer: skip only)."""

    def __init__(self, hidden: int, kernel_size: int, dilation_rate: int, layers: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.in_layers = nn.ModuleList(ReflectConv1d(hidden, 2 * hidden, kernel_size, dilation_rate**i) for i in range(layers))
        self.res_skip_layers = nn.ModuleList(ReflectConv1d(hidden, 2 * hidden if i < layers - 1 else hidden, 1) for i in range(layers))
        self.cond_layer = ReflectConv1d(hidden, 2 * hidden * layers, 1)

    @property
    def reach(self) -> int:
        """How many frames to the left an output frame sees through the layers' convs: frames this
        far past the left edge of a cut-out input come out as they do in the whole one."""
        return sum(layer.padding[0] for layer in self.in_layers)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        hidden, last = self.hidden, len(self.in_layers) - 1
        output = torch.zeros_like(x)
        g = self.cond_layer(g)  # (B, 2 H layers, 1)
        for i, (in_layer, res_skip) in enumerate(zip(self.in_layers, self.res_skip_layers, strict=True)):
            gated = in_layer(x) + g[:, 2 * hidden * i : 2 * hidden * (i + 1), :]
            tanh_part, sigmoid_part = torch.split(gated, hidden, dim=1)
            acts = res_skip(torch.tanh(tanh_part) * torch.sigmoid(sigmoid_part))
            if i < last:
                x = (x + acts[:, :hidden, :]) * mask
                output = output + acts[:, hidden:, :]
            else:
                output = output + acts
        return output * mask


class FinalLayer(nn.Module):
    def __init__(self, hidden: int, out_channels: int) -> None:
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.linear = WeightNormLinear(hidden, out_channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(self.norm_final(x) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1))


# -- the estimator ------------------------------------------------------------------------------------


class DiT(nn.Module):
    """The velocity estimator `forward(x, prompt_x, x_lens, t, style, cond)` -> (B, in_channels, T)."""

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        self.config = config
        dim, mels = config.hidden_dim, config.in_channels
        self.transformer = Transformer(config)
        self.x_embedder = WeightNormLinear(mels, dim)  # built, never called
        self.cond_embedder = nn.Embedding(config.content_codebook_size, dim)  # built, never called
        self.cond_projection = nn.Linear(config.content_dim, dim)
        self.t_embedder = TimestepEmbedder(dim)
        self.register_buffer("input_pos", torch.arange(MAX_POSITIONS))
        if config.final_layer_type == "wavenet":
            hidden = config.wavenet_hidden_dim
            self.t_embedder2 = TimestepEmbedder(hidden)
            self.conv1 = nn.Linear(dim, hidden)
            self.conv2 = nn.Conv1d(hidden, mels, 1)
            self.wavenet = WaveNet(hidden, config.wavenet_kernel_size, config.wavenet_dilation_rate, config.wavenet_layers)
            self.final_layer = FinalLayer(hidden, hidden)
            self.res_projection = nn.Linear(dim, hidden)
        else:
            self.final_mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, mels))
        self.content_mask_embedder = nn.Embedding(1, dim)  # built, never called
        self.skip_linear = nn.Linear(dim + mels, dim)
        self.cond_x_merge_linear = nn.Linear(dim + 2 * mels + config.style_dim * config.style_condition, dim)

    def forward(
        self, x: torch.Tensor, prompt_x: torch.Tensor, x_lens: torch.Tensor, t: torch.Tensor, style: torch.Tensor, cond: torch.Tensor, from_frame: int = 0
    ) -> torch.Tensor:
        """x, prompt_x (B, mels, T); x_lens (B or 1,) frames; t (B,); style (B, style_dim); cond (B, T, content_dim).

        `from_frame`: the first frame whose velocity the caller reads (the flow zeroes the prompt's
        frames after every step). The transformer runs over every frame, as its attention must;
        its last block and the head after it (the WaveNet and its per-frame layers) only from
        `from_frame` less the WaveNet's reach, so the frames returned keep their bits; those before
        `from_frame` are zeros. (The last block's attention still makes every frame's query; the
        cut keeps at least `MIN_CUT_FRAMES` frames and is not taken for a batch of one.)"""
        length = x.size(2)
        limit = MAX_CAUSAL_POSITIONS if self.config.is_causal else MAX_POSITIONS
        if length > limit:
            raise ValueError(f"the estimator takes at most {limit} frames, got {length}")
        t1 = self.t_embedder(t)  # (B, D)
        cond = self.cond_projection(cond)
        x = x.transpose(1, 2)  # (B, T, mels)
        prompt_x = prompt_x.transpose(1, 2)
        x_in = torch.cat([x, prompt_x, cond], dim=-1)
        if self.config.style_condition:
            x_in = torch.cat([x_in, style[:, None, :].repeat(1, length, 1)], dim=-1)
        x_in = self.cond_x_merge_linear(x_in)  # (B, T, D)
        x_mask = sequence_mask(x_lens, max_length=length).to(x.device).unsqueeze(1)  # (b, 1, T)
        if self.config.is_causal:
            attn_mask = torch.tril(torch.ones(length, length, dtype=torch.bool, device=x.device))[None, None]
        else:
            attn_mask = x_mask[:, None, :].repeat(1, 1, length, 1)  # (b, 1, T, T)
        start = 0
        if from_frame > 0:
            reach = self.wavenet.reach if self.config.final_layer_type == "wavenet" else 0
            start = max(min(from_frame, length) - reach, 0)
            start = max(min(start, length - MIN_CUT_FRAMES), 0) if x.size(0) > 1 else 0  # see MIN_CUT_FRAMES
        h = self.transformer(x_in, t1.unsqueeze(1), self.input_pos[:length], attn_mask, start)
        x, x_mask = x[:, start:], x_mask[..., start:]
        if self.config.long_skip_connection:
            h = self.skip_linear(torch.cat([h, x], dim=-1))
        if self.config.final_layer_type == "wavenet":
            y = self.conv1(h).transpose(1, 2)  # (B, H, T)
            t2 = self.t_embedder2(t)
            y = self.wavenet(y, x_mask, t2.unsqueeze(2)).transpose(1, 2) + self.res_projection(h)
            velocity = self.conv2(self.final_layer(y, t1).transpose(1, 2))
        else:
            velocity = self.final_mlp(h).transpose(1, 2)
        if start == 0 and from_frame <= 0:
            return velocity
        out = velocity.new_zeros(velocity.size(0), velocity.size(1), length)
        out[..., from_frame:] = velocity[..., from_frame - start :]
        return out
