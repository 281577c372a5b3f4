"""Sync-free sampling with its settings in device tensors: what a captured decode graph samples with.

Order of the processors (the order of `koe.runtime.sampling`, which is transformers' order):
  1. repetition penalty on the ids seen so far (`seen` (B, V) bool; divide positive logits,
     multiply negative; a penalty of 1 leaves the bits unchanged),
  2. min-new-tokens: end-of-sequence ids forbidden while fewer than `min_new_tokens` were drawn,
  3. suppressed ids set to -inf,
  -> the greedy scores; a greedy row draws their argmax. Sampled rows go on:
  4. temperature (`scores / t`),
  5. top-k (keep scores >= the k-th largest; k = 0 keeps all),
  6. top-p (drop the low tail whose cumulative probability <= 1 - p; p >= 1 keeps all),
  7. the draw: the exponential race `argmax(softmax(scores) / E)`, E ~ Exp(1) i.i.d., which picks
     index i with probability p_i exactly as `torch.multinomial` does, without its host syncs.

Every setting is a per-row tensor (`SamplingTensors`), so one captured graph serves any request's
settings (and a batch may mix them); nothing here branches on a value, calls `.item()` or syncs.

The Exp(1) noise is counter-based: a 32-bit integer hash of (row seed, draw counter, stream,
vocabulary index), so it needs no generator state inside a graph, is the same on replay and in
eager runs, and is reproducible from the seed alone. The hash keeps every intermediate product
below 2**63, so int64 arithmetic never overflows on any device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch

from koe.runtime.sampling import SamplingConfig

_M32 = 0xFFFFFFFF
_MIX = 0x45D9F3B  # < 2**27: x (< 2**32) * _MIX < 2**59
_GOLDEN = 0x9E3779B9


@dataclass
class SamplingTensors:
    """Per-row sampling settings (B,) on one device. Fill in place with `fill_` (no recapture)."""

    do_sample: torch.Tensor  # bool
    temperature: torch.Tensor  # float32 (1 for greedy rows)
    top_k: torch.Tensor  # int64, 0 = off
    keep_tail: torch.Tensor  # float32: 1 - top_p computed in float64 as sampling.py does; <= 0 = off
    top_p_on: torch.Tensor  # bool: top_p < 1
    repetition_penalty: torch.Tensor  # float32
    min_new_tokens: torch.Tensor  # int64

    @classmethod
    def allocate(cls, batch: int, device: torch.device | str) -> SamplingTensors:
        return cls(
            do_sample=torch.zeros(batch, dtype=torch.bool, device=device),
            temperature=torch.ones(batch, dtype=torch.float32, device=device),
            top_k=torch.zeros(batch, dtype=torch.long, device=device),
            keep_tail=torch.zeros(batch, dtype=torch.float32, device=device),
            top_p_on=torch.zeros(batch, dtype=torch.bool, device=device),
            repetition_penalty=torch.ones(batch, dtype=torch.float32, device=device),
            min_new_tokens=torch.zeros(batch, dtype=torch.long, device=device),
        )

    @classmethod
    def from_configs(cls, configs: SamplingConfig | list[SamplingConfig], batch: int, device: torch.device | str) -> SamplingTensors:
        out = cls.allocate(batch, device)
        out.fill_(configs)
        return out

    def fill_(self, configs: SamplingConfig | list[SamplingConfig]) -> None:
        """Write settings in place: one config for every row, or one per row (rows past the list
        repeat the last config). Host-to-device copies only; no sync."""
        batch = self.do_sample.shape[0]
        if isinstance(configs, SamplingConfig):
            configs = [configs]
        rows = [configs[min(i, len(configs) - 1)] for i in range(batch)]
        host = {
            "do_sample": torch.tensor([c.do_sample for c in rows], dtype=torch.bool),
            "temperature": torch.tensor([c.temperature if c.do_sample else 1.0 for c in rows], dtype=torch.float32),
            "top_k": torch.tensor([c.top_k for c in rows], dtype=torch.long),
            "keep_tail": torch.tensor([1 - c.top_p for c in rows], dtype=torch.float32),
            "top_p_on": torch.tensor([c.top_p < 1.0 for c in rows], dtype=torch.bool),
            "repetition_penalty": torch.tensor([c.repetition_penalty for c in rows], dtype=torch.float32),
            "min_new_tokens": torch.tensor([c.min_new_tokens for c in rows], dtype=torch.long),
        }
        for f in fields(self):
            getattr(self, f.name).copy_(host[f.name], non_blocking=True)


def process_scores(
    logits: torch.Tensor,
    params: SamplingTensors,
    *,
    seen: torch.Tensor | None = None,
    drawn: torch.Tensor | None = None,
    eos_mask: torch.Tensor | None = None,
    suppress_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 logits (B, V) -> (greedy scores after steps 1-3, sampling scores after steps 1-6).

    `seen` (B, V) bool marks ids drawn so far; `drawn` (scalar or (B,)) counts them for
    min-new-tokens with `eos_mask` (V,) bool; `suppress_mask` (V,) bool.
    """
    scores = logits
    if seen is not None:
        penalty = params.repetition_penalty[:, None]
        penalized = torch.where(scores < 0, scores * penalty, scores / penalty)
        scores = torch.where(seen, penalized, scores)
    if eos_mask is not None and drawn is not None:
        early = (drawn < params.min_new_tokens)[:, None]  # (B, 1)
        scores = torch.where(eos_mask & early, -math.inf, scores)
    if suppress_mask is not None:
        scores = torch.where(suppress_mask, -math.inf, scores)
    greedy = scores

    scores = scores / params.temperature[:, None]
    vocab = scores.shape[-1]
    ranked = torch.sort(scores, dim=-1, descending=True)[0]  # (B, V)
    kth = ranked.gather(1, (params.top_k.clamp(1, vocab) - 1)[:, None])  # (B, 1): k-th largest
    kth = torch.where((params.top_k > 0)[:, None], kth, -math.inf)
    scores = scores.masked_fill(scores < kth, -math.inf)

    sorted_scores, order = torch.sort(scores, dim=-1, descending=False)
    cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
    drop_sorted = cumulative <= params.keep_tail[:, None]
    drop_sorted[..., -1:] = False
    drop = drop_sorted.scatter(1, order, drop_sorted) & params.top_p_on[:, None]
    return greedy, scores.masked_fill(drop, -math.inf)


