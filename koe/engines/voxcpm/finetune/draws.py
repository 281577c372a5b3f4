"""The draws upstream's trainer makes from torch's generator before its first batch.

Upstream's `train_voxcpm_finetune.py` seeds torch's generator (its `Accelerator(seed=42)`) and
then builds the model: the AudioVAE, then the model itself, every `nn.Linear`/`nn.Conv1d` drawing
its default init (`kaiming_uniform_` on the weight, `uniform_` on the bias), each `nn.Embedding`
a `normal_`, the local encoder's special token a `randn` — and, for a LoRA run, each adapter's A
a `kaiming_uniform_` at the end. The checkpoint then overwrites the weights, but the generator
has moved on, and every later draw (the data order, the flow-matching noise) starts from there.

koe's modules hold the same parameters in upstream's construction order, so walking them replays
the same draws: a float32 `uniform_` takes one 32-bit number per element whatever the call's size
(consecutive ones are drawn in one call), a `normal_` is replayed on a tensor of its own shape
(small and large `normal_` calls draw differently). Norm weights, weight-norm gains and Snake
alphas start at constants and draw nothing. tests/engines/voxcpm checks the generator's state
against upstream's after construction, for both architectures, with and without LoRA.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import torch
from torch import nn

__all__ = ["replay_construction"]

_CHUNK = 1 << 24  # uniform draws replayed per call (any split draws the same numbers)


def _draws(module: nn.Module) -> Iterator[tuple[str, int | torch.Size]]:
    """("uniform", elements) or ("normal", shape) of each parameter's init, in construction order."""
    for name, p in module.named_parameters():
        if name.endswith(("norm.weight", ".weight_g", ".alpha", ".lora_A", ".lora_B")):  # constants (adapters: drawn apart)
            continue
        if name.endswith(("embed_tokens.weight", "_embed.weight", "special_token")):
            yield "normal", p.shape
        else:
            yield "uniform", p.numel()


def _uniform(n: int) -> None:
    while n > 0:
        torch.empty(min(n, _CHUNK), dtype=torch.float32).uniform_()
        n -= _CHUNK


def replay_construction(vae: nn.Module, model: nn.Module) -> None:
    """Move torch's default generator as upstream's model construction does (AudioVAE, then the
    model; LoRA adapters are drawn by the caller, after)."""
    pending = 0
    for kind, size in chain(_draws(vae), _draws(model)):
        if kind == "uniform":
            pending += size
            continue
        _uniform(pending)
        pending = 0
        torch.empty(size, dtype=torch.float32).normal_()
    _uniform(pending)
