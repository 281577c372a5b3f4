"""Opt-in LoRA for speaker fine-tuning: low-rank adapters instead of training every weight.

Not upstream's recipe (which trains all weights): a LoRA run has its own results, and koe names
it in the run's settings. What it changes: every attention and MLP projection of the talker and
of the code predictor (`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`,
`down_proj`) becomes `W x + (alpha / rank) * B A x` with A (rank x in) and B (out x rank) the only
trained tensors; the embeddings, the norms and the heads stay as the base model has them. B
starts at zero, so the first step's loss is the base model's exactly. At export the adapters are
merged (`W + (alpha / rank) * B A`), so the folder is a plain CustomVoice model in the released
layout. The gain is memory: no gradients or AdamW moments for the base weights (for the 1.7B
talker, rank 16 trains about 1% of the parameters), which lets the float32 run fit a 24 GB
machine.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoRALinear(nn.Module):
    """A frozen `nn.Linear` plus a trained low-rank update (see the module docstring)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, generator: torch.Generator) -> None:
        super().__init__()
        self.base = base
        self.rank, self.scale = rank, alpha / rank
        a = torch.empty(rank, base.in_features)
        bound = 1 / math.sqrt(base.in_features)  # kaiming-uniform with a = sqrt(5), as nn.Linear and PEFT start A
        a.uniform_(-bound, bound, generator=generator)
        w = base.weight
        self.lora_A = nn.Parameter(a.to(device=w.device, dtype=w.dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + F.linear(F.linear(x, self.lora_A), self.lora_B) * self.scale

    def merged_weight(self) -> torch.Tensor:
        w = self.base.weight
        return (w.float() + (self.lora_B.float() @ self.lora_A.float()) * self.scale).to(w.dtype)


def add_lora(net: nn.Module, rank: int, alpha: float, seed: int) -> int:
    """Freeze every parameter of `net` and wrap its talker's and code predictor's projections in
    LoRA; returns the number of trained parameters. A is drawn from its own generator (`seed`), so
    the data order's draws are unchanged."""
    if rank < 1:
        raise ValueError(f"LoRA rank must be at least 1 (got {rank})")
    for p in net.parameters():
        p.requires_grad_(False)
    talker = net.talker
    generator = torch.Generator().manual_seed(seed)
    trained = 0
    for module in list(talker.modules()):
        for name, child in list(module.named_children()):
            if name in TARGETS and isinstance(child, nn.Linear):
                wrapped = LoRALinear(child, rank, alpha, generator)
                setattr(module, name, wrapped)
                trained += wrapped.lora_A.numel() + wrapped.lora_B.numel()
    return trained


def adapters(talker: nn.Module) -> dict[str, torch.Tensor]:
    """The trained tensors only (`...q_proj.lora_A`, `...lora_B`): what a checkpoint keeps."""
    return {k: v for k, v in talker.state_dict().items() if k.endswith((".lora_A", ".lora_B"))}


def merged_state(talker: nn.Module) -> dict[str, torch.Tensor]:
    """The talker's state dict in the released names, every adapter merged into its weight."""
    wrapped = {name: m for name, m in talker.named_modules() if isinstance(m, LoRALinear)}
    state = {}
    for key, value in talker.state_dict().items():
        owner, _, leaf = key.rpartition(".")
        if owner in wrapped:  # the adapter's own tensors: merged below
            continue
        if owner.endswith(".base") and owner[: -len(".base")] in wrapped:
            key = f"{owner[: -len('.base')]}.{leaf}"
        state[key] = value
    for name, module in wrapped.items():
        state[f"{name}.weight"] = module.merged_weight().detach()
    return state