def race(scores: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Step 7: (B, V) sampling scores and Exp(1) noise -> (B,) ids, drawn with probability softmax(scores)."""
    probs = torch.softmax(scores, dim=-1)
    return torch.argmax(probs / noise, dim=-1)


def choose(greedy: torch.Tensor, scores: torch.Tensor, noise: torch.Tensor, params: SamplingTensors) -> torch.Tensor:
    """Per row: the race over `scores` where sampling, argmax of `greedy` elsewhere -> (B,) int64."""
    return torch.where(params.do_sample, race(scores, noise), torch.argmax(greedy, dim=-1))


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (bijective on [0, 2**32)) of int64 `x` in [0, 2**32)."""
    x = ((x >> 16) ^ x) * _MIX & _M32
    x = ((x >> 16) ^ x) * _MIX & _M32
    return (x >> 16) ^ x


def vocab_keys(vocab: int, device: torch.device | str) -> torch.Tensor:
    """Hashed vocabulary indices (V,) int64: a constant to combine with per-draw keys."""
    return mix32(torch.arange(vocab, dtype=torch.long, device=device) * 2 + 1 & _M32)


def draw_keys(seed: torch.Tensor, counter: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """Per-draw keys (B, S) int64 from row seeds (B,), a draw counter (scalar) and stream ids (S,)."""
    h = mix32(seed & _M32)  # (B,)
    h = mix32(h ^ (counter & _M32))
    return mix32(h[:, None] ^ (streams[None, :] * _GOLDEN & _M32))  # (B, S)


def exponential_noise(keys: torch.Tensor, vocab_key: torch.Tensor) -> torch.Tensor:
    """Exp(1) noise (..., V) float32 for per-draw `keys` (...) and hashed vocabulary `vocab_key` (V,)."""
    x = mix32(keys[..., None] ^ vocab_key)
    x = mix32(x ^ (keys[..., None] >> 7))
    uniform = ((x >> 9).to(torch.float32) + 0.5) * (2.0**-23)  # (0, 1), exact in float32
    return -torch.log(uniform)
