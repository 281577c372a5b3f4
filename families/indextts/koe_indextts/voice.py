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
        if meta.get("release") == "2":
            raise IndexTTSVoiceError(f"{folder}: an IndexTTS 2 voice prompt, not a 1.5 one: prepare the voice again with this model")
        if not isinstance(info, dict):
            raise IndexTTSVoiceError(f"{folder}: a damaged IndexTTS voice prompt (prompt.json: info); prepare the voice again")
        mel = prompt_tensor(folder, tensors, "mel", IndexTTSVoiceError, dtype=torch.float32, shape=(None, MELS), max_len=int(MAX_SECONDS * MEL_RATE))
        if mel.shape[0] < 2 or not torch.isfinite(mel).all():
            raise IndexTTSVoiceError(f"{folder}: a damaged IndexTTS voice prompt (its mel); prepare the voice again")
        return cls(mel.t()[None], dict(info))


SPEAKER_RATE = 22050  # release 2 reads the speaker clip at this rate
EMOTION_RATE = 16000  # and the clip's emotion at this one
MAX_CLIP_S = 15  # upstream keeps 15 s of each


@dataclass(frozen=True, eq=False)
class IndexTTS2Voice:
    """A release 2 voice: the clip as upstream reads it, twice (mono float32 at 22.05 kHz for the
    speaker, at 16 kHz for the emotion, each at most 15 s); a loaded model derives the rest (w2v-BERT
    features, semantic frames, mel, CAM++ style) once per voice."""

    speaker_audio: torch.Tensor  # (1, n) at 22.05 kHz
    emotion_audio: torch.Tensor  # (1, m) at 16 kHz
    info: dict = field(default_factory=dict)

    family = FAMILY
    text = None
    release = "2"

    @property
    def seconds(self) -> float:
        return self.speaker_audio.shape[-1] / SPEAKER_RATE

    def save(self, folder: str | Path) -> Path:
        tensors = {"speaker_audio": self.speaker_audio[0].contiguous(), "emotion_audio": self.emotion_audio[0].contiguous()}
        return write_prompt(folder, tensors, {"format_version": FORMAT_VERSION, "family": FAMILY, "release": "2", "info": self.info})

    @classmethod
    def load(cls, folder: str | Path) -> IndexTTS2Voice:
        meta, tensors = read_prompt(folder, IndexTTSVoiceError)
        check_header(folder, meta, IndexTTSVoiceError, family=FAMILY, title="IndexTTS", version=FORMAT_VERSION)
        info = meta.get("info") or {}
        if meta.get("release") != "2" or not isinstance(info, dict):
            raise IndexTTSVoiceError(f"{folder}: not an IndexTTS 2 voice prompt (prepare the voice again with this model)")
        err = IndexTTSVoiceError
        speaker = prompt_tensor(folder, tensors, "speaker_audio", err, dtype=torch.float32, shape=(None,), max_len=MAX_CLIP_S * SPEAKER_RATE)
        emotion = prompt_tensor(folder, tensors, "emotion_audio", err, dtype=torch.float32, shape=(None,), max_len=MAX_CLIP_S * EMOTION_RATE)
        return cls(speaker[None], emotion[None], dict(info))


def load_voice(folder: str | Path) -> IndexTTSVoice | IndexTTS2Voice:
    """A saved IndexTTS voice of either release (its prompt.json says which)."""
    meta, _ = read_prompt(folder, IndexTTSVoiceError)
    return IndexTTS2Voice.load(folder) if meta.get("release") == "2" else IndexTTSVoice.load(folder)
