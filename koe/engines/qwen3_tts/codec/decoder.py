"""The 12 Hz speech tokenizer's decoder: 16 codebooks of codes -> 24 kHz waveform.

Parameter names match `decoder.*` in the released `speech_tokenizer/model.safetensors`.
Attention follows what upstream runs by default on the CPU (transformers' "sdpa" path):
`scaled_dot_product_attention` with `is_causal=True` and no mask while the sequence is shorter than
the sliding window, else with an explicit boolean sliding-window mask of shape (B, 1, T, T)
(`koe.nn.attention` with `window` set does exactly that).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.attention import sliding_window_mask
from koe.nn.conv import CausalConv1d, CausalConvTranspose1d, ConvNeXtBlock, SnakeBeta
from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.norm import RMSNorm
from koe.nn.rotary import RotaryEmbedding

from .config import DecoderConfig

CHUNK_FRAMES = 300
LEFT_CONTEXT_FRAMES = 25


# ---------------------------------------------------------------- quantizer (decode side only)
class Codebook(nn.Module):
    """Codebook stored as running sums: entry = embedding_sum / max(cluster_usage, eps)."""

    def __init__(self, dim: int, size: int, epsilon: float = 1e-5) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, T) -> (B, T, dim)."""
        embedding = self.embedding_sum / self.cluster_usage.clamp(min=self.epsilon)[:, None]
        return F.embedding(codes, embedding)


class VQLayer(nn.Module):
    def __init__(self, dim: int, size: int) -> None:
        super().__init__()
        self._codebook = Codebook(dim, size)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, T) -> (B, dim, T)."""
        return self._codebook.decode(codes).transpose(1, 2)


class VQStack(nn.Module):
    def __init__(self, n_q: int, dim: int, size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([VQLayer(dim, size) for _ in range(n_q)])


class RVQ(nn.Module):
    """Residual VQ with 1x1 input/output projections (only the output one is used to decode)."""

    def __init__(self, n_q: int, dim: int, io_dim: int, size: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(io_dim, dim, 1, bias=False)
        self.output_proj = nn.Conv1d(dim, io_dim, 1, bias=False)
        self.vq = VQStack(n_q, dim, size)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, K, T) -> (B, io_dim, T)."""
        per_layer = codes.transpose(0, 1)  # (K, B, T)
        quantized = torch.zeros([1], device=codes.device)[0]
        for idx, layer_codes in enumerate(per_layer):
            quantized = quantized + self.vq.layers[idx].decode(layer_codes)
        return self.output_proj(quantized)


