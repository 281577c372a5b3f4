"""SoVITS v3/v4 (GPT-SoVITS's `s2Gv3.pth` / `s2Gv4.pth`, upstream's `SynthesizerTrnV3` at inference):
semantic codes, phonemes and a reference spectrogram -> the mel-rate features the CFM turns into mel.

v2's front half is kept (its prior encoder `enc_p` on v2's symbols, its reference encoder
`ref_enc` on the first 704 bins, `ssl_proj` and the codebook); the flow and the waveform generator
are gone. `decode_encp` (upstream's name) runs: the timbre embedding ge of the reference (unless
given), the codes' codebook rows twice each (25 -> 50 Hz), `enc_p`'s encoded frames (speed
stretching them as in v2), `bridge` (a 1x1 conv to 512 and a leaky ReLU), nearest upsampling to the
mel rate (x1.875 for v3's 24 kHz / 256-hop mel, x2 for v4's 32 kHz / 320-hop), and `wns1` (a 1x1
conv, an 8-layer WaveNet conditioned on ge, a 1x1 conv; its mask covers `int(codes * 3.875)` frames
for v3, `codes * 4` for v4, divided by the speed and plus one when the speed is not 1, as upstream
sizes it). `cfm` (cfm.py) holds the DiT; `linear_mel` (a training-only projection in the files)
is not built.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.gpt_sovits.cfm import CFM
from koe.engines.gpt_sovits.dit import DiTConfig
from koe.engines.gpt_sovits.quantizer import SemanticQuantizer
from koe.engines.gpt_sovits.sovits_config import SSL_DIM, STYLE_BINS, SoVITSConfig
from koe.engines.gpt_sovits.sovits_flow import WaveNet
from koe.engines.gpt_sovits.sovits_style import StyleEncoder
from koe.engines.gpt_sovits.sovits_text import PriorEncoder

__all__ = ["MEL_RATE", "SoVITSV3", "V3_VERSIONS"]

V3_VERSIONS = ("v3", "v4")
BRIDGE = 512  # the features' width after `bridge` (upstream's inter_channels2), the DiT's text_dim
WNS_LAYERS, WNS_KERNEL = 8, 5
MEL_RATE = {"v3": 1.875, "v4": 2}  # mel frames per 50 Hz frame (upstream's interpolation scale)
MEL_PER_CODE = {"v3": 3.875, "v4": 4}  # upstream's mel frames per semantic code (wns1's mask length)


class FeatureEncoder(nn.Module):
    """`wns1` (upstream's `Encoder`): pre (1x1), WaveNet conditioned on ge, proj (1x1), all masked."""

    def __init__(self, channels: int, gin_channels: int) -> None:
        super().__init__()
        self.pre = nn.Conv1d(channels, channels, 1)
        self.enc = WaveNet(channels, WNS_KERNEL, WNS_LAYERS, gin_channels)
        self.proj = nn.Conv1d(channels, channels, 1)

    def forward(self, x: torch.Tensor, length: int, g: torch.Tensor) -> torch.Tensor:
        mask = (torch.arange(x.shape[2], device=x.device) < length).to(x.dtype).view(1, 1, -1)  # sequence_mask(length)
        x = self.pre(x) * mask
        x = self.enc(x, mask, g)
        return self.proj(x) * mask


class SoVITSV3(nn.Module):
    """The synthesizer's inference modules under their released names (`enc_p`, `ref_enc`,
    `ssl_proj`, `quantizer`, `bridge`, `wns1`, `cfm`)."""

    def __init__(self, config: SoVITSConfig, version: str, dit: DiTConfig | None = None) -> None:
        super().__init__()
        if version not in V3_VERSIONS:
            raise ValueError(f"SoVITSV3 builds {', '.join(V3_VERSIONS)}, not {version!r}")
        self.config, self.version = config, version
        self.ignored: tuple[str, ...] = ()  # stored tensors the loader left out (training state)
        self.info = ""
        self.enc_p = PriorEncoder(config)
        self.ref_enc = StyleEncoder(STYLE_BINS, config.gin_channels)
        self.ssl_proj = nn.Conv1d(SSL_DIM, SSL_DIM, 2, stride=2)
        self.quantizer = SemanticQuantizer()
        self.bridge = nn.Sequential(nn.Conv1d(config.inter_channels, BRIDGE, 1), nn.LeakyReLU())
        self.wns1 = FeatureEncoder(BRIDGE, config.gin_channels)
        self.cfm = CFM(dit or DiTConfig(text_dim=BRIDGE))
        if self.cfm.estimator.config.text_dim != BRIDGE:
            raise ValueError(f"the DiT's text_dim must be {BRIDGE} (the bridge's width)")

    @torch.no_grad()
    def reference_embedding(self, spec: torch.Tensor) -> torch.Tensor:
        """ge (B, gin, 1) of one reference spectrogram (B, >= 704 bins, frames)."""
        if spec.dim() != 3 or spec.shape[1] < STYLE_BINS:
            raise ValueError(f"a reference spectrogram must be (batch, >= {STYLE_BINS} bins, frames), not {tuple(spec.shape)}")
        return self.ref_enc(spec)

    @torch.no_grad()
    def decode_encp(
        self, codes: torch.Tensor, phones: torch.Tensor, spec: torch.Tensor, ge: torch.Tensor | None = None, speed: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """codes (1, 1, T) int64, phones (1, N) int64, spec (1, bins, frames) -> (features
        (1, 512, frames'), ge): the CFM's condition at the mel rate, and the timbre embedding."""
        if codes.dim() != 3 or codes.dtype != torch.long:
            raise ValueError(f"codes must be int64 (1, 1, frames), not {codes.dtype} {tuple(codes.shape)}")
        if phones.dim() != 2 or phones.dtype != torch.long:
            raise ValueError(f"phones must be int64 (1, phonemes), not {phones.dtype} {tuple(phones.shape)}")
        if speed <= 0:
            raise ValueError(f"speed must be > 0, not {speed}")
        if ge is None:
            ge = self.reference_embedding(spec)
        per_code = MEL_PER_CODE[self.version]
        length = int(codes.shape[2] * per_code) if speed == 1 else int(codes.shape[2] * per_code / speed) + 1
        latents = self.quantizer.decode(codes)
        latents = F.interpolate(latents, scale_factor=2, mode="nearest")  # 25 Hz -> 50 Hz
        x, _ = self.enc_p.features(latents, phones, ge, speed)
        fea = F.interpolate(self.bridge(x), scale_factor=MEL_RATE[self.version], mode="nearest")
        return self.wns1(fea, length, ge), ge

    @torch.no_grad()
    def extract_latent(self, features: torch.Tensor) -> torch.Tensor:
        """HuBERT features (B, 768, frames) at 50 Hz -> semantic codes (B, 1, frames // 2) int64 (v2's)."""
        if features.dim() != 3 or features.shape[1] != SSL_DIM:
            raise ValueError(f"features must be (batch, {SSL_DIM}, frames), not {tuple(features.shape)}")
        return self.quantizer.encode(self.ssl_proj(features))

    @property
    def needs_sv(self) -> bool:
        return False
