"""SoVITS's semantic codebook (upstream's `ResidualVectorQuantizer` with one quantizer of 1024
rows, 768 wide): HuBERT latents -> semantic codes (the prompt the AR model continues), and codes
-> latents (what SoVITS decodes).

Only the codebook (`quantizer.vq.layers.0._codebook.embed`) is used at inference. Upstream's
other buffers are training state: `inited` (1 in every released file; 0 would make upstream's
first encode run a distributed k-means), `cluster_size` and `embed_avg` (the EMA statistics).

Encoding picks the row of largest -(|x|^2 - 2 x.e + |e|^2), upstream's expression evaluated in its
order and on its layouts (the frames are a transposed view of the conv output, flattened as
upstream flattens them), so ties and roundings fall as upstream's do. Decoding is an embedding
lookup, transposed to channels-first, added to 0 (upstream sums the quantizers from a 0 tensor).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CODEBOOK", "SemanticQuantizer"]

CODEBOOK = "vq.layers.0._codebook.embed"  # the one tensor inference reads, under `quantizer.`


class _Codebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("embed", torch.zeros(size, dim))


class _Layer(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self._codebook = _Codebook(size, dim)


class _Layers(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_Layer(size, dim)])


class SemanticQuantizer(nn.Module):
    """`quantizer`: a single 1024 x 768 codebook (`vq.layers.0._codebook.embed`)."""

    def __init__(self, size: int = 1024, dim: int = 768) -> None:
        super().__init__()
        self.vq = _Layers(size, dim)

    @property
    def codebook(self) -> torch.Tensor:
        return self.vq.layers[0]._codebook.embed

    def encode(self, latents: torch.Tensor) -> torch.Tensor:
        """latents (B, 768, T) -> codes (B, 1, T) int64: each frame's nearest row."""
        b, d, t = latents.shape
        x = latents.permute(0, 2, 1).reshape(-1, d)  # (B T, D), a view of the transposed frames where it can be
        embed = self.codebook.t()  # (D, size)
        distance = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ embed + embed.pow(2).sum(0, keepdim=True))
        codes = distance.max(dim=-1).indices.view(b, t)
        return codes.unsqueeze(1)  # upstream stacks the quantizers (1, B, T), then swaps to (B, 1, T)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (1, B, T) (upstream's layout: quantizer first) -> latents (B, 768, T)."""
        if codes.dim() != 3 or codes.shape[0] != 1:
            raise ValueError(f"codes must be (1, batch, frames) for the one quantizer, not {tuple(codes.shape)}")
        latents = F.embedding(codes[0], self.codebook).permute(0, 2, 1)  # (B, D, T), a transposed view
        return torch.tensor(0.0, device=codes.device) + latents
