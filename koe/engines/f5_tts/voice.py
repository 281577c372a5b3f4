"""F5-TTS voice prompts: the preprocessed reference clip and its transcript, reusable.

What upstream recomputes on every call (silence clipping, the 12 s cap, trailing silence, the
16-bit round trip, the transcript's closing punctuation) is done once and kept: the clip as
float32 mono samples at its own rate (before loudness normalisation, which depends on the
request's `target_rms`) and the transcript as upstream then uses it. Any F5-TTS model with the
same mel front end (24 kHz, hop 256, 100 bins) can use it. Saved as `prompt.safetensors` +
`prompt.json` (never pickle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from koe.engines.prompt_files import check_header, prompt_rate, prompt_tensor, read_prompt, write_prompt

FORMAT_VERSION = 1
FAMILY = "f5_tts"
MAX_PROMPT_SECONDS = 13.0  # a prepared clip is at most 12 s and 50 ms of silence (reference.py); a longer one is damaged


class F5VoiceError(ValueError):
    """A saved F5-TTS voice prompt that cannot be read or is not one."""


@dataclass
class F5Voice:
    """A prepared reference: `samples` (float32 mono) at `sample_rate`, `ref_text` as upstream uses it."""

    samples: np.ndarray
    sample_rate: int
    ref_text: str
    mel: dict = field(default_factory=lambda: {"sample_rate": 24000, "hop_length": 256, "n_mels": 100})
    info: dict = field(default_factory=dict)

    family = FAMILY

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.sample_rate

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` into `folder` (atomically)."""
        meta = {
            "format_version": FORMAT_VERSION,
            "family": FAMILY,
            "sample_rate": int(self.sample_rate),
            "ref_text": self.ref_text,
            "mel": self.mel,
            "info": self.info,
        }
        return write_prompt(folder, {"samples": torch.from_numpy(np.ascontiguousarray(self.samples, dtype=np.float32))}, meta)

    @classmethod
    def load(cls, folder: str | Path) -> F5Voice:
        meta, tensors = read_prompt(folder, F5VoiceError)
        check_header(folder, meta, F5VoiceError, family=FAMILY, title="F5-TTS", version=FORMAT_VERSION)
        rate = prompt_rate(folder, meta, F5VoiceError)
        samples = prompt_tensor(folder, tensors, "samples", F5VoiceError, dtype=torch.float32, shape=(None,), max_len=int(MAX_PROMPT_SECONDS * rate))
        text, mel, info = meta.get("ref_text"), meta.get("mel") or {}, meta.get("info") or {}
        if not isinstance(text, str) or not text.strip() or not isinstance(mel, dict) or not isinstance(info, dict):
            raise F5VoiceError(f"{folder}: a damaged voice prompt: ref_text, mel or info in prompt.json; prepare the voice again")
        return cls(samples.numpy(), rate, text, dict(mel), dict(info))
