"""Voice prompts for cloning with Qwen3-TTS Base models.

A voice prompt is what the model needs from a reference clip: the speaker embedding (x-vector)
and, for in-context cloning (ICL), the clip's codec frames and transcript. It is computed once and
reused: saved as `prompt.safetensors` + `prompt.json` (never pickle), with the model it was made
for, so a prompt is never silently fed to a model it does not fit. A prompt prepared from a padded
reference (opt-in `ref_pad_seconds`: silence appended before encoding) says so in its info.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from koe.audio.errors import AudioError, AudioTooLong
from koe.audio.io import load_audio
from koe.audio.resample import resample
from koe.engines.prompt_files import prompt_tensor, read_prompt, write_prompt
from koe.engines.qwen3_tts.spec import FRAME_RATE, MAX_REF_PAD_SECONDS

FORMAT_VERSION = 1
MIN_REF_SECONDS = 1.0
MAX_REF_SECONDS = 30.0
SAMPLE_RATE = 24000
MAX_REF_FRAMES = math.ceil((MAX_REF_SECONDS + MAX_REF_PAD_SECONDS) * FRAME_RATE) + 1  # the most codec frames a prepared prompt holds


class VoicePromptError(ValueError):
    """A voice prompt that cannot be made or used (bad reference, missing transcript, wrong model)."""


@dataclass(frozen=True)
class ModelStamp:
    """Which model a prompt was made for: what must match, and a fingerprint of the exact weights."""

    family: str
    model_type: str
    size: str
    hidden_size: int
    num_code_groups: int
    fingerprint: str

    def check(self, other: ModelStamp) -> None:
        for name in ("family", "hidden_size", "num_code_groups"):
            if getattr(self, name) != getattr(other, name):
                raise VoicePromptError(
                    f"this voice prompt was made for a {self.family} {self.size} model ({name}={getattr(self, name)}), "
                    f"not for this {other.family} {other.size} model ({name}={getattr(other, name)}); prepare the voice again with this model"
                )
        if other.model_type != "base":
            raise VoicePromptError(f"voice cloning needs a Base model; this is a {other.model_type} model")


@dataclass
class VoicePrompt:
    """A reusable cloning prompt. `ref_code` and `ref_text` are set in ICL mode only."""

    speaker_embedding: torch.Tensor  # (C,) float32
    ref_code: torch.Tensor | None  # (T, G) int64
    ref_text: str | None
    x_vector_only: bool
    model: ModelStamp
    info: dict = field(default_factory=dict)  # reference duration, sample rate, source name

    @property
    def icl(self) -> bool:
        return not self.x_vector_only

    @property
    def ref_pad_seconds(self) -> float:
        """Seconds of silence appended to the reference before it was encoded (0: none, upstream's way)."""
        return float(self.info.get("ref_pad_seconds", 0.0))

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` atomically into `folder`."""
        tensors = {"speaker_embedding": self.speaker_embedding.float()}
        if self.ref_code is not None:
            tensors["ref_code"] = self.ref_code.long()
        meta = {
            "format": FORMAT_VERSION,
            "family": self.model.family,
            "ref_text": self.ref_text,
            "x_vector_only": self.x_vector_only,
            "model": self.model.__dict__,
            "info": self.info,
        }
        return write_prompt(folder, tensors, meta)

    @classmethod
    def load(cls, folder: str | Path) -> VoicePrompt:
        meta, tensors = read_prompt(folder, VoicePromptError)
        if meta.get("family") not in (None, "qwen3_tts"):
            raise VoicePromptError(f"{folder}: this voice prompt was made for a {meta['family']} model, not Qwen3-TTS; prepare the voice again with this model")
        if meta.get("format") != FORMAT_VERSION:
            raise VoicePromptError(f"{folder}: voice prompt format {meta.get('format')} is not supported (expected {FORMAT_VERSION})")
        damaged = f"{folder}: a damaged voice prompt (prompt.json); prepare the voice again"
        try:
            model = ModelStamp(**meta["model"])
        except (KeyError, TypeError) as e:
            raise VoicePromptError(damaged) from e
        x_vector_only, text, info = meta.get("x_vector_only"), meta.get("ref_text"), meta.get("info", {})
        sizes = (model.hidden_size, model.num_code_groups)
        if not isinstance(x_vector_only, bool) or not isinstance(info, dict) or not all(isinstance(n, int) and n > 0 for n in sizes):
            raise VoicePromptError(damaged)
        if not x_vector_only and not isinstance(text, str):
            raise VoicePromptError(damaged)
        size, groups = sizes
        embedding = prompt_tensor(folder, tensors, "speaker_embedding", VoicePromptError, dtype=torch.float32, shape=(size,), max_len=size)
        if x_vector_only:
            return cls(embedding, None, None, True, model, info)
        codes = prompt_tensor(folder, tensors, "ref_code", VoicePromptError, dtype=torch.int64, shape=(None, groups), max_len=MAX_REF_FRAMES, low=0)
        return cls(embedding, codes, text, False, model, info)


def model_stamp(cfg, folder: Path) -> ModelStamp:
    """Stamp of a loaded Qwen3-TTS model: sizes from its config, fingerprint from config + weight sizes."""
    h = hashlib.sha256((Path(folder) / "config.json").read_bytes())
    for p in sorted(Path(folder).glob("*.safetensors")):
        h.update(f"{p.name}:{p.stat().st_size}".encode())
    return ModelStamp("qwen3_tts", cfg.model_type, cfg.model_size, cfg.talker.decoder.hidden_size, cfg.talker.num_code_groups, h.hexdigest()[:16])


def reference_audio(source, *, max_seconds: float = MAX_REF_SECONDS, trim: bool = False) -> tuple[np.ndarray, int]:
    """Load a reference (path, bytes, (array, sr)) as float32 mono and check its length."""
    if isinstance(source, np.ndarray):
        raise AudioError("for a numpy reference pass (samples, sample_rate)")
    try:  # decoded only up to max_seconds (a trimmed clip is the first max_seconds of the full decode)
        audio, sr = load_audio(source, max_seconds=max_seconds, trim=trim)
    except AudioTooLong as e:
        length = f"{e.seconds:.1f} s" if e.seconds is not None else f"more than {max_seconds:.0f} s"
        raise AudioError(
            f"reference audio is {length} long; the maximum is {max_seconds:.0f} s. "
            f"Pass trim=True (CLI: --trim-ref) to use its first {max_seconds:.0f} s, or cut a clean 3-10 s clip"
        ) from e
    seconds = len(audio) / sr
    if seconds < MIN_REF_SECONDS:
        raise AudioError(f"reference audio is {seconds:.2f} s long; give at least {MIN_REF_SECONDS:.0f} s of speech (3-10 s works best)")
    return audio, sr


def pad_reference(audio: np.ndarray, sr: int, seconds: float) -> np.ndarray:
    """`audio` with `seconds` of silence appended at its own rate (before resampling), as
    faster-qwen3-tts pads its references; unchanged (the same array) for 0."""
    n = int(seconds * sr)
    return np.concatenate([audio, np.zeros(n, dtype=audio.dtype)]) if n > 0 else audio


def to_codec_rate(audio: np.ndarray, sr: int) -> np.ndarray:
    """Resample to 24 kHz as upstream does (librosa's soxr_hq), float32."""
    return audio if sr == SAMPLE_RATE else resample(audio.astype(np.float32), sr, SAMPLE_RATE).astype(np.float32)
