"""OmniVoice fine-tuning's data: the clips of a dataset, checked, and their audio tokens.

`load_clips(path)` reads a JSONL (`{"audio": ..., "text": ...}` a line, optionally `language_id`
(a language id such as "en"; `language` is taken too), `instruct` and `text_pinyin`, which
upstream's sample processor reads), a CSV with a header (`audio,text` and those columns) or a
folder of `NAME.wav` + `NAME.txt` pairs (`koe.engines.dataset`). `prepare_samples` encodes every
clip with the model's audio tokenizer (koe's native HiggsAudio-v2 tokenizer) as upstream's
`extract_audio_tokens.py` prepares a clip: the file's samples, the channels' mean, resampled to
24 kHz, scaled to a peak of 0.9 (`x / (max|x| + 1e-7) * 0.9`), zero-padded to a whole frame (960
samples: the HiggsAudio-v2 feature extractor's `pad_to_multiple_of`), then the 8 codebooks' tokens.

Every problem of either is listed at once (`DatasetError`) before anything is written: rows it
cannot read, missing or undecodable files, empty transcripts, the same clip twice, silent clips
(peak below -60 dBFS), clips over 30 s, clips with more audio tokens than `max_sample_tokens` (upstream's
batching skips every sample longer than that, so such a clip would never be trained on).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from koe.engines.dataset import Clip, DatasetError, missing_file
from koe.engines.dataset import load_clips as read_clips
from koe.engines.omnivoice.audio_tokenizer import AudioTokenizer
from koe.engines.omnivoice.finetune.shards import Sample
from koe.engines.omnivoice.reference import load_clip

__all__ = ["MAX_SECONDS", "Clip", "load_clips", "prepare_samples", "sample_key"]

MAX_SECONDS = 30.0
SILENCE_DBFS = -60.0
OPTIONAL = ("language_id", "instruct", "text_pinyin")


def sample_key(index: int) -> str:
    """The key of the clip at `index` in the shards (no dots: webdataset splits names at the first)."""
    return f"utt{index:06d}"


def load_clips(path: str | Path) -> list[Clip]:
    """The clips of the dataset at `path` (with their optional fields), or `DatasetError` listing
    every problem of its rows."""
    return read_clips(path, optional=OPTIONAL, aliases={"language": "language_id"})


def _checked(clips: list[Clip]) -> tuple[list[tuple[int, Clip, np.ndarray]], list[str]]:
    """Each readable clip decoded (mono float32 (1, N) at 24 kHz), and the problems of the others."""
    decoded, problems = [], []
    for index, clip in enumerate(clips):
        label = clip.where or clip.audio.name
        if missing := missing_file(clip.audio, label):
            problems.append(missing)
            continue
        try:
            duration = sf.info(str(clip.audio)).duration  # the header first: a long file is not decoded
            if duration > MAX_SECONDS:
                problems.append(f"{label}: {duration:.2f} s long; clips must be at most {MAX_SECONDS:g} s (cut long recordings into sentences)")
                continue
            wave = load_clip(clip.audio, 24000)
        except (sf.LibsndfileError, RuntimeError, ValueError) as e:
            problems.append(f"{label}: {clip.audio.name} cannot be decoded ({e})")
            continue
        peak = float(np.abs(wave).max()) if wave.size else 0.0
        if peak <= 0 or 20 * np.log10(peak) < SILENCE_DBFS:
            problems.append(f"{label}: silent (peak {20 * np.log10(peak) if peak > 0 else -np.inf:.0f} dBFS)")
            continue
        decoded.append((index, clip, wave))
    return decoded, problems


@torch.inference_mode()
def prepare_samples(clips: list[Clip], codec: AudioTokenizer, max_sample_tokens: int, source: str | Path = "") -> list[Sample]:
    """Every clip's audio tokens and label (`Sample`, keyed by its index), or `DatasetError`
    listing every problem."""
    decoded, problems = _checked(clips)
    hop = codec.config.hop_length
    samples = []
    for index, clip, wave in decoded:
        scaled = (wave / (np.abs(wave).max() + 1e-7)) * 0.9
        scaled = np.pad(scaled, ((0, 0), (0, -scaled.shape[-1] % hop)))  # the feature extractor's zeros up to a whole frame
        codes = codec.encode(torch.from_numpy(np.ascontiguousarray(scaled, dtype=np.float32))[None])[0]  # (8, T)
        if codes.shape[1] > max_sample_tokens:
            problems.append(
                f"{clip.where or clip.audio.name}: {codes.shape[1]} audio frames, more than max_sample_tokens ({max_sample_tokens}): upstream skips it (cut it, or raise max_sample_tokens)"
            )
        label = {"text": clip.text, **clip.extra, "audio_duration": wave.shape[-1] / 24000, "num_tokens": int(codes.shape[1])}
        samples.append(Sample(sample_key(index), codes.to(torch.int16).numpy(), label))
    if problems:
        raise DatasetError(source or "the clips", problems)
    return samples
