"""The 12 Hz speech tokenizer's encoder (transformers' Mimi, encoder half): waveform -> codes.

Parameter names match `encoder.*` in the released `speech_tokenizer/model.safetensors`.
Upstream runs Mimi's "sdpa" attention with a plain causal mask: transformers builds Mimi's encoder
mask with `create_causal_mask`, so the config's `sliding_window` (250) is NOT applied.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.attention import Attention
from koe.nn.conv import CausalConv1d
from koe.nn.norm import LayerScale
from koe.nn.rotary import RotaryEmbedding

from .config import EncoderConfig


class ResnetBlock(nn.Module):
    """ELU, conv k, ELU, conv 1, plus the identity shortcut."""

    def __init__(self, cfg: EncoderConfig, dim: int, dilation: int) -> None:
        super().__init__()
        hidden = dim // cfg.compress
        self.block = nn.ModuleList(
            [
                nn.ELU(),
                CausalConv1d(dim, hidden, cfg.residual_kernel_size, dilation=dilation),
                nn.ELU(),
                CausalConv1d(hidden, dim, 1),
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        for layer in self.block:
            x = layer(x)
        return residual + x


class SEANetEncoder(nn.Module):
    """(B, 1, N) -> (B, hidden, ceil(N / prod(ratios)))."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = [CausalConv1d(cfg.audio_channels, cfg.num_filters, cfg.kernel_size)]
        scale = 1
        for ratio in reversed(cfg.upsampling_ratios):
            dim = scale * cfg.num_filters
            for j in range(cfg.num_residual_layers):
                layers.append(ResnetBlock(cfg, dim, cfg.dilation_growth_rate**j))
            layers += [nn.ELU(), CausalConv1d(dim, dim * 2, kernel_size=ratio * 2, stride=ratio)]
            scale *= 2
        layers += [nn.ELU(), CausalConv1d(scale * cfg.num_filters, cfg.hidden_size, cfg.last_kernel_size)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class MimiMLP(nn.Module):
    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class MimiLayer(nn.Module):
    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        # Mimi repeats grouped K/V heads before SDPA rather than passing `enable_gqa`.
        self.self_attn = Attention(
            cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, qkv_bias=cfg.attention_bias, native_gqa=False
        )
        self.mlp = MimiMLP(cfg)
        self.input_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.self_attn_layer_scale = LayerScale(cfg.hidden_size, cfg.layer_scale_initial_scale)
        self.mlp_layer_scale = LayerScale(cfg.hidden_size, cfg.layer_scale_initial_scale)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class MimiTransformer(nn.Module):
    """(B, T, hidden) -> (B, T, hidden); causal self-attention over all past frames, no final norm."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList([MimiLayer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.rotary_emb = RotaryEmbedding(cfg.head_dim, cfg.rope_theta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, T)
        cos, sin = self.rotary_emb(positions, x.dtype)  # (1, 1, T, D)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


class EuclideanCodebook(nn.Module):
    """Nearest-centroid lookup; centroids = embed_sum / max(cluster_usage, eps)."""

    def __init__(self, dim: int, size: int, epsilon: float = 1e-5) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.register_buffer("initialized", torch.tensor([True], dtype=torch.float32))
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embed_sum", torch.zeros(size, dim))

    def embed(self) -> torch.Tensor:
        return self.embed_sum / self.cluster_usage.clamp(min=self.epsilon)[:, None]

    def encode(self, x: torch.Tensor, embed: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> indices (B, T)."""
        shape = x.shape
        flat = x.reshape((-1, shape[-1]))  # (B*T, D)
        dists = torch.cdist(flat[None].float(), embed[None].float(), p=2)[0]
        return dists.argmin(dim=-1).view(*shape[:-1])


class VectorQuantization(nn.Module):
    def __init__(self, dim: int, size: int) -> None:
        super().__init__()
        self.codebook = EuclideanCodebook(dim, size)


class ResidualVectorQuantizer(nn.Module):
    def __init__(self, cfg: EncoderConfig, n_q: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([VectorQuantization(cfg.codebook_dim, cfg.codebook_size) for _ in range(n_q)])
        self.input_proj: nn.Module | None = None
        self.output_proj: nn.Module | None = None
        if cfg.vector_quantization_hidden_dimension != cfg.hidden_size:
            self.input_proj = nn.Conv1d(cfg.hidden_size, cfg.vector_quantization_hidden_dimension, 1, bias=False)
            self.output_proj = nn.Conv1d(cfg.vector_quantization_hidden_dimension, cfg.hidden_size, 1, bias=False)

    def encode(self, x: torch.Tensor, n_q: int) -> torch.Tensor:
        """(B, hidden, T) -> codes (n_q, B, T), each layer quantizing what the previous ones left."""
        if self.input_proj is not None:
            x = self.input_proj(x)
        residual = x
        codes = []
        for layer in self.layers[:n_q]:
            embed = layer.codebook.embed()
            indices = layer.codebook.encode(residual.permute(0, 2, 1), embed)  # (B, T)
            quantized = F.embedding(indices, embed).permute(0, 2, 1)  # (B, D, T)
            residual = residual - quantized
            codes.append(indices)
        return torch.stack(codes)


class SplitResidualVectorQuantizer(nn.Module):
    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.n_semantic = cfg.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = ResidualVectorQuantizer(cfg, cfg.num_semantic_quantizers)
        self.acoustic_residual_vector_quantizer = ResidualVectorQuantizer(cfg, cfg.num_quantizers - cfg.num_semantic_quantizers)

    def encode(self, x: torch.Tensor, n_q: int) -> torch.Tensor:
        """(B, hidden, T) -> codes (n_q, B, T); both quantizers read the same input."""
        codes = self.semantic_residual_vector_quantizer.encode(x, self.n_semantic)
        if n_q > self.n_semantic:
            acoustic = self.acoustic_residual_vector_quantizer.encode(x, n_q - self.n_semantic)
            codes = torch.cat([codes, acoustic], dim=0)
        return codes


class SpeechEncoder(nn.Module):
    """waveform (B, 1, N) -> codes (B, n_q, ceil(N / 1920)) for the first `n_q` quantizers.

    Later quantizers never influence earlier ones, so computing only the first `n_q` gives the
    same codes as upstream computing all of them and keeping the first `n_q`.
    """

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.config = cfg
        self.encoder = SEANetEncoder(cfg)
        self.encoder_transformer = MimiTransformer(cfg)
        self.downsample = CausalConv1d(cfg.hidden_size, cfg.hidden_size, kernel_size=cfg.downsample_kernel_size, stride=2, bias=False, pad_mode="replicate")
        self.quantizer = SplitResidualVectorQuantizer(cfg)

    def forward(self, wav: torch.Tensor, n_q: int) -> torch.Tensor:
        if not self.config.num_semantic_quantizers <= n_q <= self.config.num_quantizers:
            raise ValueError(f"n_q must be in {self.config.num_semantic_quantizers}..{self.config.num_quantizers}")
        emb = self.encoder(wav)  # (B, hidden, T25)
        emb = self.encoder_transformer(emb.transpose(1, 2)).transpose(1, 2)  # (B, hidden, T25)
        emb = self.downsample(emb)  # (B, hidden, T12)
        return self.quantizer.encode(emb, n_q).transpose(0, 1)  # (B, n_q, T12)
