"""Conditional flow matching sampler: an Euler ODE from noise to mel, with sway sampling and
classifier-free guidance, drawn and stepped as upstream's `CFM.sample` + torchdiffeq's Euler do.

- time grid: for NFE 5, 6, 7, 10, 12, 16 a fixed table of 32nds ("empirically pruned step
  sampling"), else uniform `linspace(0, 1, nfe + 1)`; sway sampling then bends it,
  `t + s * (cos(pi/2 t) - 1 + t)`;
- start noise: one `torch.randn(frames, mels)` from torch's global generator per text batch;
- each step: `v = cond + (cond - uncond) * cfg` from one batch of two (a single pass when
  `cfg < 1e-5`), `y += (t1 - t0) * v`;
- the reference frames are put back over the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from koe.engines.f5_tts.dit import DiT

__all__ = ["FlowSettings", "PRUNED_STEPS", "sample_mel", "time_grid"]

PRUNED_STEPS = {
    5: [0, 2, 4, 8, 16, 32],
    6: [0, 2, 4, 6, 8, 16, 32],
    7: [0, 2, 4, 6, 8, 16, 24, 32],
    10: [0, 2, 4, 6, 8, 12, 16, 20, 24, 28, 32],
    12: [0, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32],
    16: [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32],
}


@dataclass(frozen=True)
class FlowSettings:
    nfe_step: int = 32
    cfg_strength: float = 2.0
    sway_sampling_coef: float | None = -1.0


def time_grid(nfe_step: int, sway: float | None, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """The nfe_step + 1 ODE times from 0 to 1."""
    table = PRUNED_STEPS.get(nfe_step)
    if table is None:
        t = torch.linspace(0, 1, nfe_step + 1, device=device, dtype=dtype)
    else:
        t = (1 / 32) * torch.tensor(table, device=device, dtype=dtype)
    if sway is not None:
        t = t + sway * (torch.cos(torch.pi / 2 * t) - 1 + t)
    return t


@torch.inference_mode()
def sample_mel(
    dit: DiT,
    ref_mel: torch.Tensor,
    text: torch.Tensor,
    frames: int,
    settings: FlowSettings,
    on_step: Callable[[int], None] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Generate a mel (1, frames', mels) that continues `ref_mel` (1, n_ref, mels) for `text` (1, nt) ids.

    `frames` is the total length wanted (reference included); it is raised to at least
    max(text tokens, reference frames) + 1, as upstream does. `on_step(i)` runs before step i
    (cancellation raises from it). The start noise comes from `generator` (torch's global one when
    None: a generator seeded with N draws what the global one does after `torch.manual_seed(N)`).
    """
    n_ref, mels = ref_mel.shape[1], ref_mel.shape[2]
    frames = max(max(int((text != -1).sum()), n_ref) + 1, int(frames))
    frames = min(frames, 65536)
    cond = torch.nn.functional.pad(ref_mel, (0, 0, 0, frames - n_ref), value=0.0)
    cond_mask = (torch.arange(frames, device=ref_mel.device) < n_ref)[None, :, None]
    step_cond = torch.where(cond_mask, cond, torch.zeros_like(cond))

    guided = settings.cfg_strength >= 1e-5
    text_cond, text_uncond = dit.embed_text(text, frames, guided)
    y = torch.randn(frames, mels, device=ref_mel.device, dtype=step_cond.dtype, generator=generator).unsqueeze(0)
    t = time_grid(settings.nfe_step, settings.sway_sampling_coef, step_cond.dtype, ref_mel.device)
    for i in range(len(t) - 1):
        if on_step is not None:
            on_step(i)
        t0 = t[i]
        pred = dit(y, step_cond, t0, text_cond, text_uncond)
        if guided:
            pred, null_pred = torch.chunk(pred, 2, dim=0)
            pred = pred + (pred - null_pred) * settings.cfg_strength
        y = y + (t[i + 1] - t0) * pred
    return torch.where(cond_mask, cond, y)
