"""The Qwen3-TTS network (talker, code predictor, speaker encoder for Base) and its strict loading."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.qwen3_tts.talker import Talker
from koe.runtime.weights import load_state, weight_files


class Qwen3TTSNetwork(nn.Module):
    """`talker.*` and, for Base models, `speaker_encoder.*` — the names of the released `model.safetensors`."""

    def __init__(self, cfg: Qwen3TTSConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.talker = Talker(cfg.talker)
        self.speaker_encoder: nn.Module | None = None
        if cfg.model_type == "base":
            from koe.nn.ecapa import SpeakerEncoder, SpeakerEncoderConfig

            self.speaker_encoder = SpeakerEncoder(SpeakerEncoderConfig.from_dict(cfg.speaker_encoder))

    @classmethod
    def from_folder(cls, folder: Path, cfg: Qwen3TTSConfig, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> Qwen3TTSNetwork:
        """Build on the meta device, then fill every tensor from the checkpoint (strict)."""
        with torch.device("meta"):
            net = cls(cfg)
        load_state(net, weight_files(Path(folder)), dtype=dtype)
        net.reset_buffers()
        stray = [n for n, t in [*net.named_parameters(), *net.named_buffers()] if t.is_meta]
        if stray:
            raise RuntimeError(f"tensors left unloaded after loading: {stray[:5]}")
        return net.to(device).eval()

    def reset_buffers(self) -> None:
        """Recompute non-persistent buffers (rotary tables) lost when the module was built on meta."""
        from koe.nn.qwen3 import inverse_frequencies

        for owner in (self.talker, self.talker.code_predictor):
            spec = owner.cfg.decoder
            owner.inv_freq = inverse_frequencies(spec.head_dim, spec.rope_theta)
        if self.speaker_encoder is not None and hasattr(self.speaker_encoder, "reset_buffers"):
            self.speaker_encoder.reset_buffers()
