"""GPT-SoVITS's token sampling (upstream's `AR.models.utils.sample`), in upstream's order:

  1. repetition penalty over every id in the row so far (the reference's semantic tokens and the
     ones decoded), skipped at 1.0: the picked logits divided (positive) or multiplied (negative)
     by it, written back IN PLACE, so the caller's logits (which upstream's stop check reads with
     argmax) carry the penalty too;
  2. top-p (skipped at >= 1): sort descending, drop ids whose cumulative softmax is > p, the first
     always kept; runs BEFORE the temperature, on the penalised logits;
  3. temperature: `logits / max(t, 1e-5)`, always (a division by 1.0 changes nothing);
  4. top-k: ids below the k-th largest dropped (k >= the vocabulary keeps all);
  5. softmax, and one draw per row by the exponential race: `argmax(p / q)` with
     `q = empty_like(p).exponential_(1)` (koe.runtime.sampling.exponential_race), ids as int32.

One exponential_ of the logits' shape per call, from `generator` (None: torch's global one, as
upstream draws after `TTS.run`'s `torch.manual_seed`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from koe.runtime.sampling import exponential_race

__all__ = ["Sampling", "penalize_", "probabilities", "sample"]


@dataclass(frozen=True)
class Sampling:
    """A request's settings, with `TTS.run`'s defaults."""

    top_k: int = 15
    top_p: float = 1.0
    temperature: float = 1.0
    repetition_penalty: float = 1.35

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 (got {self.top_k}): upstream's top-k always runs")
        if not self.top_p >= 0:
            raise ValueError(f"top_p must be >= 0 (got {self.top_p}; 0 keeps the most likely id)")
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (got {self.temperature}; upstream divides by at least 1e-5)")
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0 (got {self.repetition_penalty})")


def penalize_(logits: torch.Tensor, previous: torch.Tensor | None, penalty: float) -> torch.Tensor:
    """Step 1 on logits (B, V) in place (a view's base changes too); previous (B, N) ids."""
    if previous is None or penalty == 1.0:
        return logits
    previous = previous.long()
    score = torch.gather(logits, dim=1, index=previous)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return logits.scatter_(dim=1, index=previous, src=score)


def probabilities(logits: torch.Tensor, settings: Sampling) -> torch.Tensor:
    """Steps 2-5's probabilities (B, V) of penalised logits (B, V); `logits` is not changed."""
    if settings.top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cum_probs = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)
        drop_sorted = cum_probs > settings.top_p
        drop_sorted[:, 0] = False
        drop = drop_sorted.scatter(dim=1, index=sorted_indices, src=drop_sorted)
        logits = logits.masked_fill(drop, -float("inf"))
    logits = logits / max(settings.temperature, 1e-5)
    v, _ = torch.topk(logits, min(settings.top_k, logits.size(-1)))
    pivot = v[:, -1].unsqueeze(-1)
    logits = torch.where(logits < pivot, -float("inf"), logits)
    return torch.softmax(logits, dim=-1)


def sample(logits: torch.Tensor, previous: torch.Tensor | None, settings: Sampling, generator: torch.Generator | None = None) -> torch.Tensor:
    """One id per row (B, 1) int32 from logits (B, V), penalised in place first (see the module docstring)."""
    probs = probabilities(penalize_(logits, previous, settings.repetition_penalty), settings)
    return exponential_race(probs, generator).unsqueeze(-1).to(torch.int32)
