"""GPT-SoVITS v3/v4's diffusion transformer (upstream's `f5_tts/model/backbones/dit.py`, F5-TTS's DiT
reworked as the velocity model of SoVITS v3/v4's conditional flow matching): noisy mel, reference
mel and SoVITS features -> the mel velocity.

Upstream's differences from F5-TTS's DiT: the condition is not text ids but the synthesizer's
continuous features (512 wide at 50 Hz, already aligned with the mel frames), so the text
embedding has no lookup table: sinusoidal positions (`freqs_cis`, 4,096 rows, positions past the
table clamped to its last row) are added to the features, then four ConvNeXt-V2 blocks. A second
timestep embedding `d_embed` takes the step size (upstream's shortcut "dt" conditioning) and is
added to the time embedding. Rotary positions rotate the first head's channels only (x-transformers
rotates the first `dim_head` channels of the un-split projection). The released model is
`DiT(dim=1024, depth=22, heads=16, dim_head=64, ff_mult=2, text_dim=512, conv_layers=4)`, mel 100.

Upstream passes a padding mask built from `x_lens`; at inference every row has the full length
(the chunks are padded to one length and `x_lens` is that length), so the mask is all true. An
all-true boolean mask changes no bit of torch's CPU attention (checked at upstream's shapes) and the
`masked_fill` after it keeps every value, so this module runs without a mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from koe.nn.dit import AdaLayerNormFinal, ConvNeXtV2Block, DiTBlock, InputEmbedding, RotaryFrequencies, TimestepEmbedding, text_position_table

__all__ = ["DiT", "DiTConfig", "TEXT_POSITIONS"]

TEXT_POSITIONS = 4096  # upstream's precomputed positions (~44 s of 24 kHz mel frames)


@dataclass(frozen=True)
class DiTConfig:
    """The DiT's sizes; the defaults are the released v3/v4 model's (upstream hard-codes them)."""

    dim: int = 1024
    depth: int = 22
    heads: int = 16
    dim_head: int = 64
    ff_mult: float = 2
    mel_dim: int = 100
    text_dim: int = 512
    conv_layers: int = 4

    def __post_init__(self) -> None:
        if min(self.dim, self.depth, self.heads, self.dim_head, self.mel_dim, self.text_dim) < 1 or self.conv_layers < 0:
            raise ValueError(f"DiT sizes must be positive: {self}")
        if self.text_dim % 2 or self.dim_head % 2:
            raise ValueError(f"the DiT's text_dim ({self.text_dim}) and dim_head ({self.dim_head}) must be even (sinusoidal and rotary pairs)")


class FeatureEmbedding(nn.Module):
    """`text_embed`: features (B, n, text_dim) + positions, then the ConvNeXt-V2 blocks
    (`text_blocks`); `drop` zeroes the features first (classifier-free guidance's unconditional row)."""

    def __init__(self, dim: int, conv_layers: int) -> None:
        super().__init__()
        self.register_buffer("freqs_cis", text_position_table(dim, TEXT_POSITIONS) if conv_layers else None, persistent=False)
        self.text_blocks = nn.Sequential(*[ConvNeXtV2Block(dim, dim * 2) for _ in range(conv_layers)])

    def forward(self, features: torch.Tensor, drop: bool = False) -> torch.Tensor:
        if drop:
            features = torch.zeros_like(features)
        if not len(self.text_blocks):
            return features
        positions = torch.arange(features.shape[1], device=features.device).clamp(max=TEXT_POSITIONS - 1)
        return self.text_blocks(features + self.freqs_cis[positions])


class DiT(nn.Module):
    """`cfm.estimator`: (x, cond (B, mel, n), features (B, n, text_dim) embedded once, t (B,),
    the step embedding (B, dim) made once) -> velocity (B, n, mel)."""

    def __init__(self, config: DiTConfig | None = None) -> None:
        super().__init__()
        c = self.config = config or DiTConfig()
        self.time_embed = TimestepEmbedding(c.dim)
        self.d_embed = TimestepEmbedding(c.dim)
        self.text_embed = FeatureEmbedding(c.text_dim, c.conv_layers)
        self.input_embed = InputEmbedding(c.mel_dim, c.text_dim, c.dim)
        self.rotary_embed = RotaryFrequencies(c.dim_head)
        self.transformer_blocks = nn.ModuleList([DiTBlock(c.dim, c.heads, c.dim_head, c.ff_mult, rotary_heads=1) for _ in range(c.depth)])
        self.norm_out = AdaLayerNormFinal(c.dim)
        self.proj_out = nn.Linear(c.dim, c.mel_dim)

    def embed_features(self, features: torch.Tensor, drop: bool = False) -> torch.Tensor:
        """features (B, text_dim, n) channels-first, as upstream's CFM hands them -> (B, n, text_dim)
        embedded: fixed over the sampling steps (upstream's `text_cache`)."""
        return self.text_embed(features.transpose(2, 1), drop)

    def embed_step(self, d: torch.Tensor) -> torch.Tensor:
        """The step size (B,) -> its embedding (B, dim): fixed over the steps (upstream's `dt_cache`)."""
        return self.d_embed(d)

    def forward(
        self, x: torch.Tensor, cond: torch.Tensor, time: torch.Tensor, step: torch.Tensor, features: torch.Tensor, drop_cond: bool = False
    ) -> torch.Tensor:
        """x, cond (B, mel, n) channels-first; time (B,); step, features from `embed_step` / `embed_features`."""
        t = self.time_embed(time) + step
        h = self.input_embed(x.transpose(2, 1), cond.transpose(2, 1), features, drop_cond)
        rope = self.rotary_embed(h.shape[1])
        for block in self.transformer_blocks:
            h = block(h, t, rope)
        return self.proj_out(self.norm_out(h, t))
