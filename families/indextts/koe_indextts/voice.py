"""IndexTTS voice prompts, reusable: a clip's reference log-mel as upstream computes it (24 kHz,
100 bands), from which a loaded model takes its conditioning latents and speaker embedding. Saved
as `prompt.safetensors` + `prompt.json` (never pickle); no transcript is needed or kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from koe.engines.prompt_files import check_header, prompt_tensor, read_prompt, write_prompt

FORMAT_VERSION = 1
FAMILY = "indextts"
MELS = 100
MEL_RATE = 24000 / 256
MAX_SECONDS = 61


class IndexTTSVoiceError(ValueError):
    """A saved IndexTTS voice prompt that cannot be read or is not one."""


@dataclass(frozen=True, eq=False)
class IndexTTSVoice:
    """`mel`: the clip's reference log-mel (1, 100, frames), float32."""

    mel: torch.Tensor
    info: dict = field(default_factory=dict)

    family = FAMILY
    text = None

    @property
    def seconds(self) -> float:
        return self.mel.shape[-1] / MEL_RATE

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` into `folder` (atomically)."""
        tensors = {"mel": self.mel[0].t().to(torch.float32).contiguous()}
        return write_prompt(folder, tensors, {"format_version": FORMAT_VERSION, "family": FAMILY, "info": self.info})

    @classmethod
    def load(cls, folder: str | Path) -> IndexTTSVoice:
        meta, tensors = read_prompt(folder, IndexTTSVoiceError)
        check_header(folder, meta, IndexTTSVoiceError, family=FAMILY, title="IndexTTS", version=FORMAT_VERSION)
        info = meta.get("info") or {}
        if not isinstance(info, dict):
            raise IndexTTSVoiceError(f"{folder}: a damaged IndexTTS voice prompt (prompt.json: info); prepare the voice again")
        mel = prompt_tensor(folder, tensors, "mel", IndexTTSVoiceError, dtype=torch.float32, shape=(None, MELS), max_len=int(MAX_SECONDS * MEL_RATE))
        if mel.shape[0] < 2 or not torch.isfinite(mel).all():
            raise IndexTTSVoiceError(f"{folder}: a damaged IndexTTS voice prompt (its mel); prepare the voice again")
        return cls(mel.t()[None], dict(info))
