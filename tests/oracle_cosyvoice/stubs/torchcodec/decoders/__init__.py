"""`torchcodec.decoders.AudioDecoder`, the part `torchaudio.load` uses (see the package docstring)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import soundfile as sf
import torch


@dataclass(frozen=True)
class AudioStreamMetadata:
    sample_rate: int
    num_channels: int
    num_frames: int


@dataclass(frozen=True)
class AudioSamples:
    data: torch.Tensor  # float32, (channels, frames)
    sample_rate: int
    pts_seconds: float = 0.0


class AudioDecoder:
    """A whole file (a path or a binary file object) at its own rate and channel count."""

    def __init__(self, source, *, stream_index=None, sample_rate=None, num_channels=None):
        if sample_rate is not None or num_channels is not None:
            raise NotImplementedError("the oracle's torchcodec stand-in decodes at the file's own rate and channels only")
        data, rate = sf.read(os.fspath(source) if isinstance(source, (str, os.PathLike)) else source, dtype="float32", always_2d=True)
        self._data = torch.from_numpy(data.T.copy())
        self.metadata = AudioStreamMetadata(int(rate), self._data.shape[0], self._data.shape[1])

    def get_all_samples(self) -> AudioSamples:
        return AudioSamples(self._data.clone(), self.metadata.sample_rate)
