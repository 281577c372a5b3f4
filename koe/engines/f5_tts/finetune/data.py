"""F5-TTS fine-tuning's data: the clips of a dataset, checked, and what upstream's fine-tuning
reads of each: its tokens, its duration and its mel.

`load_clips(path)` reads a JSONL (`{"audio": ..., "text": ...}` a line), a CSV with a header
(`audio,text`) or a folder of `NAME.wav` + `NAME.txt` pairs (`koe.engines.dataset`), and
`prepare_items` decodes every clip; every problem of either is listed at once (`DatasetError`)
before anything is trained: rows it cannot read, missing or undecodable files, empty transcripts,
the same clip twice, silent clips (peak below -60 dBFS), clips under 0.3 s or over 30 s (upstream's
loader skips those, putting the next row in their place) and clips longer than a batch (its
sampler leaves those out).

`prepare_csv_wavs.py` turns a transcript into tokens with `convert_char_to_pinyin` (koe's
`to_tokens`) and takes the duration from the file's header (frames / rate); upstream's
`CustomDataset` makes the mel when it reads an item: the file's float32 samples, the channels'
mean, `Resample(rate, 24000)` when the rate differs, the Vocos log-mel (100 bins, hop 256).
Upstream makes every mel again each epoch; they do not change, so koe makes them once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from koe.audio.mel import vocos_log_mel
from koe.audio.sinc_resample import resample_sinc
from koe.engines.dataset import Clip, DatasetError, load_clips, missing_file
from koe.engines.f5_tts.config import MelConfig
from koe.engines.f5_tts.finetune.batches import frame_length
from koe.engines.f5_tts.text import Vocab, to_tokens

__all__ = ["MAX_SECONDS", "MIN_SECONDS", "Clip", "Item", "collate", "load_clips", "prepare_item", "prepare_items"]

MIN_SECONDS, MAX_SECONDS = 0.3, 30.0  # upstream's loader skips clips outside these
SILENCE_DBFS = -60.0


@dataclass(frozen=True)
class Item:
    mel: torch.Tensor  # (mels, frames)
    ids: list[int]  # token ids (an unknown token is 0)
    duration: float  # seconds, as the file's header says
    peak_dbfs: float = 0.0


def prepare_items(clips: list[Clip], vocab: Vocab, mel: MelConfig, frames_per_batch: float, source: str | Path = "") -> list[Item]:
    """Every clip decoded and measured (`prepare_item`), or `DatasetError` listing every problem."""
    items, problems = [], []
    for clip in clips:
        label = clip.where or clip.audio.name
        if missing := missing_file(clip.audio, label):
            problems.append(missing)
            continue
        try:
            duration = sf.info(str(clip.audio)).duration  # the header first: a long file is not decoded
            if not MIN_SECONDS <= duration <= MAX_SECONDS:
                problems.append(f"{label}: {duration:.2f} s long; clips must be {MIN_SECONDS} to {MAX_SECONDS:g} s (upstream's loader skips the others)")
                continue
            if frame_length(duration) > frames_per_batch:
                problems.append(f"{label}: {frame_length(duration):.0f} mel frames, more than a batch's {frames_per_batch} (raise frames_per_batch)")
                continue
            item = prepare_item(clip, vocab, mel, duration)
        except (sf.LibsndfileError, RuntimeError, ValueError) as e:
            problems.append(f"{label}: {clip.audio.name} cannot be decoded ({e})")
            continue
        if item.peak_dbfs < SILENCE_DBFS:
            problems.append(f"{label}: silent (peak {item.peak_dbfs:.0f} dBFS)")
        items.append(item)
    if problems:
        raise DatasetError(source or "the clips", problems)
    return items


def prepare_item(clip: Clip, vocab: Vocab, mel: MelConfig, duration: float) -> Item:
    """The clip's mel, tokens and peak; `duration`: its header's (soundfile's `info`)."""
    samples, rate = sf.read(str(clip.audio), dtype="float32", always_2d=True)
    audio = torch.from_numpy(np.ascontiguousarray(samples.T))  # (channels, n), as torchaudio.load gives it
    if audio.shape[0] > 1:
        audio = torch.mean(audio, dim=0, keepdim=True)
    if rate != mel.sample_rate:
        audio = resample_sinc(audio, rate, mel.sample_rate)
    peak = float(np.abs(samples).max()) if samples.size else 0.0
    spectrum = vocos_log_mel(audio, mel.sample_rate, mel.n_fft, mel.hop_length, mel.win_length, mel.n_mels).squeeze(0)
    return Item(spectrum, vocab.ids(to_tokens(clip.text)), duration, 20 * np.log10(peak) if peak > 0 else -np.inf)


def collate(items: list[Item]) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """(mel (B, n, mels), lens (B,), token id rows) of a batch, as upstream's `collate_fn` and its
    trainer's `batch["mel"].permute(0, 2, 1)` make it: the mel a permuted view of (B, mels, n),
    so noise drawn `like` it fills the same memory order as upstream's."""
    lens = torch.LongTensor([item.mel.shape[-1] for item in items])
    longest = int(lens.amax())
    mel = torch.stack([torch.nn.functional.pad(item.mel, (0, longest - item.mel.shape[-1]), value=0) for item in items])
    return mel.permute(0, 2, 1), lens, [item.ids for item in items]
