"""VoxCPM's local modules: the patch encoder (LocEnc), the patch DiT (LocDiT, V1 and V2) and the
scalar quantiser (FSQ) between the base LM and the residual LM.

Parameter names are the release's (`feat_encoder.*`, `feat_decoder.estimator.*`, `fsq_layer.*`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.voxcpm.config import LMConfig
from koe.engines.voxcpm.minicpm import MiniCPM

__all__ = ["LocalDiT", "LocalEncoder", "ScalarQuantizer", "sinusoidal_embedding"]


class LocalEncoder(nn.Module):
    """A latent patch (P frames of D) -> one vector: a learned token in front of the projected
    frames, a bidirectional MiniCPM over the P + 1 positions, the learned token's output."""

    def __init__(self, cfg: LMConfig, feat_dim: int) -> None:
        super().__init__()
        self.special_token = nn.Parameter(torch.zeros(1, 1, 1, cfg.hidden_size))
        self.in_proj = nn.Linear(feat_dim, cfg.hidden_size, bias=True)
        self.encoder = MiniCPM(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, P, D) -> (B, T, C)."""
        b, t, p, _ = x.shape
        x = self.in_proj(x)
        x = torch.cat([self.special_token.expand(b, t, 1, -1), x], dim=2).reshape(b * t, p + 1, -1)
        return self.encoder(x, causal=False)[:, 0, :].reshape(b, t, -1)


def sinusoidal_embedding(t: torch.Tensor, dim: int, scale: float = 1000) -> torch.Tensor:
    """(N,) times -> (N, dim): sin then cos of `scale * t * exp(-i log(10000) / (dim/2 - 1))`."""
    if t.ndim < 1:
        t = t.unsqueeze(0)
    half = dim // 2
    step = math.log(10000) / (half - 1)
    freqs = torch.exp(torch.arange(half, dtype=t.dtype, device=t.device) * -step)
    emb = scale * t.unsqueeze(1) * freqs.unsqueeze(0)
    return torch.cat((emb.sin(), emb.cos()), dim=-1)


class TimestepMLP(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(dim, dim, bias=True)
        self.linear_2 = nn.Linear(dim, dim, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class LocalDiT(nn.Module):
    """The velocity field of one latent patch: a bidirectional MiniCPM over [condition tokens,
    time, previous patch, noisy patch]. V1 adds the time embedding to the one LM-state token;
    V2 takes the two LM states (base and residual) as two tokens and the time as a third."""

    def __init__(self, cfg: LMConfig, feat_dim: int, v2: bool) -> None:
        super().__init__()
        self.v2 = v2
        self.dim = cfg.hidden_size
        self.in_proj = nn.Linear(feat_dim, cfg.hidden_size, bias=True)
        self.cond_proj = nn.Linear(feat_dim, cfg.hidden_size, bias=True)
        self.out_proj = nn.Linear(cfg.hidden_size, feat_dim, bias=True)
        self.time_mlp = TimestepMLP(cfg.hidden_size)
        self.delta_time_mlp = TimestepMLP(cfg.hidden_size)
        self.decoder = MiniCPM(cfg)

    def forward(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, cond: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        """x (N, D, P) noisy patch, mu (N, C or 2C) LM state(s), t and dt (N,), cond (N, D, P') -> velocity (N, D, P)."""
        x = self.in_proj(x.transpose(1, 2).contiguous())
        cond = self.cond_proj(cond.transpose(1, 2).contiguous())
        prefix = cond.size(1)
        t = self.time_mlp(sinusoidal_embedding(t, self.dim).to(x.dtype))
        dt = self.delta_time_mlp(sinusoidal_embedding(dt, self.dim).to(x.dtype))
        t = t + dt
        if self.v2:
            mu = mu.view(x.size(0), -1, x.size(-1))
            x = torch.cat([mu, t.unsqueeze(1), cond, x], dim=1)
            skip = prefix + mu.size(1) + 1
        else:
            x = torch.cat([(mu + t).unsqueeze(1), cond, x], dim=1)
            skip = prefix + 1
        hidden = self.decoder(x, causal=False)[:, skip:, :]
        return self.out_proj(hidden).transpose(1, 2).contiguous()


class ScalarQuantizer(nn.Module):
    """Project down, tanh, round to `scale` levels per side, project up. In training mode the
    rounding is straight-through (`x + (round(x) - x).detach()`, upstream's form: its value may
    differ from `round(x)` in the last bit)."""

    def __init__(self, dim: int, latent_dim: int, scale: int) -> None:
        super().__init__()
        self.scale = scale
        self.in_proj = nn.Linear(dim, latent_dim)
        self.out_proj = nn.Linear(latent_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.in_proj(x))
        quantized = torch.round(x * self.scale) / self.scale
        return self.out_proj(x + (quantized - x).detach() if self.training else quantized)
