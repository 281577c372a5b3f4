"""IndexTTS 2's speaker style encoder: 3D-Speaker's CAM++ (koe's `koe.nn.speaker.campplus`),
`campplus_cn_common.bin` loaded into `CAMPPlus(feat_dim=80, embedding_size=192)`: Kaldi filterbanks of
the reference clip at 16 kHz less their mean over frames (`koe.audio.kaldi.mean_normalized_fbank`)
in, the `style` vector `(1, 192)` out. Also the pick of an emotion matrix's row by the style
(`most_similar_cosine`).

The widths upstream's constructor takes (`feat_dim`, `embedding_size`, `growth_rate`, `bn_size`,
`init_channels`) are `CampPlusConfig`'s; the 32 channels of the head and the blocks (12, 24, 16
layers; kernel 3; dilation 1, 2, 2) are fixed there and here. Parameter names are the checkpoint's,
so it loads strictly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from koe.audio.kaldi import mean_normalized_fbank
from koe.nn.speaker import campplus

__all__ = ["CAMPPlus", "CampPlusConfig", "load_campplus", "most_similar_cosine"]


@dataclass(frozen=True)
class CampPlusConfig:
    """CAM++'s widths, named as upstream's constructor names them; the defaults but `embedding_size`
    are its defaults, IndexTTS 2's are `feat_dim=80, embedding_size=192`."""

    feat_dim: int = 80
    embedding_size: int = 192
    growth_rate: int = 32
    bn_size: int = 4
    init_channels: int = 128

    def __post_init__(self) -> None:
        for name in ("feat_dim", "embedding_size", "growth_rate", "bn_size", "init_channels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"campplus config: {name} must be a positive int, got {value!r}")
        self.network()  # the network's own checks (feat_dim a multiple of 8)

    def network(self) -> campplus.CampPlusConfig:
        """koe's CAM++ sizes for these widths (the bottleneck is `bn_size * growth_rate`)."""
        return campplus.CampPlusConfig(
            feat_dim=self.feat_dim,
            init_channels=self.init_channels,
            growth_rate=self.growth_rate,
            bn_channels=self.bn_size * self.growth_rate,
            embedding_size=self.embedding_size,
        )


class CAMPPlus(campplus.CAMPPlus):
    """koe's CAM++ at IndexTTS 2's widths, with its `style` of a reference clip; `config` is koe's
    network sizes (`CampPlusConfig.network()`)."""

    def __init__(self, config: CampPlusConfig = CampPlusConfig()) -> None:
        super().__init__(config.network())

    @torch.inference_mode()
    def style(self, audio_16k: torch.Tensor) -> torch.Tensor:
        """IndexTTS 2's `style` of a reference clip at 16 kHz `(1, samples)`: `(1, embedding_size)`."""
        return self(mean_normalized_fbank(audio_16k, 80))  # upstream reads 80 bins whatever its feat_dim


def load_campplus(source: str | os.PathLike | Mapping[str, torch.Tensor], config: CampPlusConfig = CampPlusConfig()) -> CAMPPlus:
    """CAM++ from `campplus_cn_common.bin` (a state dict) or the state itself, strictly, in eval mode."""
    state = source if isinstance(source, Mapping) else torch.load(source, map_location="cpu", weights_only=True)
    return CAMPPlus.from_state(state, config)


def most_similar_cosine(query: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """The index (a 0-d int64 tensor) of `matrix`'s row `(N, D)` most cosine-similar to `query`
    `(1, D)`, the first on a tie, as upstream's `find_most_similar_cosine` picks an emotion
    matrix's row by the speaker's style."""
    return torch.argmax(F.cosine_similarity(query.float(), matrix.float(), dim=1))
