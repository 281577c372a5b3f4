"""VoxCPM fine-tuning's data: each clip as upstream's trainer reads it.

Upstream reads its manifest (`{"audio": ..., "text": ...}` a line) with Hugging Face `datasets`,
whose `Audio(sampling_rate=...)` feature decodes a clip with soundfile in float64, averages its
channels, resamples it with librosa (soxr HQ) when its rate is not the AudioVAE's encoding rate,
and the loader turns it into float32; the text becomes token ids with the model's tokenizer as
it is (no normalisation). koe does the same (`koe.audio.resample` gives librosa's samples), once
per clip rather than every epoch.

Every problem is listed at once (`DatasetError`) before anything is trained: the rows the kit's
reader refuses (`koe.engines.dataset.load_clips`), missing or undecodable files, silent clips
(peak below -60 dBFS), clips shorter than one latent patch, and clips whose sequence would not
fit the model's `max_length` (upstream cuts those short, losing their end and stop label).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from koe.audio.resample import resample
from koe.engines.dataset import Clip, DatasetError, missing_file

__all__ = ["SILENCE_DBFS", "Sample", "read_samples", "sequence_length"]

SILENCE_DBFS = -60.0


@dataclass(frozen=True)
class Sample:
    text_ids: list[int]
    audio: np.ndarray  # float32 (n,) at the AudioVAE's encoding rate


def sequence_length(text_ids: int, samples: int, patch_samples: int) -> int:
    """The packed sequence's length: the text, the audio-start token, one position per latent patch
    (the audio padded to whole patches), the audio-end token."""
    return text_ids + 1 + -(-samples // patch_samples) + 1


def read_samples(clips: list[Clip], tokenizer, rate: int, patch_samples: int, max_length: int, source: str | Path = "") -> list[Sample]:
    """Each clip decoded at `rate` and tokenised, or `DatasetError` listing every problem."""
    samples, problems = [], []
    for clip in clips:
        label = clip.where or clip.audio.name
        if missing := missing_file(clip.audio, label):
            problems.append(missing)
            continue
        try:
            audio = _decode(clip.audio, rate)
        except (sf.LibsndfileError, RuntimeError, ValueError) as e:
            problems.append(f"{label}: {clip.audio.name} cannot be decoded ({e})")
            continue
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        if audio.size < patch_samples:
            problems.append(f"{label}: {audio.size / rate:.3f} s long, shorter than one latent patch ({patch_samples / rate:.3f} s)")
            continue
        if peak == 0 or 20 * np.log10(peak) < SILENCE_DBFS:
            problems.append(f"{label}: silent (peak {20 * np.log10(peak) if peak > 0 else -np.inf:.0f} dBFS)")
            continue
        ids = tokenizer(clip.text)
        length = sequence_length(len(ids), audio.size, patch_samples)
        if length > max_length:
            problems.append(f"{label}: {length} positions of text and audio, more than the model's max_length {max_length} (shorten the clip)")
            continue
        samples.append(Sample(ids, audio))
    if problems:
        raise DatasetError(source or "the clips", problems)
    return samples


def _decode(path: Path, rate: int) -> np.ndarray:
    """`datasets`' Audio decoding: float64 samples, the channels' mean, librosa's resampling."""
    audio, found = sf.read(str(path))  # float64, as datasets reads it
    audio = audio.T
    if audio.ndim > 1:
        audio = np.mean(audio, axis=0)
    if found != rate:
        audio = resample(audio, found, rate)
    return audio.astype(np.float32)
