"""CosyVoice's speech-token sampling: RAS (repetition-aware sampling), with upstream's draws.

One step, in this order, on the LM's log-probabilities `logp` (V,) float32 (changed in place, as
upstream changes them):
1. before the minimum length, id `speech_token_size` is ruled out (`logp[6561] = -inf`: v2's end
   of speech; v3's start id, whose end id 6562 stays allowed, as upstream has it);
2. nucleus: `softmax(logp)` sorted descending (stable: ties keep id order); the leading
   probabilities are taken while their running float32 sum is below `top_p` and fewer than `top_k`
   are taken; one id is drawn from them (`multinomial` over the unnormalised float32 values);
3. repetition: if that id occurs `win_size * tau_r` times or more among the last `win_size`
   tokens, it is ruled out and one id is drawn again from `softmax(logp)` over the whole
   vocabulary (a second `multinomial`).

Each draw is one `torch.multinomial(1, replacement=True)` from `generator` (torch's global
generator when None), as upstream draws from the global one, so a seeded run gives upstream's ids.
"""

from __future__ import annotations

import torch

from koe.engines.cosyvoice.config import SamplingConfig

__all__ = ["nucleus", "ras_sample"]


def _draw(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    return int(probs.multinomial(1, replacement=True, generator=generator).item())


def nucleus(logp: torch.Tensor, top_p: float, top_k: int, generator: torch.Generator | None) -> int:
    """One id drawn from the smallest set of most likely ids reaching `top_p` (at most `top_k`)."""
    values, ids = logp.softmax(dim=0).sort(descending=True, stable=True)
    head = values[:top_k]
    # The running sum in float32, one addition at a time, compared with top_p in float32: the
    # order and rounding upstream's loop has (a cumsum may accumulate in double).
    limit = torch.tensor(top_p, dtype=values.dtype)
    total = torch.zeros((), dtype=values.dtype)
    taken = 0
    for value in head:
        if not bool(total < limit):
            break
        total = total + value
        taken += 1
    return int(ids[_draw(head[:taken].clone(), generator)].item())


def ras_sample(logp: torch.Tensor, decoded: list[int], config: SamplingConfig, generator: torch.Generator | None = None) -> int:
    """Steps 2 and 3 of the module docstring on `logp` (V,), given the tokens decoded so far."""
    token = nucleus(logp, config.top_p, config.top_k, generator)
    recent = decoded[-config.win_size :]
    if sum(1 for t in recent if t == token) >= config.win_size * config.tau_r:
        logp[token] = -float("inf")
        token = _draw(logp.softmax(dim=0), generator)
    return token
