"""OmniVoice's training loss (upstream's `OmniVoice.forward` with labels), on koe's `OmniVoiceLM`.

The padded batch runs whole (B, 8, T) through the bidirectional Qwen3 stack with the collator's
(B, 1, T, T) mask of real keys (padded queries still attend to the real keys, as upstream's SDPA
sees them); the heads score every position; per codebook, the mean cross-entropy over the batch's
tokens that have a label (-100: none), weighted by the config's `audio_codebook_weights` divided
by their sum. No dropout (Qwen3's attention dropout is 0), so the loss draws nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from koe.engines.omnivoice.finetune.pipeline import Batch
from koe.engines.omnivoice.model import OmniVoiceLM

__all__ = ["batch_loss", "codebook_weights"]


def codebook_weights(model: OmniVoiceLM) -> list[float]:
    """The codebooks' weights as upstream normalises them (each over the sum, in Python floats)."""
    weights = model.config.audio_codebook_weights
    total = sum(weights)
    return [w / total for w in weights]


def batch_loss(model: OmniVoiceLM, batch: Batch, device: str | torch.device = "cpu") -> torch.Tensor:
    """The batch's loss (a scalar tensor), as upstream computes it."""
    ids, labels = batch.input_ids.to(device), batch.labels.to(device)
    hidden = model.llm(model.embed(ids, batch.audio_mask.to(device)), batch.position_ids.to(device), batch.attention_mask.to(device))
    b, t, _ = hidden.shape
    n, vocab = model.config.num_audio_codebook, model.config.audio_vocab_size
    logits = model.audio_heads(hidden).view(b, t, n, vocab).permute(0, 2, 1, 3)  # (B, 8, T, V)
    per_token = F.cross_entropy(logits.permute(0, 3, 1, 2), labels, reduction="none", ignore_index=-100)  # (B, 8, T)
    valid = (labels != -100).float()
    means = (per_token * valid).sum(dim=(0, 2)) / valid.sum(dim=(0, 2)).clamp(min=1.0)
    return (means * torch.tensor(codebook_weights(model), device=means.device)).sum()