class SplitRVQ(nn.Module):
    """First codebook (semantic) and the rest (acoustic), each with its own projections."""

    def __init__(self, n_q: int, dim: int, io_dim: int, size: int, n_q_semantic: int = 1) -> None:
        super().__init__()
        self.n_q_semantic = n_q_semantic
        self.rvq_first = RVQ(n_q_semantic, dim, io_dim, size)
        self.rvq_rest = RVQ(n_q - n_q_semantic, dim, io_dim, size)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, K, T) -> (B, io_dim, T)."""
        quantized = self.rvq_first.decode(codes[:, : self.n_q_semantic])
        if codes.shape[1] > self.n_q_semantic:
            quantized += self.rvq_rest.decode(codes[:, self.n_q_semantic :])
        return quantized


# ---------------------------------------------------------------- transformer
def transformer_spec(cfg: DecoderConfig) -> DecoderSpec:
    """The pre-transformer as a decoder stack: no q/k norm, sliding-window causal attention, layer scales."""
    return DecoderSpec(
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_layers=cfg.num_hidden_layers,
        num_heads=cfg.num_attention_heads,
        num_kv_heads=cfg.num_key_value_heads,
        head_dim=cfg.head_dim,
        rms_norm_eps=cfg.rms_norm_eps,
        rope_theta=cfg.rope_theta,
        attention_bias=cfg.attention_bias,
        qk_norm=False,
        sliding_window=cfg.sliding_window,
        layer_scale=cfg.layer_scale_initial_scale,
    )


class DecoderTransformer(nn.Module):
    """latent (B, T, latent_dim) -> (B, T, latent_dim) through a sliding-window causal transformer."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        spec = transformer_spec(cfg)
        self.window = cfg.sliding_window
        self.layers = nn.ModuleList([DecoderLayer(spec) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(cfg.head_dim, cfg.rope_theta)
        self.input_proj = nn.Linear(cfg.latent_dim, cfg.hidden_size)
        self.output_proj = nn.Linear(cfg.hidden_size, cfg.latent_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_proj(x)
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, T)
        cos, sin = self.rotary_emb(positions, x.dtype)  # (1, 1, T, D)
        mask = sliding_window_mask(x.shape[0], x.shape[1], x.shape[1], self.window, x.device)  # once for all layers
        for layer in self.layers:
            x = layer(x, cos, sin, None, mask)
        return self.output_proj(self.norm(x))


# ---------------------------------------------------------------- convolutional upsampler
class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv1d(dim, dim, kernel_size=7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv1d(dim, dim, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.act2(self.conv1(self.act1(x)))) + x


class DecoderBlock(nn.Module):
    """SnakeBeta, transposed conv upsampling by `rate`, then 3 dilated residual units."""

    def __init__(self, in_dim: int, out_dim: int, rate: int) -> None:
        super().__init__()
        self.block = nn.ModuleList([SnakeBeta(in_dim), CausalConvTranspose1d(in_dim, out_dim, 2 * rate, rate)] + [ResidualUnit(out_dim, d) for d in (1, 3, 9)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.block:
            x = layer(x)
        return x


class SpeechDecoder(nn.Module):
    """codes (B, K, T) -> waveform (B, 1, T * total_upsample), clamped to [-1, 1]."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.config = cfg
        self.total_upsample = cfg.total_upsample
        self.pre_transformer = DecoderTransformer(cfg)
        self.quantizer = SplitRVQ(cfg.num_quantizers, cfg.codebook_dim // 2, cfg.codebook_dim, cfg.codebook_size)
        self.pre_conv = CausalConv1d(cfg.codebook_dim, cfg.latent_dim, kernel_size=3)
        self.upsample = nn.ModuleList(
            nn.ModuleList([CausalConvTranspose1d(cfg.latent_dim, cfg.latent_dim, r, r), ConvNeXtBlock(cfg.latent_dim)]) for r in cfg.upsampling_ratios
        )
        layers: list[nn.Module] = [CausalConv1d(cfg.latent_dim, cfg.decoder_dim, 7)]
        for i, rate in enumerate(cfg.upsample_rates):
            layers.append(DecoderBlock(cfg.decoder_dim // 2**i, cfg.decoder_dim // 2 ** (i + 1), rate))
        out_dim = cfg.decoder_dim // 2 ** len(cfg.upsample_rates)
        layers += [SnakeBeta(out_dim), CausalConv1d(out_dim, 1, 7)]
        self.decoder = nn.ModuleList(layers)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        if codes.shape[1] != self.config.num_quantizers:
            raise ValueError(f"expected {self.config.num_quantizers} codebooks, got {codes.shape[1]}")
        hidden = self.quantizer.decode(codes)  # (B, codebook_dim, T)
        hidden = self.pre_conv(hidden).transpose(1, 2)  # (B, T, latent)
        hidden = self.pre_transformer(hidden).permute(0, 2, 1)  # (B, latent, T)
        for blocks in self.upsample:
            for block in blocks:
                hidden = block(hidden)
        for layer in self.decoder:
            hidden = layer(hidden)
        return hidden.clamp(min=-1, max=1)

    def decode_chunk(self, codes: torch.Tensor, left_context_frames: int) -> torch.Tensor:
        """Decode codes (B, K, T) whose first `left_context_frames` frames are context only.

        Returns (B, 1, (T - left_context_frames) * total_upsample): the samples of the new frames.
        This is the unit of upstream's chunked decode, and of a streaming decode that re-runs the
        current chunk (with its left context) and emits only the samples it has not emitted yet.
        """
        wav = self(codes)
        return wav[..., left_context_frames * self.total_upsample :]

    def chunked_decode(self, codes: torch.Tensor, chunk_size: int = CHUNK_FRAMES, left_context: int = LEFT_CONTEXT_FRAMES) -> torch.Tensor:
        """Upstream's long-form decode: chunks of `chunk_size` frames, each decoded with up to
        `left_context` frames before it. codes (B, K, T) -> (B, 1, T * total_upsample)."""
        pieces = []
        for start, end, context in chunk_plan(codes.shape[-1], chunk_size, left_context):
            pieces.append(self.decode_chunk(codes[..., start - context : end], context))
        return torch.cat(pieces, dim=-1)


def chunk_plan(n_frames: int, chunk_size: int = CHUNK_FRAMES, left_context: int = LEFT_CONTEXT_FRAMES) -> list[tuple[int, int, int]]:
    """(start, end, context) per chunk, as upstream cuts them: frames [start - context, end) are
    decoded and the samples of [start, end) are kept; context = min(start, left_context)."""
    plan = []
    start = 0
    while start < n_frames:
        end = min(start + chunk_size, n_frames)
        context = left_context if start - left_context > 0 else start
        plan.append((start, end, context))
        start = end
    return plan
