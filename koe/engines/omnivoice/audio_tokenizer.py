"""The HiggsAudio-v2 audio tokenizer of an OmniVoice folder (`audio_tokenizer/`): 8 codebooks at
25 Hz, 24 kHz audio.

`decode` turns codes into samples: RVQ -> `fc2` -> DAC decoder (`koe.engines.omnivoice.codec`).
Loading reads `audio_tokenizer/model.safetensors` by the release's names; the parts inference never
runs (the semantic decoder, `fc1`, the codebooks' training statistics) are not loaded.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from koe.engines.omnivoice.codec import AcousticDecoder, ResidualVQ
from koe.engines.omnivoice.config import AudioTokenizerConfig, read_audio_tokenizer_config
from koe.runtime.weights import build_from_weights

__all__ = ["AudioTokenizer", "load_audio_tokenizer"]

#: Stored tensors inference never reads: training statistics of the codebooks, the semantic
#: reconstruction branch, and (until the encoder side lands here) the encoder's parts.
_NOT_LOADED = (".codebook.inited", ".codebook.cluster_size", ".codebook.embed_avg")
_NOT_LOADED_PREFIXES = ("decoder_semantic.", "fc1.", "semantic_model.", "encoder_semantic.", "acoustic_encoder.", "fc.")


class AudioTokenizer(nn.Module):
    """Codes (B, 8, T) <-> 24 kHz samples; see the module docstring."""

    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        self.config = config
        self.acoustic_decoder = AcousticDecoder(config.acoustic)
        self.fc2 = nn.Linear(config.hidden_size, config.acoustic.hidden_size)
        self.quantizer = ResidualVQ(config)

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

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
