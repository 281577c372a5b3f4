"""IndexTTS 2's semantic codec: MaskGCT's RepCodec-style quantizer of w2v-BERT frames.

Upstream builds amphion's `RepCodec` from the `semantic_codec` section of config.yaml and loads
MaskGCT's `semantic_codec/model.safetensors` strictly. It uses two methods: `quantize(frames)` (a
Vocos ConvNeXt encoder and a linear layer, then a residual stack of factorised vector quantizers:
each projects to a small space with a weight-normed 1x1 conv, picks the nearest L2-normalised
codebook row, and projects the row back) gives the reference's codes and quantized frames
`S_ref`; `quantizer.vq2emb(codes)` turns the GPT's codes back into frames.

koe keeps the checkpoint's names (`encoder.0.*` is the Vocos backbone, `encoder.1` the linear;
the decoder and, with `downsample_scale` > 1, `down` / `up` are held so the file loads, the decoder
is never run), reuses `koe.nn.vocos.VocosBackbone` (the same ops as amphion's), and does the
quantizer's float ops as upstream does, the straight-through `z_e + (z_q - z_e)` included (it is
not always `z_q` in floats).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.vocos import VocosBackbone, VocosConfig

__all__ = ["FactorizedQuantizer", "ResidualQuantizer", "SemanticCodec", "SemanticCodecConfig", "load_semantic_codec", "read_semantic_codec"]


@dataclass(frozen=True)
class SemanticCodecConfig:
    """config.yaml's `semantic_codec` section (RepCodec's defaults where a key is absent)."""

    codebook_size: int = 8192
    hidden_size: int = 1024
    codebook_dim: int = 8
    vocos_dim: int = 384
    vocos_intermediate_dim: int = 2048
    vocos_num_layers: int = 12
    num_quantizers: int = 1
    downsample_scale: int = 1

    @classmethod
    def from_dict(cls, section: dict) -> SemanticCodecConfig:
        """As RepCodec reads its cfg: the Vocos width, depth and inner width are read only when
        `vocos_dim` is given (without it, the other two keep their defaults)."""
        section = dict(section or {})
        keys = ["codebook_size", "hidden_size", "codebook_dim", "num_quantizers", "downsample_scale"]
        if "vocos_dim" in section:
            keys += ["vocos_dim", "vocos_intermediate_dim", "vocos_num_layers"]
        values = {k: section[k] for k in keys if k in section and section[k] is not None}
        config = cls(**{k: int(v) for k, v in values.items()})
        if min(config.codebook_size, config.hidden_size, config.codebook_dim, config.vocos_dim, config.num_quantizers) < 1:
            raise ValueError(f"semantic_codec: sizes must be positive, got {config}")
        return config

    def vocos(self) -> VocosConfig:
        return VocosConfig(input_channels=self.hidden_size, dim=self.vocos_dim, intermediate_dim=self.vocos_intermediate_dim, num_layers=self.vocos_num_layers)


class WeightNormConv1d(nn.Module):
    """A kernel-size-1 conv stored with old-style weight norm (`weight_g`, `weight_v`, `bias`),
    its weight `torch._weight_norm(v, g, 0)` made at each call as torch's hook makes it."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.weight_g = nn.Parameter(torch.ones(out_channels, 1, 1))
        self.weight_v = nn.Parameter(torch.zeros(out_channels, in_channels, 1))
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, torch._weight_norm(self.weight_v, self.weight_g, 0), self.bias)


class FactorizedQuantizer(nn.Module):
    """One factorised VQ: project (B, D, T) to the codebook's width, nearest L2-normalised row, back."""

    def __init__(self, input_dim: int, codebook_size: int, codebook_dim: int) -> None:
        super().__init__()
        projected = input_dim != codebook_dim
        self.in_project = WeightNormConv1d(input_dim, codebook_dim) if projected else nn.Identity()
        self.out_project = WeightNormConv1d(codebook_dim, input_dim) if projected else nn.Identity()
        self.codebook = nn.Embedding(codebook_size, codebook_dim)

    def nearest(self, latents: torch.Tensor) -> torch.Tensor:
        """(B, d, T) projected latents -> (B, T) codes: the smallest squared distance between the
        normalised latent and the normalised codebook rows (expanded as |x|^2 - 2 x.c + |c|^2)."""
        b = latents.shape[0]
        flat = F.normalize(latents.permute(0, 2, 1).reshape(-1, latents.shape[1]))  # (B*T, d)
        book = F.normalize(self.codebook.weight)
        dist = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ book.t() + book.pow(2).sum(1, keepdim=True).t()
        return (-dist).max(1)[1].reshape(b, -1)

    def embed(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, T) codes -> (B, d, T) codebook rows (not normalised)."""
        return F.embedding(codes, self.codebook.weight).transpose(1, 2)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, D, T) -> (quantized (B, D, T), codes (B, T))."""
        z_e = self.in_project(z)
        codes = self.nearest(z_e)
        z_q = z_e + (self.embed(codes) - z_e)  # the straight-through estimator's float ops
        return self.out_project(z_q), codes

    def vq2emb(self, codes: torch.Tensor) -> torch.Tensor:
        return self.out_project(self.embed(codes))


