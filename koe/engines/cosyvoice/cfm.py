"""CosyVoice's conditional flow matching sampler (upstream's `CausalConditionalCFM`), shared by the
v2 U-Net and the v3 DiT estimators.

Starting noise: not drawn per call. Upstream reseeds torch with 0 when it builds the decoder and
draws `randn(1, 80, 15000)` once (300 s of 50 Hz frames); every call starts from its first T
frames. koe draws the same tensor from a private generator seeded with 0 (`start_noise`), so the
values do not depend on the global generator or on what was built before.

Solver: 10 Euler steps over a cosine schedule `1 - cos(linspace(0, 1, 11) * pi/2)`, each step the
estimator on a batch of two (conditioned; unconditioned: mu, speaker and prompt zeroed) and
classifier-free guidance `(1 + r) v_c - r v_u` with r = 0.7, as upstream computes it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

__all__ = ["MAX_FRAMES", "solve", "start_noise"]

MAX_FRAMES = 50 * 300


@functools.lru_cache(maxsize=1)
def _noise() -> torch.Tensor:
    return torch.randn([1, 80, MAX_FRAMES], generator=torch.Generator().manual_seed(0))


def start_noise(frames: int) -> torch.Tensor:
    """The first `frames` of upstream's precomputed noise (1, 80, frames)."""
    if frames > MAX_FRAMES:
        raise ValueError(f"the flow makes at most {MAX_FRAMES} mel frames (300 s) per call, as upstream's noise table; asked for {frames}")
    return _noise()[:, :, :frames]


def solve(
    estimator: Callable[..., torch.Tensor],
    mu: torch.Tensor,
    mask: torch.Tensor,
    spks: torch.Tensor,
    cond: torch.Tensor,
    n_timesteps: int = 10,
    cfg_rate: float = 0.7,
    temperature: float = 1.0,
    streaming: bool = False,
) -> torch.Tensor:
    """mu, cond (1, 80, T), mask (1, 1, T), spks (1, 80) -> the sampled mel (1, 80, T), float32."""
    z = start_noise(mu.size(2)).to(mu.device).to(mu.dtype) * temperature
    t_span = torch.linspace(0, 1, n_timesteps + 1, device=mu.device, dtype=mu.dtype)
    t_span = 1 - torch.cos(t_span * 0.5 * torch.pi)
    x = z
    t, dt = t_span[0], t_span[1] - t_span[0]
    t = t.unsqueeze(dim=0)
    length = x.size(2)
    x_in = torch.zeros([2, 80, length], device=x.device, dtype=spks.dtype)
    mask_in = torch.zeros([2, 1, length], device=x.device, dtype=spks.dtype)
    mu_in = torch.zeros([2, 80, length], device=x.device, dtype=spks.dtype)
    t_in = torch.zeros([2], device=x.device, dtype=spks.dtype)
    spks_in = torch.zeros([2, 80], device=x.device, dtype=spks.dtype)
    cond_in = torch.zeros([2, 80, length], device=x.device, dtype=spks.dtype)
    for step in range(1, len(t_span)):
        x_in[:] = x
        mask_in[:] = mask
        mu_in[0] = mu
        t_in[:] = t.unsqueeze(0)
        spks_in[0] = spks
        cond_in[0] = cond
        velocity = estimator(x_in, mask_in, mu_in, t_in, spks_in, cond_in, streaming)
        v_cond, v_uncond = torch.split(velocity, [x.size(0), x.size(0)], dim=0)
        velocity = (1.0 + cfg_rate) * v_cond - cfg_rate * v_uncond
        x = x + dt * velocity
        t = t + dt
        if step < len(t_span) - 1:
            dt = t_span[step + 1] - t
    return x.float()
