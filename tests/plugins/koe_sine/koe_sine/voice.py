"""A sine voice prompt: the pitch and amplitude of a reference clip, reusable across requests.

Saved as `prompt.safetensors` + `prompt.json` with koe's prompt files (`koe.engines.prompt_files`),
so `koe voices` can keep it in its library and `load_voice` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from koe.engines.prompt_files import prompt_tensor, read_prompt, write_prompt

FAMILY = "sine"
FORMAT_VERSION = 1


class SineVoiceError(ValueError):
    """A saved sine voice prompt that cannot be read or is not one (the engine base makes it a `VoicePromptMismatch`)."""


@dataclass
class SineVoice:
    """A voice: `pitch` in Hz and `amplitude` (0-1) of its tones."""

    pitch: float
    amplitude: float
    info: dict = field(default_factory=dict)

    family = FAMILY

    @classmethod
    def from_clip(cls, samples: np.ndarray, sample_rate: int) -> SineVoice:
        """The clip's mean pitch (from its zero crossings) and its peak level, within what the model speaks."""
        x = np.asarray(samples, dtype=np.float64)
        crossings = np.count_nonzero(np.signbit(x[1:]) != np.signbit(x[:-1]))
        seconds = len(x) / sample_rate
        pitch = float(np.clip(crossings / 2 / seconds, 50.0, 2000.0))
        amplitude = float(np.clip(np.sqrt(2 * np.mean(x * x)), 0.05, 0.9))
        return cls(float(np.float32(pitch)), float(np.float32(amplitude)), {"ref_seconds": round(seconds, 3)})  # as saved: float32

    def save(self, folder: str | Path) -> Path:
        tensors = {"pitch": torch.tensor([self.pitch], dtype=torch.float32), "amplitude": torch.tensor([self.amplitude], dtype=torch.float32)}
        return write_prompt(folder, tensors, {"format_version": FORMAT_VERSION, "family": FAMILY, "info": self.info})

    @classmethod
    def load(cls, folder: str | Path) -> SineVoice:
        meta, tensors = read_prompt(folder, SineVoiceError)
        if meta.get("family") != FAMILY:
            raise SineVoiceError(f"{folder}: this voice prompt was made for a {meta.get('family') or 'model of another family'} model, not Sine")
        if meta.get("format_version") != FORMAT_VERSION:
            raise SineVoiceError(f"{folder}: unknown sine voice prompt format {meta.get('format_version')!r}")
        pitch, amplitude = (
            float(prompt_tensor(folder, tensors, k, SineVoiceError, dtype=torch.float32, shape=(1,), max_len=1)[0]) for k in ("pitch", "amplitude")
        )
        return cls(pitch, amplitude, dict(meta.get("info") or {}))
