"""Random-weight IndexTTS models for tests and benchmarks, written deterministically by koe.

Every tensor of a module's state dict is drawn from one seeded generator in the state dict's order
(koe's modules keep upstream's parameter names), so a seed gives the same file on every machine and
upstream's code loads it with no missing or unexpected keys. Goldens made by upstream from these
weights record `state_sha256` of what they were made from, so a drifted fixture fails loudly.
"""

from __future__ import annotations

import hashlib
import math

import torch


def random_tensor(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Scales near 1 for norms, small biases, N(0, 1) embeddings, N(0, 1/fan_in) elsewhere."""
    leaf = name.rsplit(".", 1)[-1]
    if len(shape) <= 1:
        scale = leaf in ("weight", "gamma", "alpha", "weight_g") or "norm" in name
        return (1.0 if scale else 0.0) + 0.05 * torch.randn(shape, generator=g)
    if "embed" in name or "emb." in name:
        return torch.randn(shape, generator=g)
    return torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))


def random_state(module: torch.nn.Module, seed: int = 0) -> dict[str, torch.Tensor]:
    """A float32 state dict for `module` (integer buffers are kept as they are)."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, t in module.state_dict().items():
        state[name] = random_tensor(name, tuple(t.shape), g) if t.is_floating_point() else t.clone()
    return state


def state_sha256(state: dict[str, torch.Tensor]) -> str:
    """One hash of a state dict's names, shapes, dtypes and bytes, in its order."""
    h = hashlib.sha256()
    for name, t in state.items():
        t = t.detach().contiguous().cpu()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
