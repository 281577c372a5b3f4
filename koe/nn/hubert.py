"""HuBERT (transformers' `HubertModel` with group-norm features and post-norm layers), shared by
OmniVoice's audio tokenizer (HiggsAudio-v2's semantic branch) and GPT-SoVITS (`chinese-hubert-base`).

Seven strided convs (the first group-normed), GELU each; a layer norm and a projection; a grouped
positional conv (weight-normed over dim 2, as `torch._weight_norm` computes it, the last output
dropped for an even kernel, GELU) added, a layer norm; then the encoder layers (attention through
SDPA without a mask, residual, layer norm, feed-forward with GELU, residual, layer norm).
`Hubert.forward` returns the input of layer 0 and every layer's output; transformers'
`last_hidden_state` is the last of them.

Parameter names are transformers' (`feature_extractor.conv_layers.N.conv`, `feature_projection.*`,
`encoder.pos_conv_embed.conv.parametrizations.weight.original0/1`, `encoder.layers.N.*`); a release
saved before weight norm became a parametrization stores the positional conv's gain and direction
as `weight_g` / `weight_v` (`rename_weight_norm`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.hubert_config import HubertConfig

__all__ = ["Hubert", "HubertConfig", "rename_weight_norm"]


def rename_weight_norm(key: str) -> str:
    """An old weight-norm name (`conv.weight_g`, `conv.weight_v`) -> the parametrization's, as
    transformers renames them on load; other names unchanged."""
    if key.endswith(".weight_g"):
        return key[: -len("weight_g")] + "parametrizations.weight.original0"
    if key.endswith(".weight_v"):
        return key[: -len("weight_v")] + "parametrizations.weight.original1"
    return key


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
    def __init__(self, c: HubertConfig) -> None:
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
    def __init__(self, c: HubertConfig) -> None:
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
    def __init__(self, c: HubertConfig) -> None:
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
    def __init__(self, c: HubertConfig) -> None:
        super().__init__()
        self.attention = _Attention(c.hidden_size, c.num_attention_heads)
        self.layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.feed_forward = _FeedForward(c.hidden_size, c.intermediate_size)
        self.final_layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class _Encoder(nn.Module):
    def __init__(self, c: HubertConfig) -> None:
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
    """HuBERT: 16 kHz samples (B, N) -> the input of layer 0 and every layer's output, each (B, frames, C)."""

    def __init__(self, c: HubertConfig) -> None:
        super().__init__()
        if c.feat_extract_norm != "group" or c.do_stable_layer_norm or not c.feat_proj_layer_norm:
            raise ValueError("only HuBERT with group-norm features and post-norm layers is supported (HuBERT base's)")
        self.feature_extractor = _FeatureExtractor(c)
        self.feature_projection = _FeatureProjection(c)
        self.encoder = _Encoder(c)

    def forward(self, samples: torch.Tensor) -> list[torch.Tensor]:
        features = self.feature_extractor(samples).transpose(1, 2)  # (B, frames, C)
        return self.encoder(self.feature_projection(features))
