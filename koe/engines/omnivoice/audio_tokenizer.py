"""The HiggsAudio-v2 audio tokenizer of an OmniVoice folder (`audio_tokenizer/`): 8 codebooks at
25 Hz, 24 kHz audio.

`decode` turns codes into samples: RVQ -> `fc2` -> DAC decoder (`koe.engines.omnivoice.codec`).
`encode` turns a 24 kHz clip into codes: HuBERT features of the clip resampled to 16 kHz (padded
by 160 samples each side) through the semantic encoder (`koe.engines.omnivoice.semantic`), the
DAC encoder's features of the clip (padded by half a hop each side when the unpadded lengths
disagree), both concatenated, `fc`, and the RVQ at the highest bandwidth. Nothing is drawn at
random. Loading reads `audio_tokenizer/model.safetensors` by the release's names; the parts
inference never runs (the semantic decoder, `fc1`, the codebooks' training statistics) are not
loaded.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.audio.sinc_resample import resample_sinc
from koe.engines.omnivoice.codec import AcousticDecoder, AcousticEncoder, ResidualVQ
from koe.engines.omnivoice.config import AudioTokenizerConfig, read_audio_tokenizer_config
from koe.engines.omnivoice.semantic import Hubert, SemanticEncoder
from koe.runtime.weights import build_from_weights

__all__ = ["AudioTokenizer", "load_audio_tokenizer"]

#: Stored tensors inference never reads: training statistics of the codebooks and the semantic
#: reconstruction branch (`decoder_semantic`, `fc1`).
_NOT_LOADED = (".codebook.inited", ".codebook.cluster_size", ".codebook.embed_avg")
_NOT_LOADED_PREFIXES = ("decoder_semantic.", "fc1.")


class AudioTokenizer(nn.Module):
    """Codes (B, 8, T) <-> 24 kHz samples; see the module docstring."""

    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        self.config = config
        self.acoustic_encoder = AcousticEncoder(config.acoustic)
        self.acoustic_decoder = AcousticDecoder(config.acoustic)
        self.encoder_semantic = SemanticEncoder(config)
        self.semantic_model = Hubert(config.semantic)
        self.fc = nn.Linear(config.hidden_size, config.hidden_size)
        self.fc2 = nn.Linear(config.hidden_size, config.acoustic.hidden_size)
        self.quantizer = ResidualVQ(config)

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    def semantic_features(self, samples: torch.Tensor) -> torch.Tensor:
        """samples (B, 1, N) at the tokenizer's rate -> HuBERT features (B, frames, C)."""
        c = self.config
        if c.sample_rate != c.semantic_sample_rate:
            samples = resample_sinc(samples, c.sample_rate, c.semantic_sample_rate, kernel_dtype=samples.dtype)
        states = self.semantic_model(F.pad(samples[:, 0, :], (160, 160)))
        features = torch.stack(states, dim=1).mean(dim=1)  # (B, layers + 1, frames, C) -> (B, frames, C)
        step = c.semantic_downsample_factor
        return features[:, ::step, :] if step > 1 else features

    def encode(self, samples: torch.Tensor) -> torch.Tensor:
        """samples (B, 1, N) mono at the tokenizer's rate -> codes (B, Q, frames)."""
        if samples.shape[1] != 1:
            raise ValueError(f"the audio tokenizer encodes mono audio, got {samples.shape[1]} channels")
        semantic = self.encoder_semantic(self.semantic_features(samples).transpose(1, 2))  # (B, C, frames)
        if self.acoustic_encoder.output_length(samples.shape[2]) != semantic.shape[2]:
            pad = self.config.hop_length // 2
            samples = F.pad(samples, (pad, pad))
        acoustic = self.acoustic_encoder(samples)
        fused = torch.cat([acoustic, semantic], dim=1)
        fused = self.fc(fused.transpose(1, 2)).transpose(1, 2)
        return self.quantizer.encode(fused, self.quantizer_count())

    def quantizer_count(self) -> int:
        """Stages at the highest target bandwidth (upstream's default)."""
        per_stage = math.log2(self.config.codebook_size) * self.config.frame_rate / 1000
        return int(max(1, math.floor(self.config.target_bandwidths[-1] / per_stage)))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (B, Q, T) long -> samples (B, 1, T * hop)."""
        quantized = self.quantizer.decode(codes)  # (B, hidden, T)
        acoustic = self.fc2(quantized.transpose(1, 2)).transpose(1, 2)  # (B, acoustic hidden, T)
        return self.acoustic_decoder(acoustic)


def _rename(name: str) -> str | None:
    if name.endswith(_NOT_LOADED) or name.startswith(_NOT_LOADED_PREFIXES):
        return None
    return name


def load_audio_tokenizer(folder: Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> AudioTokenizer:
    """The tokenizer of the OmniVoice folder `folder` (its `audio_tokenizer/`), strictly loaded."""
    config = read_audio_tokenizer_config(folder)
    files = [Path(folder) / "audio_tokenizer" / "model.safetensors"]
    return build_from_weights(lambda: AudioTokenizer(config), files, dtype=dtype, device=device, rename=_rename).eval()
