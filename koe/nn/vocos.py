"""Vocos: a mel-to-waveform vocoder, ConvNeXt backbone plus an inverse-STFT head.

Built from a Vocos `config.yaml` (`backbone: vocos.models.VocosBackbone`, `head:
vocos.heads.ISTFTHead`) and its `pytorch_model.bin`, with the checkpoint's parameter names.
koe only decodes (mel -> audio): the feature extractor's buffers in the checkpoint (its own mel
filterbank and window) are not used. The inverse STFT is Vocos's "same"-padded overlap-add
(irfft, window, fold, divide by the folded squared window), so float32 output is the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conv import ConvNeXtBlock

__all__ = ["Vocos", "VocosConfig"]

_BACKBONE = "vocos.models.VocosBackbone"
_HEAD = "vocos.heads.ISTFTHead"
_FEATURES = "vocos.feature_extractors.MelSpectrogramFeatures"


@dataclass(frozen=True)
class VocosConfig:
    input_channels: int = 100
    dim: int = 512
    intermediate_dim: int = 1536
    num_layers: int = 8
    n_fft: int = 1024
    hop_length: int = 256
    padding: str = "same"
    sample_rate: int = 24000
    n_mels: int = 100

    @classmethod
    def from_yaml(cls, path: Path) -> VocosConfig:
        """Read a Vocos `config.yaml`; anything but a mel ConvNeXt/ISTFT Vocos is a ValueError that says so."""
        import yaml

        try:
            raw = yaml.safe_load(Path(path).read_text())
            backbone, head = raw["backbone"], raw["head"]
        except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a Vocos config.yaml ({e})") from e
        if backbone.get("class_path") != _BACKBONE or head.get("class_path") != _HEAD:
            raise ValueError(f"{path}: koe runs Vocos with {_BACKBONE} and {_HEAD}; this one has {backbone.get('class_path')} and {head.get('class_path')}")
        b, h = backbone.get("init_args", {}), head.get("init_args", {})
        if b.get("adanorm_num_embeddings"):
            raise ValueError(f"{path}: Vocos with AdaLayerNorm (EnCodec features) is not supported; koe runs the mel Vocos")
        features = raw.get("feature_extractor", {})
        f = features.get("init_args", {}) if features.get("class_path") == _FEATURES else {}
        return cls(
            input_channels=int(b["input_channels"]),
            dim=int(b["dim"]),
            intermediate_dim=int(b["intermediate_dim"]),
            num_layers=int(b["num_layers"]),
            n_fft=int(h["n_fft"]),
            hop_length=int(h["hop_length"]),
            padding=str(h.get("padding", "same")),
            sample_rate=int(f.get("sample_rate", 24000)),
            n_mels=int(f.get("n_mels", b["input_channels"])),
        )


class VocosBackbone(nn.Module):
    def __init__(self, cfg: VocosConfig) -> None:
        super().__init__()
        self.embed = nn.Conv1d(cfg.input_channels, cfg.dim, kernel_size=7, padding=3)
        self.norm = nn.LayerNorm(cfg.dim, eps=1e-6)
        self.convnext = nn.ModuleList(
            [ConvNeXtBlock(cfg.dim, cfg.intermediate_dim, causal=False, layer_scale=1 / cfg.num_layers) for _ in range(cfg.num_layers)]
        )
        self.final_layer_norm = nn.LayerNorm(cfg.dim, eps=1e-6)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """(B, mels, T) -> (B, T, dim)."""
        x = self.norm(self.embed(mel).transpose(1, 2)).transpose(1, 2)
        for block in self.convnext:
            x = block(x)
        return self.final_layer_norm(x.transpose(1, 2))


class InverseSTFT(nn.Module):
    """Vocos's inverse STFT with "same" padding (overlap-add, trimmed by (win - hop) / 2 per side)."""

    def __init__(self, n_fft: int, hop_length: int, padding: str) -> None:
        super().__init__()
        if padding not in ("same", "center"):
            raise ValueError(f"ISTFT padding must be 'same' or 'center', not {padding!r}")
        self.n_fft, self.hop_length, self.padding = n_fft, hop_length, padding
        self.register_buffer(
            "window", torch.hann_window(n_fft, device="cpu")
        )  # built on the CPU even under a meta build: a meta hann_window imports torch._dynamo

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        """Complex spectrogram (B, n_fft/2 + 1, T) -> audio (B, samples)."""
        if self.padding == "center":
            return torch.istft(spec, self.n_fft, self.hop_length, self.n_fft, self.window, center=True)
        win, hop = self.n_fft, self.hop_length
        pad = (win - hop) // 2
        frames = spec.shape[-1]
        ifft = torch.fft.irfft(spec, win, dim=1, norm="backward") * self.window[None, :, None]
        size = (frames - 1) * hop + win
        audio = F.fold(ifft, output_size=(1, size), kernel_size=(1, win), stride=(1, hop))[:, 0, 0, pad:-pad]
        window_sq = self.window.square().expand(1, frames, -1).transpose(1, 2)
        envelope = F.fold(window_sq, output_size=(1, size), kernel_size=(1, win), stride=(1, hop)).squeeze()[pad:-pad]
        return audio / envelope


class ISTFTHead(nn.Module):
    def __init__(self, cfg: VocosConfig) -> None:
        super().__init__()
        self.out = nn.Linear(cfg.dim, cfg.n_fft + 2)
        self.istft = InverseSTFT(cfg.n_fft, cfg.hop_length, cfg.padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, dim) -> audio (B, samples): magnitude exp(m) capped at 100, phase p."""
        mag, phase = self.out(x).transpose(1, 2).chunk(2, dim=1)
        mag = torch.clip(torch.exp(mag), max=1e2)
        return self.istft(mag * (torch.cos(phase) + 1j * torch.sin(phase)))


class Vocos(nn.Module):
    """Mel (B, mels, T) -> waveform (B, T * hop)."""

    def __init__(self, cfg: VocosConfig) -> None:
        super().__init__()
        self.config = cfg
        self.backbone = VocosBackbone(cfg)
        self.head = ISTFTHead(cfg)

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(mel))

    @staticmethod
    def checkpoint_name(key: str) -> str | None:
        """A checkpoint tensor's name in this module (None: the feature extractor's, not used to decode)."""
        return None if key.startswith("feature_extractor.") else key
