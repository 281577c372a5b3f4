"""VoxCPM's patch sampler: conditional flow matching solved with Euler steps, as upstream's
`UnifiedCFM` does it at inference.

Per patch: one `randn((B, D, P))` start draw from torch's generator; a time grid `linspace(1, 0,
n + 1)` bent by sway sampling (`t + (cos(pi t / 2) - 1 + t)`); the first `max(1, int(0.04 (n +
1)))` steps move with zero velocity (CFG-zero*'s zero init); the others run the DiT once on a
batch of two — the conditional half with the LM states `mu`, the unconditional half with `mu`
zeroed, both with the same noisy patch, time and previous patch — and guide with the optimised
scale `s* = <v_c, v_u> / (|v_u|^2 + 1e-8)`: `v = s* v_u + cfg (v_c - s* v_u)`. `dt` goes in as
zero unless the model was trained in mean-velocity mode.
"""

from __future__ import annotations

import torch

from koe.engines.voxcpm.local import LocalDiT

__all__ = ["sample_patch", "time_grid"]


def time_grid(steps: int, dtype: torch.dtype, device: torch.device, sway: float = 1.0) -> torch.Tensor:
    t = torch.linspace(1, 0, steps + 1, device=device, dtype=dtype)
    return t + sway * (torch.cos(torch.pi / 2 * t) - 1 + t)


def sample_patch(
    dit: LocalDiT,
    mu: torch.Tensor,
    cond: torch.Tensor,
    patch_size: int,
    steps: int,
    cfg_value: float,
    mean_mode: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One latent patch: mu (B, C) LM states, cond (B, D, P) the previous patch -> (B, D, P)."""
    b = mu.shape[0]
    channels = cond.shape[1]
    x = torch.randn((b, channels, patch_size), device=mu.device, dtype=mu.dtype, generator=generator)
    grid = time_grid(steps, mu.dtype, mu.device)
    t, dt = grid[0], grid[0] - grid[1]
    zero_steps = max(1, int(len(grid) * 0.04))
    mu_in = torch.zeros([2 * b, mu.size(1)], device=mu.device, dtype=mu.dtype)
    mu_in[:b] = mu
    cond_in = torch.cat([cond, cond], dim=0)
    for step in range(1, len(grid)):
        if step <= zero_steps:
            velocity = torch.zeros_like(x)
        else:
            x_in = torch.cat([x, x], dim=0)
            t_in = t.expand(2 * b).contiguous()
            dt_in = dt.expand(2 * b).contiguous() if mean_mode else torch.zeros(2 * b, device=mu.device, dtype=mu.dtype)
            v_cond, v_uncond = dit(x_in, mu_in, t_in, cond_in, dt_in).split([b, b], dim=0)
            positive, negative = v_cond.reshape(b, -1), v_uncond.reshape(b, -1)
            s = torch.sum(positive * negative, dim=1, keepdim=True) / (torch.sum(negative**2, dim=1, keepdim=True) + 1e-8)
            s = s.view(b, *([1] * (v_cond.dim() - 1)))
            velocity = v_uncond * s + cfg_value * (v_cond - v_uncond * s)
        x = x - dt * velocity
        t = t - dt
        if step < len(grid) - 1:
            dt = t - grid[step + 1]
    return x
