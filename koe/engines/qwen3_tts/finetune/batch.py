"""Training examples and their batch layout, as upstream's recipe builds them (`finetuning/dataset.py`).

One example is a clip's transcript ids, its codec codes (frames, 16) and the log-mels of its
reference audio. A batch lays every example out on one time axis with two input channels, text
and codec, in the order the talker reads a CustomVoice prompt at inference (language "auto"):

    position   0..2          3       4         5         6        7     8 .. 8+L-4   8+L-3  8+L-2  8+L-1 .. +n-1  8+L-1+n
    text       role tokens   pad     pad       pad       pad      bos   transcript   eos    pad    pad ...         pad
    codec      (masked)      nothink think_bos think_eos speaker  pad   pad ...      pad    bos    code 0 ...      eos

L is the length of the transcript's ids with their 3 role tokens (`<|im_start|>assistant\\n`), n the
number of codec frames. Position 6 is where the speaker embedding goes (filled by the objective).
Rows are right-padded to the longest example + 8. `labels` hold code 0 of each frame and the
codec eos at their own input positions (-100 elsewhere); `codec_mask` marks the frames, whose
codebooks 1..15 (`codec_ids`) are summed into the input and predicted by the code predictor.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.qwen3_tts.speaker import speaker_mels

ROLE_TOKENS = 3  # <|im_start|> assistant \n
SPEAKER_POSITION = 6
IGNORE = -100


def assistant_text(text: str) -> str:
    """The chat-formatted text upstream tokenizes for a clip (the same string as at inference)."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class Example:
    text_ids: torch.Tensor  # (1, L): role tokens + transcript (the last 5 ids of assistant_text dropped, as upstream)
    codes: torch.Tensor  # (n, 16) int64
    ref_mels: torch.Tensor  # (1, frames, 128) float32


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor  # (B, T, 2): text ids, codec ids
    codec_ids: torch.Tensor  # (B, T, 16): every codebook of each frame at its position
    ref_mels: torch.Tensor | list[torch.Tensor]  # (B, frames, 128); a list of (1, frames_i, 128) when references differ in length
    attention_mask: torch.Tensor  # (B, T) int64
    text_embedding_mask: torch.Tensor  # (B, T, 1) bool
    codec_embedding_mask: torch.Tensor  # (B, T, 1) bool
    labels: torch.Tensor  # (B, T): code 0 / codec eos at their positions, -100 elsewhere
    codec_mask: torch.Tensor  # (B, T) bool: the frames

    @property
    def frames(self) -> int:
        return int(self.codec_mask.sum())


class SpeakerExamples:
    """Prepared rows (`text`, `audio_codes`, `ref_audio`) -> `Example`s, tokenized with the model's
    text tokenizer; each distinct reference's mels are computed once."""

    def __init__(self, rows: list[dict], tokenizer, load_reference) -> None:
        """`load_reference(path) -> float32 mono 24 kHz samples` (the data stage's loader)."""
        self.rows = rows
        self.tokenizer = tokenizer
        self.load_reference = load_reference
        self._mels: dict[str, torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Example:
        row = self.rows[i]
        ids = self.tokenizer.encode(assistant_text(row["text"]))
        text_ids = torch.tensor([ids], dtype=torch.long)[:, :-5]
        codes = torch.tensor(row["audio_codes"], dtype=torch.long)
        return Example(text_ids, codes, self.reference_mels(str(row["ref_audio"])))

    def reference_mels(self, path: str) -> torch.Tensor:
        if path not in self._mels:
            audio = np.asarray(self.load_reference(Path(path)), dtype=np.float32)
            with torch.inference_mode():
                self._mels[path] = speaker_mels(audio).clone()
        return self._mels[path]


def collate(examples: list[Example], cfg: Qwen3TTSConfig) -> Batch:
    """Lay `examples` out as one batch (see the module docstring), exactly as upstream's collate."""
    talker = cfg.talker
    lengths = [e.text_ids.shape[1] + e.codes.shape[0] for e in examples]
    b, t = len(examples), max(lengths) + 8
    input_ids = torch.zeros((b, t, 2), dtype=torch.long)
    codec_ids = torch.zeros((b, t, talker.num_code_groups), dtype=torch.long)
    text_mask = torch.zeros((b, t), dtype=torch.bool)
    codec_embed_mask = torch.zeros((b, t), dtype=torch.bool)
    codec_mask = torch.zeros((b, t), dtype=torch.bool)
    attention = torch.zeros((b, t), dtype=torch.long)
    labels = torch.full((b, t), IGNORE, dtype=torch.long)
    prefix = torch.tensor([talker.codec_nothink_id, talker.codec_think_bos_id, talker.codec_think_eos_id, 0, talker.codec_pad_id])
    for i, e in enumerate(examples):
        n_text, n = e.text_ids.shape[1], e.codes.shape[0]
        words = e.text_ids[0]
        eos = 8 + n_text - 3  # the text's eos; the codec's bos is one later, its first frame two later
        first, end = eos + 2, eos + 2 + n  # frames [first, end); the codec eos at `end`
        used = end + 1  # = 8 + n_text + n
        # text channel
        input_ids[i, :ROLE_TOKENS, 0] = words[:ROLE_TOKENS]
        input_ids[i, 3:7, 0] = cfg.tts_pad_id
        input_ids[i, 7, 0] = cfg.tts_bos_id
        input_ids[i, 8:eos, 0] = words[ROLE_TOKENS:]
        input_ids[i, eos, 0] = cfg.tts_eos_id
        input_ids[i, eos + 1 : used, 0] = cfg.tts_pad_id
        text_mask[i, :used] = True
        # codec channel
        input_ids[i, 3:8, 1] = prefix
        input_ids[i, 8 : eos + 1, 1] = talker.codec_pad_id
        input_ids[i, eos + 1, 1] = talker.codec_bos_id
        input_ids[i, first:end, 1] = e.codes[:, 0]
        input_ids[i, end, 1] = talker.codec_eos_id
        labels[i, first:end] = e.codes[:, 0]
        labels[i, end] = talker.codec_eos_id
        codec_ids[i, first:end] = e.codes
        codec_embed_mask[i, 3:used] = True
        codec_embed_mask[i, SPEAKER_POSITION] = False
        codec_mask[i, first:end] = True
        attention[i, :used] = 1
    mels = [e.ref_mels for e in examples]
    # upstream concatenates (and so needs references of one length); koe keeps unequal ones apart
    ref_mels = torch.cat(mels, dim=0) if len({m.shape for m in mels}) == 1 else mels
    return Batch(input_ids, codec_ids, ref_mels, attention, text_mask.unsqueeze(-1), codec_embed_mask.unsqueeze(-1), labels, codec_mask)
