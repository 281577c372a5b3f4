"""The Qwen3-TTS network (talker, code predictor, speaker encoder for Base) and its strict loading."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.qwen3_tts.talker import Talker
from koe.runtime.weights import build_from_weights, weight_files


class Qwen3TTSNetwork(nn.Module):
    """`talker.*` and, for Base models, `speaker_encoder.*` — the names of the released `model.safetensors`."""

    def __init__(self, cfg: Qwen3TTSConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.talker = Talker(cfg.talker)
        self.speaker_encoder: nn.Module | None = None
        if cfg.model_type == "base":
            from koe.nn.speaker import SpeakerEncoder, SpeakerEncoderConfig

            self.speaker_encoder = SpeakerEncoder(SpeakerEncoderConfig.from_dict(cfg.speaker_encoder))

    @classmethod
    def from_folder(
        cls, folder: Path, cfg: Qwen3TTSConfig, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = torch.float32
    ) -> Qwen3TTSNetwork:
        """Build on the meta device, then fill every tensor from the checkpoint (strict); `dtype`
        None keeps the floating tensors as stored (zero-copy on the CPU)."""
        return build_from_weights(lambda: cls(cfg), weight_files(Path(folder)), dtype=dtype, device=device, as_stored=dtype is None).eval()