class ResidualQuantizer(nn.Module):
    def __init__(self, config: SemanticCodecConfig) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(
            FactorizedQuantizer(config.hidden_size, config.codebook_size, config.codebook_dim) for _ in range(config.num_quantizers)
        )

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, D, T) -> (sum of the stages' quantized (B, D, T), codes (N, B, T))."""
        quantized: torch.Tensor | float = 0.0
        residual = z
        codes = []
        for quantizer in self.quantizers:
            z_q, idx = quantizer(residual)
            quantized = quantized + z_q  # upstream scales by an all-true stage mask at inference: x * 1
            residual = residual - z_q
            codes.append(idx)
        return quantized, torch.stack(codes)

    def vq2emb(self, codes: torch.Tensor, n_quantizers: int | None = None) -> torch.Tensor:
        """Codes indexed by stage on their first axis (`codes[i]` is stage i's) -> (B, D, T), the
        stages' embeddings summed (upstream's `vq2emb`; its GPT path passes `codes.unsqueeze(1)`,
        which reads batch item i as stage i: one item, one stage)."""
        out: torch.Tensor | float = 0.0
        stages = len(self.quantizers) if n_quantizers is None else n_quantizers
        for i, quantizer in enumerate(self.quantizers):
            if i >= stages:
                break
            out += quantizer.vq2emb(codes[i])
        return out


class SemanticCodec(nn.Module):
    """MaskGCT's semantic codec under the checkpoint's names; `quantize` and `vq2emb` as upstream's."""

    def __init__(self, config: SemanticCodecConfig = SemanticCodecConfig()) -> None:
        super().__init__()
        self.config = config
        width = config.hidden_size
        if config.downsample_scale > 1:
            self.down = nn.Conv1d(width, width, kernel_size=3, stride=2, padding=1)
            self.up = nn.Conv1d(width, width, kernel_size=3, stride=1, padding=1)
        self.encoder = nn.Sequential(VocosBackbone(config.vocos()), nn.Linear(config.vocos_dim, width))
        self.decoder = nn.Sequential(VocosBackbone(config.vocos()), nn.Linear(config.vocos_dim, width))
        self.quantizer = ResidualQuantizer(config)

    @torch.no_grad()
    def quantize(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) frames -> (codes, quantized (B, T', D)): codes (B, T') for one quantizer,
        (N, B, T') for N; T' = T, or ceil(T / 2) with `downsample_scale` > 1."""
        if frames.shape[-1] != self.config.hidden_size:
            raise ValueError(f"semantic codec takes {self.config.hidden_size}-dim frames, got {frames.shape[-1]}")
        x = frames
        if self.config.downsample_scale > 1:
            x = F.gelu(self.down(x.transpose(1, 2))).transpose(1, 2)
        x = self.encoder(x.transpose(1, 2)).transpose(1, 2)  # (B, D, T)
        quantized, codes = self.quantizer(x)
        if codes.shape[0] == 1:
            codes = codes.squeeze(0)
        return codes, quantized.transpose(1, 2)

    @torch.no_grad()
    def vq2emb(self, codes: torch.Tensor, n_quantizers: int | None = None) -> torch.Tensor:
        """Upstream's `quantizer.vq2emb`: stage-major codes -> (B, D, T)."""
        return self.quantizer.vq2emb(codes, n_quantizers)


def load_semantic_codec(state: dict[str, torch.Tensor], config: SemanticCodecConfig) -> SemanticCodec:
    """The codec from its checkpoint state (`semantic_codec/model.safetensors`), strictly."""
    codec = SemanticCodec(config)
    codec.load_state_dict(state, strict=True)
    return codec.eval()


def read_semantic_codec(path: str | os.PathLike, config: SemanticCodecConfig) -> SemanticCodec:
    """`load_semantic_codec` from a safetensors file."""
    from safetensors.torch import load_file

    return load_semantic_codec(load_file(str(path)), config)
