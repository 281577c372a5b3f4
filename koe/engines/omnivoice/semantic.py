"""HiggsAudio-v2's semantic branch: HuBERT at 16 kHz, the mean of its hidden states, and the
semantic encoder that brings them to the RVQ.

HuBERT (`semantic_model.*`, transformers' `HubertModel` with group-norm features and post-norm
layers): seven strided convs (the first group-normed), GELU each; a layer norm and a projection;
a grouped positional conv (weight-normed over dim 2, as `torch._weight_norm` computes it, the
last output dropped for an even kernel, GELU) added, a layer norm; then the encoder layers
(attention through SDPA without a mask, residual, layer norm, feed-forward with GELU, residual,
layer norm). The features are the mean over the input of layer 0 and every layer's output,
stacked as upstream stacks them, every `semantic_downsample_factor`-th frame kept.

The semantic encoder (`encoder_semantic.*`): a conv, then per block residual units (ELU, dilated
conv, ELU, 1x1 conv, all without bias; plus the input) and a conv.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.omnivoice.config import AudioTokenizerConfig, SemanticConfig

__all__ = ["Hubert", "SemanticEncoder"]


class _ConvLayer(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, bias: bool, group_norm: bool) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, bias=bias)
        self.layer_norm = nn.GroupNorm(c_out, c_out, affine=True) if group_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return F.gelu(x)


class _FeatureExtractor(nn.Module):
    def __init__(self, c: SemanticConfig) -> None:
        super().__init__()
        dims = (1, *c.conv_dim)
        self.conv_layers = nn.ModuleList(
            _ConvLayer(dims[i], dims[i + 1], k, s, c.conv_bias, i == 0) for i, (k, s) in enumerate(zip(c.conv_kernel, c.conv_stride, strict=True))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, None]  # (B, 1, N)
        for layer in self.conv_layers:
            x = layer(x)
        return x  # (B, C, frames)


class _FeatureProjection(nn.Module):
    def __init__(self, c: SemanticConfig) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(c.conv_dim[-1], eps=c.layer_norm_eps)
        self.projection = nn.Linear(c.conv_dim[-1], c.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.layer_norm(x))


class _WeightNormConv(nn.Module):
    """A grouped conv whose weight is stored as `parametrizations.weight.original0` (gain) and `original1` (direction)."""

    def __init__(self, channels: int, kernel: int, groups: int) -> None:
        super().__init__()
        self.kernel, self.groups = kernel, groups
        self.parametrizations = nn.Module()
        self.parametrizations.weight = nn.Module()
        self.parametrizations.weight.original0 = nn.Parameter(torch.ones(1, 1, kernel))
        self.parametrizations.weight.original1 = nn.Parameter(torch.zeros(channels, channels // groups, kernel))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.parametrizations.weight
        weight = torch._weight_norm(p.original1, p.original0, 2)
        return F.conv1d(x, weight, self.bias, padding=self.kernel // 2, groups=self.groups)


class _PositionalConv(nn.Module):
    def __init__(self, c: SemanticConfig) -> None:
        super().__init__()
        self.conv = _WeightNormConv(c.hidden_size, c.num_conv_pos_embeddings, c.num_conv_pos_embedding_groups)
        self.drop_last = c.num_conv_pos_embeddings % 2 == 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x.transpose(1, 2))
        if self.drop_last:
            h = h[:, :, :-1]
        return F.gelu(h).transpose(1, 2)


class _Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.q_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, scale=self.head_dim**-0.5)
        return self.out_proj(out.transpose(1, 2).contiguous().reshape(b, t, -1).contiguous())


class _FeedForward(nn.Module):
    def __init__(self, width: int, inner: int) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(width, inner)
        self.output_dense = nn.Linear(inner, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class _Layer(nn.Module):
    def __init__(self, c: SemanticConfig) -> None:
        super().__init__()
        self.attention = _Attention(c.hidden_size, c.num_attention_heads)
        self.layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.feed_forward = _FeedForward(c.hidden_size, c.intermediate_size)
        self.final_layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class _Encoder(nn.Module):
    def __init__(self, c: SemanticConfig) -> None:
        super().__init__()
        self.pos_conv_embed = _PositionalConv(c)
        self.layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """-> the input of layer 0 and each layer's output."""
        x = self.layer_norm(x + self.pos_conv_embed(x))
        states = [x]
        for layer in self.layers:
            x = layer(x)
            states.append(x)
        return states


class Hubert(nn.Module):
    """HuBERT base as the tokenizer runs it: 16 kHz samples (B, N) -> every layer's states (B, frames, C)."""

    def __init__(self, c: SemanticConfig) -> None:
        super().__init__()
        if c.feat_extract_norm != "group" or c.do_stable_layer_norm or not c.feat_proj_layer_norm:
            raise ValueError("the semantic model must be HuBERT with group-norm features and post-norm layers (HiggsAudio-v2's)")
        self.feature_extractor = _FeatureExtractor(c)
        self.feature_projection = _FeatureProjection(c)
        self.encoder = _Encoder(c)

    def forward(self, samples: torch.Tensor) -> list[torch.Tensor]:
        features = self.feature_extractor(samples).transpose(1, 2)  # (B, frames, C)
        return self.encoder(self.feature_projection(features))


class _ResidualUnit(nn.Module):
    def __init__(self, channels: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=(kernel - 1) // 2 * dilation, dilation=dilation, bias=False)
        self.conv2 = nn.Conv1d(channels, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class _EncoderBlock(nn.Module):
    def __init__(self, c: AudioTokenizerConfig, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.res_units = nn.ModuleList(_ResidualUnit(c_in, c.unit_kernel_size, d) for d in c.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    """`encoder_semantic`: (B, C, frames) HuBERT features -> (B, C', frames)."""

    def __init__(self, c: AudioTokenizerConfig) -> None:
        super().__init__()
        width = c.semantic.hidden_size
        self.conv = nn.Conv1d(width, width, c.kernel_size, padding=c.kernel_size // 2, bias=False)
        blocks, c_in = [], width
        for ratio, stride in zip(c.channel_ratios, c.strides, strict=True):
            c_out = int(width * ratio)
            blocks.append(_EncoderBlock(c, c_in, c_out, stride))
            c_in = c_out
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x
