"""What upstream's fine-tuning reads of each clip: its tokens, its duration and its mel.

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
from koe.engines.f5_tts.config import MelConfig
from koe.engines.f5_tts.text import Vocab, to_tokens

__all__ = ["Clip", "Item", "collate", "prepare_item"]


@dataclass(frozen=True)
class Clip:
    audio: Path
    text: str


@dataclass(frozen=True)
class Item:
    mel: torch.Tensor  # (mels, frames)
    ids: list[int]  # token ids (an unknown token is 0)
    duration: float  # seconds, as the file's header says


def prepare_item(clip: Clip, vocab: Vocab, mel: MelConfig) -> Item:
    info = sf.info(str(clip.audio))
    samples, rate = sf.read(str(clip.audio), dtype="float32", always_2d=True)
    audio = torch.from_numpy(np.ascontiguousarray(samples.T))  # (channels, n), as torchaudio.load gives it
    if audio.shape[0] > 1:
        audio = torch.mean(audio, dim=0, keepdim=True)
    if rate != mel.sample_rate:
        audio = resample_sinc(audio, rate, mel.sample_rate)
    spectrum = vocos_log_mel(audio, mel.sample_rate, mel.n_fft, mel.hop_length, mel.win_length, mel.n_mels).squeeze(0)
    return Item(spectrum, vocab.ids(to_tokens(clip.text)), info.duration)


def collate(items: list[Item]) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """(mel (B, n, mels), lens (B,), token id rows) of a batch, as upstream's `collate_fn` and its
    trainer's `batch["mel"].permute(0, 2, 1)` make it: the mel a permuted view of (B, mels, n),
    so noise drawn `like` it fills the same memory order as upstream's."""
    lens = torch.LongTensor([item.mel.shape[-1] for item in items])
    longest = int(lens.amax())
    mel = torch.stack([torch.nn.functional.pad(item.mel, (0, longest - item.mel.shape[-1]), value=0) for item in items])
    return mel.permute(0, 2, 1), lens, [item.ids for item in items]
