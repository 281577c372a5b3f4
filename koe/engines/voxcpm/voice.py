"""VoxCPM voice prompts: the prompt clip (continuation: audio + its transcript) and/or VoxCPM2's
structural reference clip, as the model's encoder reads them, reusable.

Kept as float32 mono samples at the model's encode rate (16 kHz for VoxCPM2, 44.1 kHz for
VoxCPM 1.5), after upstream's loader (decode, channel mean, resample): any model of the same
architecture can use the voice, and the engine encodes it with its own AudioVAE (once per voice
and process). The transcript is kept as given: upstream glues it in front of the text as is.
Saved as `prompt.safetensors` + `prompt.json` (never pickle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from koe.engines.prompt_files import check_header, prompt_rate, prompt_tensor, read_prompt, write_prompt
from koe.engines.voxcpm.spec import MAX_REFERENCE_S

__all__ = ["FAMILY", "VoxCPMVoice", "VoxCPMVoiceError"]

FORMAT_VERSION = 1
FAMILY = "voxcpm"


class VoxCPMVoiceError(ValueError):
    """A saved VoxCPM voice prompt that cannot be read or is not one."""


@dataclass(eq=False)
class VoxCPMVoice:
    """`prompt` + `prompt_text`: continuation audio and its transcript; `reference`: VoxCPM2's
    structural reference. Either or both; samples at `sample_rate` for `architecture`."""

    architecture: str
    sample_rate: int
    prompt: np.ndarray | None = None
    prompt_text: str | None = None
    reference: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    family = FAMILY

    def __post_init__(self) -> None:
        if (self.prompt is None) != (self.prompt_text is None):
            raise VoxCPMVoiceError("a prompt clip needs its transcript (and a transcript its clip)")
        if self.prompt is None and self.reference is None:
            raise VoxCPMVoiceError("a voice needs a prompt clip with its transcript, or a reference clip")

    @property
    def mode(self) -> str:
        """ "continuation", "reference" or "ref_continuation" (upstream's names)."""
        if self.prompt is not None and self.reference is not None:
            return "ref_continuation"
        return "continuation" if self.prompt is not None else "reference"

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` into `folder` (atomically)."""
        tensors = {
            name: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
            for name, a in (("prompt", self.prompt), ("reference", self.reference))
            if a is not None
        }
        meta = {
            "format_version": FORMAT_VERSION,
            "family": FAMILY,
            "architecture": self.architecture,
            "sample_rate": int(self.sample_rate),
            "prompt_text": self.prompt_text,
            "mode": self.mode,
            "info": self.info,
        }
        return write_prompt(folder, tensors, meta)

    @classmethod
    def load(cls, folder: str | Path) -> VoxCPMVoice:
        meta, tensors = read_prompt(folder, VoxCPMVoiceError)
        check_header(folder, meta, VoxCPMVoiceError, family=FAMILY, title="VoxCPM", version=FORMAT_VERSION)
        rate, text, info = prompt_rate(folder, meta, VoxCPMVoiceError), meta.get("prompt_text"), meta.get("info") or {}
        if not isinstance(meta.get("architecture"), str) or not (text is None or isinstance(text, str)) or not isinstance(info, dict):
            raise VoxCPMVoiceError(f"{folder}: a damaged VoxCPM voice prompt (prompt.json)")
        longest = int((MAX_REFERENCE_S + 1) * rate)  # a clip is cut to MAX_REFERENCE_S before it is resampled to `rate`
        arrays = {
            k: prompt_tensor(folder, tensors, k, VoxCPMVoiceError, dtype=torch.float32, shape=(None,), max_len=longest).numpy()
            for k in ("prompt", "reference")
            if k in tensors
        }
        return cls(meta["architecture"], rate, arrays.get("prompt"), text, arrays.get("reference"), dict(info))
