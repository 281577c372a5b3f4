"""OmniVoice voice prompts, reusable: what upstream's `create_voice_clone_prompt` makes (the clip's
8 x T audio codes, its transcript as the prompt uses it, the clip's original rms), made once and
saved as `prompt.safetensors` (the codes, int64, frames first) + `prompt.json` (never pickle).
Any OmniVoice model with the same audio tokenizer (8 codebooks of 1024 entries at 25 Hz) can use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from koe.engines.omnivoice.reference import VoicePrompt
from koe.engines.prompt_files import check_header, prompt_tensor, read_prompt, write_prompt

__all__ = ["FAMILY", "MAX_REFERENCE_S", "OmniVoiceVoice", "OmniVoiceVoiceError"]

FORMAT_VERSION = 1
FAMILY = "omnivoice"
MAX_REFERENCE_S = 60.0  # the longest clip a prompt is made from (a longer one is refused, or cut with trim)
FRAME_RATE = 25


class OmniVoiceVoiceError(ValueError):
    """A saved OmniVoice voice prompt that cannot be read or is not one."""


@dataclass(frozen=True, eq=False)
class OmniVoiceVoice(VoicePrompt):
    """`codes` (8, T) int64, `text` (the transcript as the prompt carries it), `rms` of the clip as given."""

    info: dict = field(default_factory=dict)

    family = FAMILY

    @property
    def seconds(self) -> float:
        return self.codes.shape[-1] / FRAME_RATE

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` into `folder` (atomically)."""
        meta = {
            "format_version": FORMAT_VERSION,
            "family": FAMILY,
            "text": self.text,
            "rms": float(self.rms),
            "codebooks": int(self.codes.shape[0]),
            "frame_rate": FRAME_RATE,
            "info": self.info,
        }
        return write_prompt(folder, {"codes": self.codes.detach().to("cpu", torch.int64).T.contiguous()}, meta)

    @classmethod
    def load(cls, folder: str | Path) -> OmniVoiceVoice:
        meta, tensors = read_prompt(folder, OmniVoiceVoiceError)
        check_header(folder, meta, OmniVoiceVoiceError, family=FAMILY, title="OmniVoice", version=FORMAT_VERSION)
        text, rms, books, info = meta.get("text"), meta.get("rms"), meta.get("codebooks"), meta.get("info") or {}
        ok = isinstance(text, str) and text.strip() and isinstance(books, int) and not isinstance(books, bool) and books > 0
        ok = ok and isinstance(rms, (int, float)) and not isinstance(rms, bool) and math.isfinite(rms) and rms >= 0 and isinstance(info, dict)
        if not ok:
            raise OmniVoiceVoiceError(f"{folder}: a damaged OmniVoice voice prompt (prompt.json: text, rms, codebooks or info); prepare the voice again")
        longest = int((MAX_REFERENCE_S + 1) * FRAME_RATE)
        codes = prompt_tensor(folder, tensors, "codes", OmniVoiceVoiceError, dtype=torch.int64, shape=(None, books), max_len=longest, low=0)
        return cls(codes.T.contiguous(), text, float(rms), dict(info))
