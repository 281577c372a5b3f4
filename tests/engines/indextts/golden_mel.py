"""Inputs of the `mel` golden (koe's side): reference clips as WAV files at the rates voices come in.

Each clip is a few tenths of a second of seeded tones and noise, at 16, 22.05, 24, 44.1 and 48 kHz,
mono and stereo, stored as 16-bit PCM, 24-bit PCM or float (what `torchaudio.load` reads
differently), plus one clip over upstream's 50 s cap (mono, 16 kHz, 16-bit). The oracle takes each
through upstream's reference path (`torchaudio.load`, channel mean, `Resample(sr, 24000)`, 50 s cap,
`MelSpectrogramFeatures()`); `state_sha256.txt` holds the hash of the clips' samples (no weights here).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf
from koe_indextts.fixtures import tone_clip, wav_clips_sha256

# name -> (sample rate, channels, libsndfile subtype, seconds)
CLIPS: dict[str, tuple[int, int, str, float]] = {
    "16k_mono_pcm16": (16000, 1, "PCM_16", 0.3),
    "16k_stereo_float": (16000, 2, "FLOAT", 0.3),
    "22k_mono_float": (22050, 1, "FLOAT", 0.3),
    "22k_stereo_pcm16": (22050, 2, "PCM_16", 0.3),
    "24k_mono_pcm16": (24000, 1, "PCM_16", 0.3),
    "24k_stereo_float": (24000, 2, "FLOAT", 0.3),
    "44k_mono_pcm16": (44100, 1, "PCM_16", 0.3),
    "44k_stereo_pcm24": (44100, 2, "PCM_24", 0.3),
    "48k_mono_float": (48000, 1, "FLOAT", 0.3),
    "48k_stereo_pcm16": (48000, 2, "PCM_16", 0.3),
}
LONG = "16k_mono_pcm16_51s"  # past the 50 s cap: the golden keeps its shape, last frames and hash
LONG_CLIP = (16000, 1, "PCM_16", 51.0)
TAIL_FRAMES = 4


def clip_samples(name: str, rate: int, channels: int, seconds: float) -> np.ndarray:
    """Seeded tones (five partials, a slow envelope) plus noise: float32 `(n, channels)` within +-0.9."""
    return tone_clip(name, rate, int(round(rate * seconds)), channels)


def clip_path(folder: Path, name: str) -> Path:
    return folder / f"{name}.wav"


def all_clips() -> dict[str, tuple[int, int, str, float]]:
    return {**CLIPS, LONG: LONG_CLIP}


def inputs_sha256(folder: Path) -> str:
    """One hash of the clips' rates, formats and samples as read back, in the clips' order."""
    return wav_clips_sha256({name: clip_path(folder, name) for name in all_clips()})


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, (rate, channels, subtype, seconds) in all_clips().items():
        sf.write(clip_path(folder, name), clip_samples(name, rate, channels, seconds), rate, format="WAV", subtype=subtype)
    (folder / "clips.json").write_text(json.dumps({"clips": list(CLIPS), "long": LONG, "tail_frames": TAIL_FRAMES}, indent=1))
    (folder / "state_sha256.txt").write_text(inputs_sha256(folder) + "\n")
