"""Fish Speech S2's codec: upstream's causal modded DAC (`codec.pth`), 44.1 kHz audio <-> 10 rows of
codes at ~21.5 frames a second (a 4096-entry semantic codebook, then 9 residual ones of 1024).

Encoder: a causal conv, blocks of three dilated residual units, Snake and a strided conv (the last
block ends in a windowed causal transformer), Snake, a conv. Quantizer: two strided convs with a
ConvNeXt block each (hop 512 -> 2048 samples a frame), a windowed transformer, the semantic vector
quantizer on its output and the residual quantizers on what is left. Decoder (codes -> audio): the
codebooks' vectors summed, a transformer, two transposed convs with ConvNeXt blocks, a conv, blocks
of Snake, a transposed conv and three residual units, Snake, a conv and tanh.

How koe keeps upstream's bits (CPU; float32, and bfloat16 as upstream's `codec.to(bfloat16)` runs):
- weight norm (`parametrizations.weight.original0/1` on the causal convs, `weight_g/weight_v` on
  the quantizers' projections) is folded once at load with `torch._weight_norm(v, g, 0)`, the op
  upstream runs on every forward, on the tensors already cast to the codec's dtype (bf16 weights
  are normed in bf16, as upstream's are);
- ops run in upstream's order on tensors of the same layout: the transformers read the conv's
  output transposed (a strided view, not a copy), keys and values are copied by
  `repeat_interleave` as upstream's are, rotary tables are `torch.polar`'s rounded to bfloat16
  (upstream's buffer dtype) and applied in float32, the quantizer's straight-through sum
  `z_e + (z_q - z_e)` is kept (it is not `z_q` in floating point).
- upstream's transformers carry a 32768 x 32768 boolean mask each (1 GiB) and a 327,680-row rotary
  table; koe builds the window mask and the table for the frames at hand.
- upstream's server engine in bfloat16 decodes with its float32 codec under CPU autocast
  (`decode_autocast`): the convs and linears in bfloat16, the rest as their inputs come; its
  transformers' layer scales keep their input's dtype (upstream scales in place), so koe's do.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conv import CausalConv1d, CausalConvTranspose1d, ConvNeXtBlock
from koe.nn.mlp import GatedMLP
from koe.nn.norm import RMSNorm
from koe.runtime.weights import fold_weight_norm, read_pickled
from koe_fish_speech.model import RELEASED_MLP

from .codec_config import ENCODER_WINDOW, HEAD_DIM, NORM_EPS, QUANTIZER_WINDOW, ROPE_BASE, SAMPLE_RATE, CodecCheckpointError, CodecConfig

__all__ = ["FishCodec", "codec_state", "load_codec", "read_codec"]


class Snake1d(nn.Module):
    """x + sin(a x)^2 / (a + 1e-9), one `alpha` per channel, kept (1, C, 1) as released."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(shape[0], shape[1], -1)
        x = x + (self.alpha + 1e-9).reciprocal() * torch.sin(self.alpha * x).pow(2)
        return x.reshape(shape)


class ResidualUnit(nn.Module):
    """Snake, a dilated causal conv (kernel 7), Snake, a 1x1 conv, plus the input."""

    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.block = nn.Sequential(Snake1d(dim), CausalConv1d(dim, dim, 7, dilation=dilation), Snake1d(dim), CausalConv1d(dim, dim, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)  # causal convs keep the length


# -- transformer ---------------------------------------------------------------------------------


def rotary_table(length: int, head_dim: int = HEAD_DIM, base: int = ROPE_BASE) -> torch.Tensor:
    """(length, head_dim / 2, 2) cos/sin pairs as upstream's `precompute_freqs_cis` rows: `torch.polar`
    of float32 angles, rounded to bfloat16, returned as float32 (the values upstream multiplies by)."""
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(length), freqs)
    cis = torch.polar(torch.ones_like(angles), angles)
    return torch.stack([cis.real, cis.imag], dim=-1).to(torch.bfloat16).float()


