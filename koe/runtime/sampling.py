"""Token sampling, small and pure.

Order of the processors (as transformers applies them, which is what upstream TTS code runs):
  1. repetition penalty over the ids generated so far (divide positive logits, multiply negative),
  2. min-new-tokens: end-of-sequence ids forbidden while fewer than `min_new_tokens` were made,
  3. suppressed ids set to -inf,
  then, only when sampling:
  4. temperature (`logits / t`, skipped when t == 1),
  5. top-k (keep logits >= the k-th largest, skipped when k == 0),
  6. top-p (drop the low tail whose cumulative probability <= 1 - p, skipped when p >= 1),
  7. the draw: softmax, then one sample per row by the exponential race — or argmax when greedy.

The exponential race, `argmax(probs / q)` with `q ~ Exp(1)` drawn by `exponential_` into a tensor
shaped like `probs`, is exactly what `torch.multinomial(probs, 1)` runs on the CPU (its fast path
for one sample), so ids and the generator's state after the draw equal multinomial's bit for bit
(tests/test_sampling_race.py). It skips multinomial's input checks, each of which is a host sync
(`.item()`); a row of NaN or all -inf scores therefore gives an arbitrary id instead of an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingConfig:
    """Settings of one sampler. `top_k=0` and `top_p=1.0` disable those filters."""

    do_sample: bool = True
    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0

    def __post_init__(self) -> None:
        if self.do_sample and not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 when sampling (got {self.temperature}); use do_sample=False for greedy")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (got {self.top_k})")
        if not 0.0 <= self.top_p <= 1.0:
            raise ValueError(f"top_p must be in [0, 1] (got {self.top_p})")
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0 (got {self.repetition_penalty})")


def process_logits(
    logits: torch.Tensor,
    history: torch.Tensor,
    config: SamplingConfig,
    *,
    eos_ids: torch.Tensor | None = None,
    suppress_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Apply steps 1-6 to float32 `logits` (B, V); `history` (B, N) are the ids generated so far."""
    scores = logits
    if config.repetition_penalty != 1.0:
        picked = torch.gather(scores, 1, history)
        picked = torch.where(picked < 0, picked * config.repetition_penalty, picked / config.repetition_penalty)
        scores = scores.scatter(1, history, picked)
    if eos_ids is not None and history.shape[-1] < config.min_new_tokens:
        eos_mask = torch.isin(torch.arange(scores.shape[-1], device=scores.device), eos_ids)
        scores = torch.where(eos_mask, -math.inf, scores)
    if suppress_mask is not None:
        scores = torch.where(suppress_mask, -math.inf, scores)
    if not config.do_sample:
        return scores
    if config.temperature != 1.0:
        scores = scores / config.temperature
    if config.top_k:
        k = min(config.top_k, scores.shape[-1])
        scores = scores.masked_fill(scores < torch.topk(scores, k)[0][..., -1, None], -math.inf)
    if config.top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(scores, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative <= (1 - config.top_p)
        drop_sorted[..., -1:] = False
        scores = scores.masked_fill(drop_sorted.scatter(1, sorted_idx, drop_sorted), -math.inf)
    return scores


def draw(scores: torch.Tensor, config: SamplingConfig, generator: torch.Generator | None = None) -> torch.Tensor:
    """Step 7: (B, V) processed scores -> (B,) ids."""
    if not config.do_sample:
        return torch.argmax(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    return exponential_race(probs, generator)


def exponential_race(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, V) probabilities -> (B,) ids, one draw per row; same ids and generator state as
    `torch.multinomial(probs, 1, generator=generator).squeeze(1)` on the CPU, without its syncs."""
    q = torch.empty_like(probs).exponential_(1, generator=generator)
    torch.div(probs, q, out=q)  # as multinomial does: q = probs / q
    return torch.argmax(q, dim=-1)
