"""Convolutional blocks of neural vocoders and codecs (Vocos, BigVGAN, HiFi-GAN, the Qwen codec).

Causal convs are padded on the left only (plus what completes a strided conv's last window);
op order follows the reference implementations, because float32 bits depend on it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def causal_extra_padding(length: int, kernel_size: int, stride: int, padding: int) -> int:
    """Right padding so that the last window of a causal strided conv is complete."""
    # ceil((length - kernel_size + padding) / stride) windows after the first one
    n_windows = -(-(length - kernel_size + padding) // stride)
    ideal_length = n_windows * stride + (kernel_size - padding)
    return ideal_length - length


class CausalConv1d(nn.Module):
    """Conv1d padded on the left (kernel - stride) and on the right to complete the last window."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        dilation: int = 1,
        stride: int = 1,
        groups: int = 1,
        bias: bool = True,
        pad_mode: str = "constant",
    ) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, groups=groups, bias=bias)
        self.stride = stride
        self.kernel_size = (kernel_size - 1) * dilation + 1
        self.padding = self.kernel_size - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, T) -> (B, C_out, ceil(T / stride))."""
        extra = causal_extra_padding(x.shape[-1], self.kernel_size, self.stride, self.padding)
        if self.pad_mode == "constant":
            x = F.pad(x, (self.padding, extra), mode="constant", value=0)
        else:
            x = F.pad(x, (self.padding, extra), mode=self.pad_mode)
        return self.conv(x)


class CausalConvTranspose1d(nn.Module):
    """ConvTranspose1d with its (kernel - stride) trailing samples cut off: (B, C, T) -> (B, C', T * stride)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)
        self.right_pad = kernel_size - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.right_pad > 0:
            x = x[..., : x.shape[-1] - self.right_pad]
        return x.contiguous()


def _snake(x: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """x + sin(x * alpha)^2 / (beta + 1e-9), alpha and beta (1, C, 1)."""
    return x + (1.0 / (beta + 0.000000001)) * torch.pow(torch.sin(x * alpha), 2)


class SnakeBeta(nn.Module):
    """x + sin(x * a)^2 / (b + 1e-9) per channel on (B, C, T); a = e^alpha, b = e^beta when
    `logscale` (BigVGAN's option, the Qwen codec's choice), else the parameters themselves."""

    def __init__(self, channels: int, logscale: bool = True) -> None:
        super().__init__()
        self.logscale = logscale
        self.alpha = nn.Parameter(torch.zeros(channels) if logscale else torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels) if logscale else torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha, beta = self.alpha.unsqueeze(0).unsqueeze(-1), self.beta.unsqueeze(0).unsqueeze(-1)  # (1, C, 1)
        if self.logscale:
            alpha, beta = torch.exp(alpha), torch.exp(beta)
        return _snake(x, alpha, beta)


class Snake(nn.Module):
    """Snake (one parameter per channel): x + sin(x * a)^2 / (a + 1e-9) on (B, C, T)."""

    def __init__(self, channels: int, logscale: bool = False) -> None:
        super().__init__()
        self.logscale = logscale
        self.alpha = nn.Parameter(torch.zeros(channels) if logscale else torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.unsqueeze(0).unsqueeze(-1)  # (1, C, 1)
        if self.logscale:
            alpha = torch.exp(alpha)
        return _snake(x, alpha, alpha)


class ConvNeXtBlock(nn.Module):
    """Depthwise conv, LayerNorm, pointwise MLP (GELU), per-channel scale, residual: (B, C, T) -> (B, C, T).

    `causal`: the depthwise conv is a `CausalConv1d` (Qwen codec, `dwconv.conv.*`), else a centred
    `nn.Conv1d` (Vocos, `dwconv.*`). `layer_scale`: initial `gamma`, None for none.
    """

    def __init__(
        self, dim: int, intermediate_dim: int | None = None, kernel_size: int = 7, causal: bool = True, layer_scale: float | None = 1e-6, eps: float = 1e-6
    ) -> None:
        super().__init__()
        hidden = intermediate_dim or 4 * dim
        self.dwconv: nn.Module = (
            CausalConv1d(dim, dim, kernel_size, groups=dim) if causal else nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim)
        )
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.pwconv1 = nn.Linear(dim, hidden)
        self.pwconv2 = nn.Linear(hidden, dim)
        self.gamma = (
            None if layer_scale is None else nn.Parameter(torch.full((dim,), float(layer_scale)))
        )  # no scalar x meta tensor: that imports torch._dynamo (~1 s of a load)

    def pointwise(self, h: torch.Tensor) -> torch.Tensor:
        """The block after its depthwise conv: dwconv output (B, C, T) -> residual branch (B, C, T)."""
        h = h.permute(0, 2, 1)  # (B, T, C)
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        if self.gamma is not None:
            h = self.gamma * h
        return h.permute(0, 2, 1)  # (B, C, T)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pointwise(self.dwconv(x))
