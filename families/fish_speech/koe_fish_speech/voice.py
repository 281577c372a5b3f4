"""Fish Speech voice prompts, reusable: a clip's codec codes as upstream's `encode_audio` makes them
(10 rows: the semantic code, then 9 residual ones, about 21.5 frames a second) with the clip's
transcript, which S2 reads before them. Saved as `prompt.safetensors` + `prompt.json` (never pickle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from koe.engines.prompt_files import check_header, prompt_tensor, read_prompt, write_prompt

FORMAT_VERSION = 1
FAMILY = "fish_speech"
FRAME_RATE = 44100 / 2048
MAX_SECONDS = 61


class FishSpeechVoiceError(ValueError):
    """A saved Fish Speech voice prompt that cannot be read or is not one."""


@dataclass(frozen=True, eq=False)
class FishSpeechVoice:
    """`codes`: the clip's codes (rows, frames), int64; `text`: its transcript."""

    codes: torch.Tensor
    text: str
    info: dict = field(default_factory=dict)

    family = FAMILY

    @property
    def seconds(self) -> float:
        return self.codes.shape[-1] / FRAME_RATE

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` into `folder` (atomically)."""
        tensors = {"codes": self.codes.t().to(torch.int64).contiguous()}
        meta = {"format_version": FORMAT_VERSION, "family": FAMILY, "text": self.text, "info": self.info}
        return write_prompt(folder, tensors, meta)

    @classmethod
    def load(cls, folder: str | Path) -> FishSpeechVoice:
        meta, tensors = read_prompt(folder, FishSpeechVoiceError)
        check_header(folder, meta, FishSpeechVoiceError, family=FAMILY, title="Fish Speech", version=FORMAT_VERSION)
        text, info = meta.get("text"), meta.get("info") or {}
        if not isinstance(text, str) or not text.strip() or not isinstance(info, dict):
            raise FishSpeechVoiceError(f"{folder}: a damaged Fish Speech voice prompt (prompt.json: text, info); prepare the voice again")
        codes = prompt_tensor(
            folder, tensors, "codes", FishSpeechVoiceError, dtype=torch.int64, shape=(None, None), max_len=int(MAX_SECONDS * FRAME_RATE), low=0
        )
        return cls(codes.t().contiguous(), text, dict(info))
