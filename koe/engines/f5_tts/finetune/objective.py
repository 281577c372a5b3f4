"""The training loss of one batch: conditional flow matching on a random infilling span.

Upstream's `CFM.forward` in training, draw for draw (the same seed gives the same loss, prediction
and gradients): per row a span fraction `uniform_(0.7, 1.0)` and a start (`rand`), the noise
`randn` over the whole padded batch, the flow time `rand` per row (torch's generator, in that
order); then two draws of Python's `random`: the reference audio dropped with probability
`audio_drop_prob`, both audio and text with `cond_drop_prob` (for the whole batch, classifier-free
guidance's unconditional training). The DiT's dropout draws follow, in module order. The loss is
the mean squared error between the predicted and the true flow `x1 - x0` over the span's frames.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from koe.engines.f5_tts.dit import DiT

__all__ = ["Objective", "StepResult", "pad_ids"]


@dataclass(frozen=True)
class StepResult:
    loss: torch.Tensor  # 0-d, with its graph
    pred: torch.Tensor  # (B, n, mels)
    cond: torch.Tensor  # (B, n, mels): the mel with the span zeroed
    drop_audio_cond: bool
    drop_text: bool


@dataclass(frozen=True)
class Objective:
    """Upstream's `CFM` training settings (its constructor's defaults)."""

    audio_drop_prob: float = 0.3
    cond_drop_prob: float = 0.2
    frac_lengths: tuple[float, float] = (0.7, 1.0)
    checkpointed: bool = False  # recompute each DiT block in the backward pass (less memory, the same bits)

    def __call__(self, dit: DiT, mel: torch.Tensor, text: torch.Tensor, lens: torch.Tensor) -> StepResult:
        """mel (B, n, mels) padded with zeros past `lens` (B,); text (B, nt) ids padded with -1."""
        if dit.config.attn_mask_enabled:
            raise ValueError("attn_mask_enabled: padded frames masked inside attention are not supported in training yet")
        batch, frames = mel.shape[:2]
        positions = torch.arange(frames, device=mel.device)
        mask = positions[None, :] < lens[:, None]
        span = _random_span(lens, torch.zeros((batch,), device=mel.device).float().uniform_(*self.frac_lengths)) & mask
        x1 = mel
        x0 = torch.randn_like(x1)
        time = torch.rand((batch,), dtype=mel.dtype, device=mel.device)
        t = time.unsqueeze(-1).unsqueeze(-1)
        noisy = (1 - t) * x0 + t * x1
        flow = x1 - x0
        cond = torch.where(span[..., None], torch.zeros_like(x1), x1)
        drop_audio_cond = random.random() < self.audio_drop_prob
        drop_text = random.random() < self.cond_drop_prob
        drop_audio_cond = drop_audio_cond or drop_text
        pred = dit.forward_batch(noisy, cond, text, time, mask, drop_audio_cond, drop_text, self.checkpointed)
        loss = F.mse_loss(pred, flow, reduction="none")[span].mean()
        return StepResult(loss, pred, cond, drop_audio_cond, drop_text)


def _random_span(lens: torch.Tensor, fractions: torch.Tensor) -> torch.Tensor:
    """(B, max(lens)) True on a span of `fractions * lens` frames at a random start in each row."""
    lengths = (fractions * lens).long()
    start = ((lens - lengths) * torch.rand_like(fractions)).long().clamp(min=0)
    positions = torch.arange(int(lens.max().item()), device=lens.device).long()
    return (positions[None, :] >= start[:, None]) & (positions[None, :] < (start + lengths)[:, None])


def pad_ids(rows: list[list[int]]) -> torch.Tensor:
    """Token id rows -> (B, longest) int64, padded with -1 (upstream's `list_str_to_idx`)."""
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(r, dtype=torch.long) for r in rows], batch_first=True, padding_value=-1)
