"""Fish Speech voice prompts, reusable: one or more reference clips, each as its codec codes
(upstream's `encode_audio`: 10 rows, the semantic code then 9 residual ones, about 21.5 frames a
second) with its transcript, which S2 reads before the codes. Clip i is speaker i of a dialogue
(`<|speaker:i|>`), unless its transcript carries a speaker tag of its own. Saved as
`prompt.safetensors` + `prompt.json` (never pickle).
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
MAX_CLIPS = 16


class FishSpeechVoiceError(ValueError):
    """A saved Fish Speech voice prompt that cannot be read or is not one."""


@dataclass(frozen=True, eq=False)
class ReferenceClip:
    """A clip's codes (rows, frames), int64, and its transcript."""

    codes: torch.Tensor
    text: str


@dataclass(frozen=True, eq=False)
class FishSpeechVoice:
    """The reference clips of a voice, in speaker order."""

    clips: tuple[ReferenceClip, ...]
    info: dict = field(default_factory=dict)

    family = FAMILY

    @classmethod
    def of(cls, codes: torch.Tensor, text: str, info: dict | None = None) -> FishSpeechVoice:
        """A voice of one clip."""
        return cls((ReferenceClip(codes, text),), dict(info or {}))

    @classmethod
    def joined(cls, *voices: FishSpeechVoice) -> FishSpeechVoice:
        """One voice of several voices' clips, in order: the first voice's clips are speaker 0 (and
        on), the next voice's the speakers after them, for a dialogue with speaker tags."""
        if not voices or not all(isinstance(v, FishSpeechVoice) for v in voices):
            raise TypeError("joined() takes one or more Fish Speech voices")
        clips = tuple(c for v in voices for c in v.clips)
        if len(clips) > MAX_CLIPS:
            raise ValueError(f"a voice holds at most {MAX_CLIPS} reference clips, got {len(clips)}")
        return cls(clips, {"joined": [v.info for v in voices]})

    @property
    def text(self) -> str:
        """The transcripts, one a line."""
        return "\n".join(c.text for c in self.clips)

    @property
    def seconds(self) -> float:
        return sum(c.codes.shape[-1] for c in self.clips) / FRAME_RATE

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` into `folder` (atomically)."""
        tensors = {f"codes_{i}": c.codes.t().to(torch.int64).contiguous() for i, c in enumerate(self.clips)}
        meta = {"format_version": FORMAT_VERSION, "family": FAMILY, "texts": [c.text for c in self.clips], "info": self.info}
        return write_prompt(folder, tensors, meta)

    @classmethod
    def load(cls, folder: str | Path) -> FishSpeechVoice:
        meta, tensors = read_prompt(folder, FishSpeechVoiceError)
        check_header(folder, meta, FishSpeechVoiceError, family=FAMILY, title="Fish Speech", version=FORMAT_VERSION)
        texts, info = meta.get("texts"), meta.get("info") or {}
        valid = isinstance(texts, list) and 0 < len(texts) <= MAX_CLIPS and all(isinstance(t, str) and t.strip() for t in texts)
        if not valid or not isinstance(info, dict) or set(tensors) != {f"codes_{i}" for i in range(len(texts))}:
            raise FishSpeechVoiceError(f"{folder}: a damaged Fish Speech voice prompt (prompt.json: texts, info); prepare the voice again")
        clips = []
        for i, text in enumerate(texts):
            codes = prompt_tensor(
                folder, tensors, f"codes_{i}", FishSpeechVoiceError, dtype=torch.int64, shape=(None, None), max_len=int(MAX_SECONDS * FRAME_RATE), low=0
            )
            clips.append(ReferenceClip(codes.t().contiguous(), text))
        return cls(tuple(clips), dict(info))
