"""SoVITS's prior encoder `enc_p` (upstream's `TextEncoder` and `MRTE`): semantic latents and
phonemes -> the prior's mean and log-scale per latent frame.

The semantic latents (the codebook rows of the codes, 768 wide, two frames a code) are projected
to 192 channels and run through a relative-position encoder (`encoder_ssl`, n_layers / 2 layers);
the phonemes are embedded and encoded (`encoder_text`, n_layers); the multi-reference timbre
encoder (`mrte`) lets the latent frames attend to the phonemes in 512 channels, adds the reference
embedding `ge` there, and projects back; a last encoder (`encoder2`, n_layers / 2) and a 1x1 conv
(`proj`) give the mean and log-scale. A speed other than 1 stretches the encoded frames linearly
to int(T / speed) + 1 before the projection.

`streamed` is upstream's TextEncoder as `decode_streaming` runs it (TTS.run's streaming_mode):
all the codes so far encoded, the last frames kept, the first of them crossfaded (a sine window)
with the previous chunk's last frames.

Masks are all ones at inference (one sequence, no padding); the multiplications by them are kept
because upstream makes them and they decide the memory layout later kernels see.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.gpt_sovits.sovits_attention import MultiHeadAttention, RelativeEncoder
from koe.engines.gpt_sovits.sovits_config import MRTE_CONTENT, MRTE_WIDTH, SSL_DIM, SoVITSConfig

__all__ = ["MRTE", "PriorEncoder"]

MRTE_HEADS = 4


class MRTE(nn.Module):
    """Multi-reference timbre encoder: content (B, 192, T) attends to phonemes (B, 192, N) in 512
    channels, plus itself and the reference embedding (B, 512, 1), projected back to 192."""

    def __init__(self) -> None:
        super().__init__()
        self.cross_attention = MultiHeadAttention(MRTE_WIDTH, MRTE_HEADS)
        self.c_pre = nn.Conv1d(MRTE_CONTENT, MRTE_WIDTH, 1)
        self.text_pre = nn.Conv1d(MRTE_CONTENT, MRTE_WIDTH, 1)
        self.c_post = nn.Conv1d(MRTE_WIDTH, MRTE_CONTENT, 1)

    def forward(self, content: torch.Tensor, content_mask: torch.Tensor, text: torch.Tensor, text_mask: torch.Tensor, ge: torch.Tensor) -> torch.Tensor:
        attn_mask = text_mask.unsqueeze(2) * content_mask.unsqueeze(-1)  # (B, 1, T, N)
        content = self.c_pre(content * content_mask)
        text = self.text_pre(text * text_mask)
        x = self.cross_attention(content * content_mask, text * text_mask, attn_mask) + content + ge
        return self.c_post(x * content_mask)


class PriorEncoder(nn.Module):
    """`enc_p`: (latents (B, 768, T), phoneme ids (B, N), ge (B, 512, 1), speed) -> (m, logs, mask),
    each (B, inter_channels, T') with T' = T at speed 1, int(T / speed) + 1 otherwise."""

    def __init__(self, config: SoVITSConfig) -> None:
        super().__init__()
        c = config
        self.out_channels = c.inter_channels
        self.ssl_proj = nn.Conv1d(SSL_DIM, c.hidden_channels, 1)
        self.encoder_ssl = RelativeEncoder(c.hidden_channels, c.filter_channels, c.n_heads, c.n_layers // 2, c.kernel_size)
        self.encoder_text = RelativeEncoder(c.hidden_channels, c.filter_channels, c.n_heads, c.n_layers, c.kernel_size)
        self.text_embedding = nn.Embedding(c.symbols, c.hidden_channels)
        self.mrte = MRTE()
        self.encoder2 = RelativeEncoder(c.hidden_channels, c.filter_channels, c.n_heads, c.n_layers // 2, c.kernel_size)
        self.proj = nn.Conv1d(c.hidden_channels, c.inter_channels * 2, 1)

    def forward(self, latents: torch.Tensor, phones: torch.Tensor, ge: torch.Tensor, speed: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y, y_mask = self.features(latents, phones, ge, speed)
        return (*self._stats(y, y_mask), y_mask)

    def features(self, latents: torch.Tensor, phones: torch.Tensor, ge: torch.Tensor, speed: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoded frames before `proj` and their mask, (B, 192, T') and (B, 1, T'): what
        SoVITS v3/v4 decode further (upstream's TextEncoder returns them as its first output)."""
        return _stretch(*self.encoded(latents, phones, ge), speed)

    def streamed(
        self, latents: torch.Tensor, phones: torch.Tensor, ge: torch.Tensor, speed: float, result_frames: int | None, overlap: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Upstream's TextEncoder as `decode_streaming` runs it: every frame encoded, then only the
        last `result_frames` kept (None: all), their first frames crossfaded with `overlap` (the
        previous call's last frames, (B, 192, L), or None) -> (m, logs, mask, the kept frames
        before the speed stretch: the next call's `overlap` comes from them)."""
        y, y_mask = self.encoded(latents, phones, ge)
        if result_frames is not None:
            y, y_mask = y[:, :, -result_frames:], y_mask[:, :, -result_frames:]
        if overlap is not None:
            n = overlap.shape[-1]
            window = torch.sin(torch.arange(n * 2, device=y.device) * torch.pi / (n * 2))  # upstream's WINDOW: a sine, not a Hann
            y[:, :, :n] = window[:n].view(1, 1, -1) * y[:, :, :n] + window[n:].view(1, 1, -1) * overlap
        kept = y
        y, y_mask = _stretch(y, y_mask, speed)
        return (*self._stats(y, y_mask), y_mask, kept)

    def encoded(self, latents: torch.Tensor, phones: torch.Tensor, ge: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The frames through `encoder2` and their mask, (B, 192, T) and (B, 1, T), before any stretch."""
        y_mask = torch.ones(latents.shape[0], 1, latents.shape[2], dtype=latents.dtype, device=latents.device)
        y = self.ssl_proj(latents * y_mask) * y_mask
        y = self.encoder_ssl(y * y_mask, y_mask)
        text_mask = torch.ones(phones.shape[0], 1, phones.shape[1], dtype=y.dtype, device=y.device)
        text = self.text_embedding(phones).transpose(1, 2)  # (B, 192, N)
        text = self.encoder_text(text * text_mask, text_mask)
        y = self.mrte(y, y_mask, text, text_mask, ge)
        return self.encoder2(y * y_mask, y_mask), y_mask

    def _stats(self, y: torch.Tensor, y_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m, logs = torch.split(self.proj(y) * y_mask, self.out_channels, dim=1)
        return m, logs


def _stretch(y: torch.Tensor, y_mask: torch.Tensor, speed: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A speed other than 1: the frames stretched linearly to int(T / speed) + 1."""
    if speed != 1:
        y = F.interpolate(y, size=int(y.shape[-1] / speed) + 1, mode="linear")
        y_mask = F.interpolate(y_mask, size=y.shape[-1], mode="nearest")
    return y, y_mask
