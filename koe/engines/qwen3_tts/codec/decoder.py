"""The 12 Hz speech tokenizer's decoder: 16 codebooks of codes -> 24 kHz waveform.

Parameter names match `decoder.*` in the released `speech_tokenizer/model.safetensors`.
Attention follows what upstream runs by default on the CPU (transformers' "sdpa" path):
`scaled_dot_product_attention` with `is_causal=True` and no mask while the sequence is shorter than
the sliding window, else with an explicit boolean sliding-window mask of shape (B, 1, T, T).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.qwen3 import RMSNorm

from .config import DecoderConfig
from .layers import (
    CausalConv1d,
    CausalConvTranspose1d,
    LayerScale,
    RotaryEmbedding,
    SnakeBeta,
    apply_rotary,
)

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
def sliding_window_mask(batch: int, length: int, window: int, device: torch.device) -> torch.Tensor | None:
    """Boolean (B, 1, T, T) mask (True = attend) for causal attention over the last `window` positions.

    None when the whole sequence fits in the window (then plain causal attention is used).
    """
    if length < window:
        return None
    q = torch.arange(length, device=device)[:, None]
    kv = torch.arange(length, device=device)[None, :]
    allowed = (kv <= q) & (kv > q - window)  # (T, T)
    return allowed[None, None].expand(batch, 1, length, length)


class Attention(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        hd = cfg.head_dim
        self.head_dim = hd
        self.scaling = hd**-0.5
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_attention_heads * hd, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * hd, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * hd, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(cfg.num_attention_heads * hd, cfg.hidden_size, bias=cfg.attention_bias)
        self.n_rep = cfg.num_attention_heads // cfg.num_key_value_heads

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, t, _ = x.shape
        shape = (b, t, -1, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        q, k = apply_rotary(q, k, cos, sin)
        if mask is None:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, scale=self.scaling,
                                                 is_causal=t > 1, enable_gqa=True)
        else:
            if self.n_rep > 1:
                k = k[:, :, None].expand(b, k.shape[1], self.n_rep, t, self.head_dim).reshape(b, -1, t, self.head_dim)
                v = v[:, :, None].expand(b, v.shape[1], self.n_rep, t, self.head_dim).reshape(b, -1, t, self.head_dim)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.scaling,
                                                 is_causal=False)
        out = out.transpose(1, 2).contiguous()  # (B, T, H, D)
        out = out.reshape(b, t, -1).contiguous()
        return self.o_proj(out)


class Mlp(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TransformerLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = Mlp(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn_layer_scale = LayerScale(cfg.hidden_size, cfg.layer_scale_initial_scale)
        self.mlp_layer_scale = LayerScale(cfg.hidden_size, cfg.layer_scale_initial_scale)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        h = self.self_attn(self.input_layernorm(x), cos, sin, mask)
        x = x + self.self_attn_layer_scale(h)
        h = self.mlp(self.post_attention_layernorm(x))
        return x + self.mlp_layer_scale(h)


class DecoderTransformer(nn.Module):
    """latent (B, T, latent_dim) -> (B, T, latent_dim) through a sliding-window causal transformer."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.window = cfg.sliding_window
        self.layers = nn.ModuleList([TransformerLayer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(cfg.head_dim, cfg.rope_theta)
        self.input_proj = nn.Linear(cfg.latent_dim, cfg.hidden_size)
        self.output_proj = nn.Linear(cfg.hidden_size, cfg.latent_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_proj(x)
        b, t, _ = x.shape
        position_ids = torch.arange(t, device=x.device).unsqueeze(0)  # (1, T)
        mask = sliding_window_mask(b, t, self.window, x.device)
        cos, sin = self.rotary_emb(x, position_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output_proj(self.norm(x))


# ---------------------------------------------------------------- convolutional upsampler
class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = CausalConv1d(dim, dim, kernel_size=7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x).permute(0, 2, 1)  # (B, T, C)
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        h = (self.gamma * h).permute(0, 2, 1)  # (B, C, T)
        return x + h


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
        self.block = nn.ModuleList(
            [SnakeBeta(in_dim), CausalConvTranspose1d(in_dim, out_dim, 2 * rate, rate)]
            + [ResidualUnit(out_dim, d) for d in (1, 3, 9)]
        )

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
            nn.ModuleList([CausalConvTranspose1d(cfg.latent_dim, cfg.latent_dim, r, r), ConvNeXtBlock(cfg.latent_dim)])
            for r in cfg.upsampling_ratios
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

    def chunked_decode(self, codes: torch.Tensor, chunk_size: int = CHUNK_FRAMES,
                       left_context: int = LEFT_CONTEXT_FRAMES) -> torch.Tensor:
        """Upstream's long-form decode: chunks of `chunk_size` frames, each decoded with up to
        `left_context` frames before it. codes (B, K, T) -> (B, 1, T * total_upsample)."""
        pieces = []
        for start, end, context in chunk_plan(codes.shape[-1], chunk_size, left_context):
            pieces.append(self.decode_chunk(codes[..., start - context : end], context))
        return torch.cat(pieces, dim=-1)


def chunk_plan(n_frames: int, chunk_size: int = CHUNK_FRAMES,
               left_context: int = LEFT_CONTEXT_FRAMES) -> list[tuple[int, int, int]]:
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
