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

    @property
    def duration_seconds(self) -> float:
        return self.data.shape[1] / self.sample_rate


class AudioDecoder:
    """Decode a whole file (a path or a binary file object) at its native rate and channel count."""

    def __init__(self, source, *, stream_index=None, sample_rate=None, num_channels=None):
        if sample_rate is not None or num_channels is not None:
            raise NotImplementedError("the oracle's torchcodec stub decodes at the native rate and channels only")
        if isinstance(source, (str, os.PathLike)):
            source = os.fspath(source)
        data, rate = sf.read(source, dtype="float32", always_2d=True)
        self._data = torch.from_numpy(data.T.copy())
        self.metadata = AudioStreamMetadata(int(rate), self._data.shape[0], self._data.shape[1])

    def get_all_samples(self) -> AudioSamples:
        return AudioSamples(self._data.clone(), self.metadata.sample_rate)

    def get_samples_played_in_range(self, start_seconds: float = 0.0, stop_seconds: float | None = None) -> AudioSamples:
        rate = self.metadata.sample_rate
        start = round(start_seconds * rate)
        stop = self._data.shape[1] if stop_seconds is None else round(stop_seconds * rate)
        return AudioSamples(self._data[:, start:stop].clone(), rate, start / rate)
