"""IndexTTS 2's conditional flow matching: an Euler solve from noise to mel, the reference mel as prompt.

`FlowMatching.inference(mu, x_lens, prompt, style, steps, cfg_rate)` is upstream's `CFM.inference`:
- one draw from torch's global generator, `torch.randn([B, in_channels, T])` (T = mu's frames);
- times `torch.linspace(0, 1, steps + 1)`; the prompt's frames of the noise are zeroed and the
  prompt mel goes into `prompt_x` (zeros after it);
- per step: the estimator's velocity; with `cfg_rate > 0` the conditioned and the unconditioned
  inputs (prompt, style and mu zeroed) run as one batch of 2B and combine as
  `(1 + cfg) v_cond - cfg v_uncond`; `x = x + dt v`, `t = t + dt`, and the prompt's frames of x
  are zeroed again (also after the last step: the output's first `prompt` frames are zeros).
  Since those frames' velocity is never read, the estimator's head skips them (`from_frame`).
The same ops on the same shapes as upstream, so CPU float32 gives its bits after the same seed.
"""

from __future__ import annotations

import torch
from torch import nn

from .dit import DiT, DiTConfig

__all__ = ["FlowMatching"]


class FlowMatching(nn.Module):
    """The decoder `cfm` of `s2mel.pth` (its one child: `estimator`)."""

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        self.config = config
        self.estimator = DiT(config)

    @torch.inference_mode()
    def inference(
        self,
        mu: torch.Tensor,
        x_lens: torch.Tensor,
        prompt: torch.Tensor,
        style: torch.Tensor,
        steps: int = 25,
        cfg_rate: float = 0.7,
        temperature: float = 1.0,
    ) -> torch.Tensor:
        """Mel (B, in_channels, T) for condition `mu` (B, T, content_dim) whose first
        `prompt.size(-1)` frames are the reference's; `prompt` (B, in_channels, T_ref) the
        reference mel, `style` (B, style_dim), `x_lens` (B,) or (1,) valid frames. Draws the start
        noise from torch's global generator."""
        if steps < 1:
            raise ValueError(f"steps must be at least 1, got {steps}")
        batch, length = mu.size(0), mu.size(1)
        if prompt.size(-1) > length:
            raise ValueError(f"the prompt ({prompt.size(-1)} frames) is longer than the condition ({length} frames)")
        z = torch.randn([batch, self.config.in_channels, length], device=mu.device) * temperature
        t_span = torch.linspace(0, 1, steps + 1, device=mu.device)
        return self.solve_euler(z, x_lens, prompt, mu, style, t_span, cfg_rate)

    def solve_euler(
        self, x: torch.Tensor, x_lens: torch.Tensor, prompt: torch.Tensor, mu: torch.Tensor, style: torch.Tensor, t_span: torch.Tensor, cfg_rate: float
    ) -> torch.Tensor:
        """Euler steps along `t_span` from `x` (modified in place)."""
        t = t_span[0]
        prompt_len = prompt.size(-1)
        prompt_x = torch.zeros_like(x)
        prompt_x[..., :prompt_len] = prompt[..., :prompt_len]
        x[..., :prompt_len] = 0
        if self.config.zero_prompt_speech_token:
            mu = mu.clone()
            mu[..., :prompt_len] = 0  # upstream's indexing: the last axis of (B, T, C), i.e. channels
        estimator = self.estimator
        for step in range(1, len(t_span)):
            dt = t_span[step] - t_span[step - 1]
            if cfg_rate > 0:
                stacked = estimator(
                    torch.cat([x, x], dim=0),
                    torch.cat([prompt_x, torch.zeros_like(prompt_x)], dim=0),
                    x_lens,
                    torch.cat([t.unsqueeze(0), t.unsqueeze(0)], dim=0),
                    torch.cat([style, torch.zeros_like(style)], dim=0),
                    torch.cat([mu, torch.zeros_like(mu)], dim=0),
                    from_frame=prompt_len,
                )
                velocity, unconditioned = stacked.chunk(2, dim=0)
                velocity = (1.0 + cfg_rate) * velocity - cfg_rate * unconditioned
            else:
                velocity = estimator(x, prompt_x, x_lens, t.unsqueeze(0), style, mu, from_frame=prompt_len)
            x = x + dt * velocity
            t = t + dt
            x[:, :, :prompt_len] = 0
        return x
