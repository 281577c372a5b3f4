"""SoVITS v3/v4's conditional flow matching (upstream's `CFM.inference` in `module/models.py`):
SoVITS features and a reference mel -> mel frames, by Euler steps of the DiT's velocity.

Upstream's sampler, in its order:
- one normal draw `randn(B, mel, T) * temperature` (torch's global generator upstream; here the
  caller's `generator`, the same numbers for the same seed);
- the reference mel written into the first `prompt_len` frames of the condition (`prompt_x`, zeros
  after), and those frames of x set to 0;
- `n_timesteps` steps with `d = 1 / n_timesteps`: the velocity at t (a Python float grown by `t + d`,
  made a tensor as `ones(B) * t` each step), optionally guided (`v + (v - v_uncond) * cfg_rate`,
  the unconditional pass dropping the reference and the features), then `x = x + d * v` and the
  prompt frames zeroed again.
The features' embedding and the step-size embedding are computed on the first step and reused (upstream's
conditioner cache, on by default): the same values every step, computed once.
"""

from __future__ import annotations

import torch
from torch import nn

from koe.engines.gpt_sovits.dit import DiT, DiTConfig

__all__ = ["CFM"]


class CFM(nn.Module):
    """`cfm`: holds the DiT as `estimator` (the released names: `cfm.estimator.*`)."""

    def __init__(self, config: DiTConfig | None = None) -> None:
        super().__init__()
        self.estimator = DiT(config)
        self.mel_dim = self.estimator.config.mel_dim

    @torch.inference_mode()
    def inference(
        self,
        mu: torch.Tensor,
        prompt: torch.Tensor,
        n_timesteps: int,
        temperature: float = 1.0,
        cfg_rate: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """mu (B, T, text_dim) features (upstream's layout), prompt (B, mel, P) the reference mel
        (normalised; P <= T frames) -> mel (B, mel, T), the first P frames zero."""
        if mu.dim() != 3 or prompt.dim() != 3 or prompt.shape[1] != self.mel_dim:
            raise ValueError(f"CFM takes features (B, T, C) and a prompt mel (B, {self.mel_dim}, P), not {tuple(mu.shape)} and {tuple(prompt.shape)}")
        if n_timesteps < 1:
            raise ValueError(f"n_timesteps must be >= 1, not {n_timesteps}")
        batch, frames = mu.shape[0], mu.shape[1]
        x = torch.randn([batch, self.mel_dim, frames], generator=generator, device=mu.device, dtype=mu.dtype) * temperature
        prompt_len = prompt.shape[-1]
        prompt_x = torch.zeros_like(x, dtype=mu.dtype)
        prompt_x[..., :prompt_len] = prompt[..., :prompt_len]
        x[..., :prompt_len] = 0
        mu = mu.transpose(2, 1)  # (B, C, T)
        dit = self.estimator
        t = 0
        d = 1 / n_timesteps
        step = dit.embed_step(torch.ones(batch, device=x.device, dtype=mu.dtype) * d)
        features = dit.embed_features(mu)
        uncond = dit.embed_features(mu, drop=True) if cfg_rate > 1e-5 else None
        for _ in range(n_timesteps):
            time = torch.ones(batch, device=x.device, dtype=mu.dtype) * t
            v = dit(x, prompt_x, time, step, features).transpose(2, 1)
            if uncond is not None:
                neg = dit(x, prompt_x, time, step, uncond, drop_cond=True).transpose(2, 1)
                v = v + (v - neg) * cfg_rate
            x = x + d * v
            t = t + d
            x[:, :, :prompt_len] = 0
        return x
