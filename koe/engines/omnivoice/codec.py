"""HiggsAudio-v2's acoustic side: the DAC encoder and decoder and the residual vector quantizer.

Decoding (what speech output needs): each codebook's entry, projected out (`project_out`), summed
over the codebooks in order; `fc2` to the DAC width; the DAC decoder: a 7-tap conv, per upsampling
ratio s a Snake, a transposed conv (kernel 2s, stride s, padding ceil(s/2), output padding s % 2,
as HiggsAudio adjusts transformers' DAC) and three residual units (dilations 1, 3, 9), then Snake
and a 7-tap conv to one channel, without DAC's final tanh. 960 samples per frame at 24 kHz.

Encoding's acoustic branch: the mirror DAC encoder; the RVQ's nearest-entry search is
`AudioTokenizer.encode`'s (with the semantic branch, `koe.engines.omnivoice.semantic`).

Parameter names are the release's (`acoustic_decoder.block.0.conv_t1.weight`, `quantizer.
quantizers.3.codebook.embed`, ...). Snake is upstream's op order: `x + (a + 1e-9).reciprocal() *
sin(a * x).pow(2)` with `a` of shape (1, C, 1). Transposes happen where upstream's do, so the
linear layers see the same strided inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.omnivoice.config import AcousticConfig, AudioTokenizerConfig

__all__ = ["AcousticDecoder", "AcousticEncoder", "Codebook", "ResidualVQ", "Snake1d"]


class Snake1d(nn.Module):
    """x + sin(a x)^2 / (a + 1e-9) per channel on (B, C, T), a (1, C, 1)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + (self.alpha + 1e-9).reciprocal() * torch.sin(self.alpha * x).pow(2)


class ResidualUnit(nn.Module):
    """Snake, 7-tap dilated conv, Snake, 1x1 conv; plus the input (centre-cropped to the output)."""

    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.snake1 = Snake1d(channels)
        self.conv1 = nn.Conv1d(channels, channels, 7, dilation=dilation, padding=3 * dilation)
        self.snake2 = Snake1d(channels)
        self.conv2 = nn.Conv1d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(self.snake2(self.conv1(self.snake1(x))))
        crop = (x.shape[-1] - y.shape[-1]) // 2
        if crop > 0:
            x = x[..., crop:-crop]
        return x + y


class DecoderBlock(nn.Module):
    """Snake, transposed conv up by `stride` (HiggsAudio's output padding), three residual units."""

    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        self.snake1 = Snake1d(channels_in)
        self.conv_t1 = nn.ConvTranspose1d(channels_in, channels_out, 2 * stride, stride=stride, padding=math.ceil(stride / 2), output_padding=stride % 2)
        self.res_unit1 = ResidualUnit(channels_out, 1)
        self.res_unit2 = ResidualUnit(channels_out, 3)
        self.res_unit3 = ResidualUnit(channels_out, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res_unit3(self.res_unit2(self.res_unit1(self.conv_t1(self.snake1(x)))))


class AcousticDecoder(nn.Module):
    """DAC decoder (`acoustic_decoder`): (B, hidden, T) latents -> (B, 1, T * hop) samples."""

    def __init__(self, config: AcousticConfig) -> None:
        super().__init__()
        width = config.decoder_hidden_size
        self.conv1 = nn.Conv1d(config.hidden_size, width, 7, padding=3)
        self.block = nn.ModuleList(DecoderBlock(width // 2**i, width // 2 ** (i + 1), s) for i, s in enumerate(config.upsampling_ratios))
        last = width // 2 ** len(config.upsampling_ratios)
        self.snake1 = Snake1d(last)
        self.conv2 = nn.Conv1d(last, 1, 7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))


class EncoderBlock(nn.Module):
    """Three residual units (dilations 1, 3, 9) at half width, Snake, a strided conv (kernel 2s) to full width."""

    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        half = channels // 2
        self.res_unit1 = ResidualUnit(half, 1)
        self.res_unit2 = ResidualUnit(half, 3)
        self.res_unit3 = ResidualUnit(half, 9)
        self.snake1 = Snake1d(half)
        self.conv1 = nn.Conv1d(half, channels, 2 * stride, stride=stride, padding=math.ceil(stride / 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1(self.snake1(self.res_unit3(self.res_unit2(self.res_unit1(x)))))


class AcousticEncoder(nn.Module):
    """DAC encoder (`acoustic_encoder`): (B, 1, N) samples -> (B, hidden, frames)."""

    def __init__(self, config: AcousticConfig) -> None:
        super().__init__()
        width = config.encoder_hidden_size
        self.conv1 = nn.Conv1d(1, width, 7, padding=3)
        self.block = nn.ModuleList(EncoderBlock(width * 2 ** (i + 1), s) for i, s in enumerate(config.downsampling_ratios))
        last = width * 2 ** len(config.downsampling_ratios)
        self.snake1 = Snake1d(last)
        self.conv2 = nn.Conv1d(last, config.hidden_size, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))

    def output_length(self, length: int) -> int:
        """Frames the convolutions leave of `length` samples (every Conv1d in module order)."""
        for conv in (m for m in self.modules() if isinstance(m, nn.Conv1d)):
            (k,), (s,), (p,), (d,) = conv.kernel_size, conv.stride, conv.padding, conv.dilation
            length = (length + 2 * p - d * (k - 1) - 1) // s + 1
        return length


class Codebook(nn.Module):
    """One codebook (`codebook.embed`, (entries, dim)); the training statistics are not loaded."""

    def __init__(self, entries: int, dim: int) -> None:
        super().__init__()
        self.embed = nn.Parameter(torch.zeros(entries, dim))


class Quantizer(nn.Module):
    """One RVQ stage: `project_in` to the codebook's space, the codebook, `project_out` back."""

    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        self.codebook = Codebook(config.codebook_size, config.codebook_dim)
        self.project_in = nn.Linear(config.hidden_size, config.codebook_dim)
        self.project_out = nn.Linear(config.codebook_dim, config.hidden_size)

    def decode(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> (B, hidden, T)."""
        return self.project_out(F.embedding(ids, self.codebook.embed)).permute(0, 2, 1)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, hidden, T) -> ids (B, T): the entry nearest in Euclidean distance (upstream's arithmetic)."""
        h = self.project_in(x.permute(0, 2, 1))  # (B, T, dim)
        shape = h.shape
        h = h.reshape(-1, shape[-1])
        embed = self.codebook.embed.t()
        dist = -(h.pow(2).sum(1, keepdim=True) - 2 * h @ embed + embed.pow(2).sum(0, keepdim=True))
        return dist.max(dim=-1).indices.view(*shape[:-1])


class ResidualVQ(nn.Module):
    """The residual vector quantizer (`quantizer.quantizers.N`)."""

    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(Quantizer(config) for _ in range(config.num_quantizers))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (B, Q, T) -> (B, hidden, T): the sum of each stage's projected entries, in order."""
        out = torch.zeros((), device=codes.device)
        for stage, ids in zip(self.quantizers, codes.transpose(0, 1), strict=False):
            out = out + stage.decode(ids)
        return out

    def encode(self, x: torch.Tensor, stages: int) -> torch.Tensor:
        """x (B, hidden, T) -> codes (B, stages, T), each stage coding what the earlier ones left."""
        residual, codes = x, []
        for stage in self.quantizers[:stages]:
            ids = stage.encode(residual)
            residual = residual - stage.decode(ids)
            codes.append(ids)
        return torch.stack(codes).transpose(0, 1)