def apply_rotary_pairs(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate x (B, T, H, D) by adjacent pairs (d0, d1), (d2, d3), ... in float32; back to x's dtype."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)  # (B, T, H, D/2, 2)
    t = table.view(1, pairs.size(1), 1, pairs.size(3), 2)
    out = torch.stack(
        [pairs[..., 0] * t[..., 0] - pairs[..., 1] * t[..., 1], pairs[..., 1] * t[..., 0] + pairs[..., 0] * t[..., 1]],
        dim=-1,
    )
    return out.flatten(3).type_as(x)


def window_mask(length: int, window: int | None) -> torch.Tensor:
    """(1, 1, T, T) bool: causal, and at most `window` keys back (the query's own included)."""
    mask = torch.tril(torch.ones(length, length, dtype=torch.bool))
    if window is not None:
        rows = torch.arange(length).view(-1, 1)
        mask = (torch.arange(length) >= (rows - window + 1).clamp(min=0)) & mask
    return mask[None, None]


class Attention(nn.Module):
    """Self-attention with one fused `wqkv` projection and pairwise rotary q/k, through SDPA."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.wqkv = nn.Linear(dim, 3 * heads * HEAD_DIM, bias=False)
        self.wo = nn.Linear(heads * HEAD_DIM, dim, bias=False)

    def forward(self, x: torch.Tensor, table: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        width = self.heads * HEAD_DIM
        q, k, v = self.wqkv(x).split([width, width, width], dim=-1)
        q, k = (apply_rotary_pairs(y.view(b, t, self.heads, HEAD_DIM), table) for y in (q, k))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.view(b, t, self.heads, HEAD_DIM).transpose(1, 2)  # (B, H, T, D)
        k, v = k.repeat_interleave(1, dim=1), v.repeat_interleave(1, dim=1)  # upstream's copies (one kv head per head)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.wo(y.transpose(1, 2).contiguous().view(b, t, width))


class LayerScale(nn.Module):
    """x * gamma (upstream's name), in x's dtype (upstream scales in place: under bfloat16 autocast a
    bfloat16 x stays bfloat16)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), 0.01))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.gamma).to(x.dtype)


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.attention = Attention(dim, heads)
        self.feed_forward = GatedMLP(dim, hidden)  # released w1, w3, w2 (renamed at load)
        self.ffn_norm = RMSNorm(dim, eps=NORM_EPS)
        self.attention_norm = RMSNorm(dim, eps=NORM_EPS)
        self.attention_layer_scale = LayerScale(dim)
        self.ffn_layer_scale = LayerScale(dim)

    def forward(self, x: torch.Tensor, table: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = x + self.attention_layer_scale(self.attention(self.attention_norm(x), table, mask))
        return h + self.ffn_layer_scale(self.feed_forward(self.ffn_norm(h)))


class WindowedTransformer(nn.Module):
    """Causal transformer over (B, C, T) frames, each attending to at most `window` frames back."""

    def __init__(self, dim: int, layers: int, heads: int, hidden: int, window: int | None) -> None:
        super().__init__()
        self.window = window
        self.layers = nn.ModuleList(TransformerBlock(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim, eps=NORM_EPS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2)  # (B, T, C), a strided view as upstream's
        t = x.shape[1]
        table, mask = rotary_table(t).to(x.device), window_mask(t, self.window).to(x.device)
        for layer in self.layers:
            x = layer(x, table, mask)
        return self.norm(x).transpose(1, 2)  # (B, C, T)


# -- encoder, decoder ----------------------------------------------------------------------------


class EncoderBlock(nn.Module):
    """Three residual units (dilations 1, 3, 9) at width / 2, Snake, a strided conv to `width`,
    and a windowed transformer when it has layers."""

    def __init__(self, width: int, stride: int, layers: int) -> None:
        super().__init__()
        half = width // 2
        blocks: list[nn.Module] = [ResidualUnit(half, d) for d in (1, 3, 9)]
        blocks += [Snake1d(half), CausalConv1d(half, width, 2 * stride, stride=stride)]
        if layers:
            blocks.append(WindowedTransformer(width, layers, width // HEAD_DIM, 3 * width, ENCODER_WINDOW))
        self.block = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Encoder(nn.Module):
    def __init__(self, c: CodecConfig) -> None:
        super().__init__()
        blocks: list[nn.Module] = [CausalConv1d(1, c.encoder_dim, 7)]
        blocks += [EncoderBlock(c.encoder_width(i), s, n) for i, (s, n) in enumerate(zip(c.encoder_rates, c.encoder_transformer_layers))]
        blocks += [Snake1d(c.latent_dim), CausalConv1d(c.latent_dim, c.latent_dim, 3)]
        self.block = nn.Sequential(*blocks)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 1, T) -> (B, latent, T / hop)."""
        return self.block(audio)


class DecoderBlock(nn.Module):
    """Snake, a transposed conv (`stride` x longer, half the channels), three residual units."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.block = nn.Sequential(Snake1d(c_in), CausalConvTranspose1d(c_in, c_out, 2 * stride, stride=stride), *(ResidualUnit(c_out, d) for d in (1, 3, 9)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Decoder(nn.Module):
    def __init__(self, c: CodecConfig) -> None:
        super().__init__()
        widths = [c.decoder_dim // 2**i for i in range(len(c.decoder_rates) + 1)]
        layers: list[nn.Module] = [CausalConv1d(c.latent_dim, c.decoder_dim, 7)]
        layers += [DecoderBlock(widths[i], widths[i + 1], s) for i, s in enumerate(c.decoder_rates)]
        layers += [Snake1d(widths[-1]), CausalConv1d(widths[-1], 1, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """(B, latent, T / hop) -> (B, 1, T)."""
        return self.model(z)


# -- quantizer -----------------------------------------------------------------------------------


class VectorQuantizer(nn.Module):
    """A factorised codebook: project to `codebook_dim`, nearest row by cosine, project back."""

    def __init__(self, dim: int, size: int, codebook_dim: int) -> None:
        super().__init__()
        self.in_proj = nn.Conv1d(dim, codebook_dim, 1)
        self.out_proj = nn.Conv1d(codebook_dim, dim, 1)
        self.codebook = nn.Embedding(size, codebook_dim)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z (B, D, T) -> (quantized (B, D, T), codes (B, T))."""
        z_e = self.in_proj(z)  # (B, d, T)
        b, d, _ = z_e.shape
        encodings = F.normalize(z_e.permute(0, 2, 1).reshape(-1, d))  # (B*T, d), as einops' "b d t -> (b t) d"
        codebook = F.normalize(self.codebook.weight)
        dist = encodings.pow(2).sum(1, keepdim=True) - 2 * encodings @ codebook.t() + codebook.pow(2).sum(1, keepdim=True).t()
        codes = (-dist).max(1)[1].reshape(b, -1)
        z_q = self.vectors(codes)
        z_q = z_e + (z_q - z_e)  # upstream's straight-through sum: not z_q's bits
        return self.out_proj(z_q), codes

    def vectors(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (B, T) -> codebook rows (B, d, T) (a transposed view)."""
        return F.embedding(codes, self.codebook.weight).transpose(1, 2)


class ResidualQuantizer(nn.Module):
    """Vector quantizers in turn, each on what the ones before left."""

    def __init__(self, dim: int, n: int, size: int, codebook_dim: int) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(VectorQuantizer(dim, size, codebook_dim) for _ in range(n))

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z (B, D, T) -> (quantized sum (B, D, T), codes (B, N, T))."""
        z_q: torch.Tensor | int = 0
        residual, codes = z, []
        keep = torch.ones(z.shape[0], dtype=torch.bool, device=z.device)[:, None, None]  # upstream's dropout mask, all kept
        for quantizer in self.quantizers:
            z_q_i, codes_i = quantizer(residual)
            z_q = z_q + z_q_i * keep
            residual = residual - z_q_i
            codes.append(codes_i)
        return z_q, torch.stack(codes, dim=1)

    def from_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (B, N, T) -> the quantized sum (B, D, T)."""
        z_q: torch.Tensor | float = 0.0
        for i, quantizer in enumerate(self.quantizers[: codes.shape[1]]):
            z_q = z_q + quantizer.out_proj(quantizer.vectors(codes[:, i, :]))
        return z_q


class Quantizer(nn.Module):
    """Downsampling, the pre-transformer, the semantic and residual codebooks; the post-transformer
    and upsampling on the way back (upstream's `DownsampleResidualVectorQuantize`)."""

    def __init__(self, c: CodecConfig) -> None:
        super().__init__()
        d = c.latent_dim
        self.semantic_quantizer = ResidualQuantizer(d, 1, c.semantic_codebook_size, c.codebook_dim)
        self.quantizer = ResidualQuantizer(d, c.n_codebooks, c.codebook_size, c.codebook_dim)
        self.downsample = nn.Sequential(*(nn.Sequential(CausalConv1d(d, d, f, stride=f), ConvNeXtBlock(d)) for f in c.downsample_factor))
        self.upsample = nn.Sequential(*(nn.Sequential(CausalConvTranspose1d(d, d, f, stride=f), ConvNeXtBlock(d)) for f in reversed(c.downsample_factor)))
        args = (d, c.quantizer_layers, c.quantizer_heads, c.quantizer_intermediate_size, QUANTIZER_WINDOW)
        self.pre_module = WindowedTransformer(*args)
        self.post_module = WindowedTransformer(*args)

    def encode(self, z: torch.Tensor) -> torch.Tensor:
        """Encoder frames (B, D, T) -> codes (B, 1 + N, T / downsampling)."""
        z = self.pre_module(self.downsample(z))
        semantic_z, semantic_codes = self.semantic_quantizer(z)
        _, codes = self.quantizer(z - semantic_z)
        return torch.cat([semantic_codes, codes], dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes (B, 1 + N, T) -> decoder input (B, D, T x downsampling)."""
        z = self.semantic_quantizer.from_codes(codes[:, :1]) + self.quantizer.from_codes(codes[:, 1:])
        return self.upsample(self.post_module(z))


# -- the codec -----------------------------------------------------------------------------------


class FishCodec(nn.Module):
    """The modded DAC: `encode` audio at 44.1 kHz to codes, `decode` codes to audio."""

    def __init__(self, config: CodecConfig) -> None:
        super().__init__()
        self.config = config
        self.sample_rate = SAMPLE_RATE
        self.encoder = Encoder(config)
        self.quantizer = Quantizer(config)
        self.decoder = Decoder(config)

    decode_autocast: torch.dtype | None = None  # decode under torch's autocast to this dtype (upstream's server in bf16)

    @property
    def dtype(self) -> torch.dtype:
        return self.decoder.model[0].conv.weight.dtype

    @torch.inference_mode()
    def encode_batch(self, audio: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Upstream's `DAC.encode`: audio (B, 1, T) or (B, T) -> (codes (B, 1 + N, F), frames (B,)),
        the audio zero-padded to whole frames, `frames = ceil(lengths / frame_length)`."""
        if audio.ndim == 2:
            audio = audio.unsqueeze(1)
        if audio.ndim != 3 or audio.shape[1] != 1:
            raise ValueError(f"audio must be (B, 1, T) or (B, T), got {tuple(audio.shape)}")
        frame = self.config.frame_length
        length = audio.shape[-1]
        right_pad = math.ceil(length / frame) * frame - length
        audio = F.pad(audio.to(self.dtype), (0, right_pad))
        if lengths is None:
            lengths = torch.tensor([length + right_pad], dtype=torch.long, device=audio.device)
        codes = self.quantizer.encode(self.encoder(audio))
        return codes, torch.ceil(lengths / frame).long()

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Upstream's `encode_audio` after loading: one clip, (T,) or (1, 1, T) at 44.1 kHz, cast to
        the codec's dtype -> codes (1 + N, ceil(T / frame_length)) int64."""
        audio = audio.reshape(1, 1, -1)
        if audio.shape[-1] == 0:
            raise ValueError("cannot encode empty audio")
        lengths = torch.tensor([audio.shape[-1]], dtype=torch.long, device=audio.device)
        codes, frames = self.encode_batch(audio, lengths)
        return codes[0, :, : int(frames[0])]

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Upstream's `decode_to_audio` (`from_indices`): codes (1 + N, F) or (B, 1 + N, F) -> waveform
        (F x frame_length,) (or (B, 1, ...)) in the codec's dtype. Codes past a codebook's end are
        clamped to its last entry as upstream clamps them (on a copy: the caller's stay). With
        `decode_autocast` set, under `torch.autocast` to that dtype, as upstream's server engine
        decodes in its precision (`get_audio_segment`): the products in that dtype on the codec's
        own weights (bfloat16 audio out)."""
        batched = codes.ndim == 3
        codes = codes if batched else codes[None]
        c = self.config
        if codes.ndim != 3 or codes.shape[1] != c.num_codebooks or codes.is_floating_point() or codes.is_complex():
            raise ValueError(f"codes must be integers ({c.num_codebooks}, frames) or (B, {c.num_codebooks}, frames), got {codes.dtype} {tuple(codes.shape)}")
        if codes.numel() and int(codes.min()) < 0:
            raise ValueError("codes must not be negative")
        codes = codes.long().clone()
        codes[:, 0] = torch.clamp(codes[:, 0], max=c.semantic_codebook_size - 1)
        codes[:, 1:] = torch.clamp(codes[:, 1:], max=c.codebook_size - 1)
        if self.decode_autocast is None:
            audio = self.decoder(self.quantizer.decode(codes))
        else:
            with torch.autocast(codes.device.type, self.decode_autocast):
                audio = self.decoder(self.quantizer.decode(codes))
        return audio if batched else audio[0, 0]


# -- loading -------------------------------------------------------------------------------------


def codec_state(checkpoint: object) -> dict[str, torch.Tensor]:
    """The codec's state dict from what `codec.pth` holds, as upstream's `load_codec_model` unwraps
    it: under `state_dict` if there is one; if any key holds "generator", only the `generator.` keys,
    prefix dropped."""
    if not isinstance(checkpoint, dict):
        raise CodecCheckpointError(f"a codec checkpoint is a state dict, got {type(checkpoint).__name__}")
    state = checkpoint["state_dict"] if "state_dict" in checkpoint else checkpoint
    if not isinstance(state, dict):
        raise CodecCheckpointError("the checkpoint's 'state_dict' is not a dict")
    if any("generator" in k for k in state):
        state = {k.replace("generator.", ""): v for k, v in state.items() if "generator." in k}
    bad = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CodecCheckpointError(
            f"not a Fish Speech S2 codec checkpoint (a flat state dict, maybe under 'state_dict'): entries that are not tensors: {bad[:5]}"
        )
    return state


def _module_name(key: str) -> str:
    """A released name -> koe's module's: a transformer's feed-forward `w1/w3/w2` are GatedMLP's."""
    parts = key.split(".")
    if len(parts) >= 3 and parts[-3] == "feed_forward" and parts[-2] in RELEASED_MLP:
        parts[-2] = RELEASED_MLP[parts[-2]]
    return ".".join(parts)


def load_codec(state: dict[str, torch.Tensor], dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> FishCodec:
    """A `FishCodec` from a released-layout state dict (sizes read from its shapes, every tensor
    checked: `CodecCheckpointError` names what is missing, unexpected or misshapen), floating
    tensors cast to `dtype` (fresh copies) before weight norm is folded, as upstream's
    `codec.to(dtype)` leaves them."""
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"the codec runs in float32, bfloat16 or float16, not {dtype}")
    config = CodecConfig.from_state(state)
    cast = {k: (v.to(dtype=dtype, copy=True) if v.is_floating_point() else v.clone()) for k, v in state.items()}
    folded = {_module_name(k): v for k, v in fold_weight_norm(cast).items()}
    with torch.device("meta"):
        codec = FishCodec(config)
    missing, unexpected = codec.load_state_dict(folded, strict=False, assign=True)
    if missing or unexpected:  # released_shapes and the modules disagree: a koe bug, not the file's
        raise RuntimeError(f"codec modules do not match the released layout: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return codec.to(device).eval()


def read_codec(path: str | Path, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> FishCodec:
    """`load_codec` of a `codec.pth` file (read with `weights_only=True`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no codec checkpoint at {path}")
    try:
        return load_codec(codec_state(read_pickled(path)), dtype=dtype, device=device)
    except CodecCheckpointError as e:
        raise CodecCheckpointError(f"{path}: {e}") from e
