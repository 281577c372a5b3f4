"""Fish Speech S2's codec decoded as frames come: `StreamDecoder(codec).push(codes)` returns the new
frames' samples, each frame decoded once with the state its past left behind.

The decoder side of the modded DAC is causal with no look-ahead (codes -> the codebooks' sum -> a
windowed causal transformer -> causal transposed convs and ConvNeXt blocks -> causal convs,
Snake, causal transposed convs, tanh), so frame t's 2048 samples depend on frames <= t only and
are final when frame t arrives; `flush` has nothing left to give. Per-layer state:

- a causal conv (stride 1, left pad (kernel - 1) * dilation) keeps its last (kernel - 1) * dilation
  input steps and runs on [kept, new] without padding;
- a causal transposed conv (kernel K = 2 * stride here, K - stride outputs cut off on the right)
  keeps its last ceil((K - stride) / stride) input steps and runs on [kept, new] with its bias,
  keeping the outputs that only the new inputs complete: every output sample is made by the same op
  from the same inputs as in a one-shot decode (no overlap-add of a saved tail, which would add the
  bias and the two contributions in another order);
- the post-quantizer transformer keeps each layer's keys (after rotary) and values of the last
  window - 1 (127) positions, and positions go on counting (the rotary rows are the one-shot's);
- everything else (codebook lookups, 1x1 projections, Snake, the norms, the MLPs, tanh) works frame
  by frame and keeps nothing.

Bits (CPU, float32, one thread, MKL_CBWR=AUTO,STRICT, measured on the release-size codec): one
push of all the frames gives `decode`'s samples bit for bit; smaller pushes give them to float32
rounding (max abs ~1.2e-6, ~119 dB at pushes of 1, 4, 8 or 21 frames), and no chunking can do
better, because torch's CPU kernels round by the length they are given: a conv goes to oneDNN only
when C_in x width > 20480 (im2col and a GEMM below), oneDNN's brgemm convs block the width by its
size, and the flash attention kernel rounds a row whose keys reach past the last multiple of 16
of its key count another way. The one-shot is therefore not prefix-stable (`decode(codes[:, :a])`
is not the first a frames of `decode(codes)`: 6 of 7 prefixes of 43 frames differed, from frame 0
on), and a stream, which emits frame t before it knows the length, cannot give the one-shot's bits
for every length. (The linears and 1x1 convs, MKL's GEMM, and the elementwise ops round the same
whatever the length.) A frame's receptive field is 8 x 127 frames of the transformer (~47 s) plus
a few of the convs: windows re-decoded with enough left context would be the whole prefix, and the
one-shot's bits would still depend on the length.

Cost: a push reads every decoder weight once (~180 M floats with the transformer), so small pushes
pay that per push: on one thread of the project's VM, the one-shot took 74 ms a frame (22 frames),
pushes of 1, 4, 8 and 21 frames 192, 105, 84 and 85 ms a frame; over 140 frames (6.5 s) the
one-shot took 190 ms a frame (its activations outgrow the caches) and pushes of 8 frames 93.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conv import CausalConv1d, CausalConvTranspose1d, ConvNeXtBlock

from .codec import HEAD_DIM, DecoderBlock, FishCodec, ResidualUnit, TransformerBlock, WindowedTransformer, apply_rotary_pairs, rotary_table

__all__ = ["StreamDecoder", "stream_mask"]


class ConvStep:
    """A stride-1 `CausalConv1d` on consecutive pieces of one signal."""

    def __init__(self, conv: CausalConv1d) -> None:
        if conv.stride != 1:
            raise NotImplementedError("the stream decoder runs stride-1 causal convs only")
        self.conv = conv.conv
        self.keep = conv.padding  # (kernel - 1) * dilation
        self.history: torch.Tensor | None = None  # (B, C_in, keep)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, n) -> (B, C_out, n)."""
        if self.history is None:
            self.history = x.new_zeros(x.shape[0], x.shape[1], self.keep)  # the one-shot's left zero padding
        full = torch.cat([self.history, x], dim=-1)
        self.history = full[..., full.shape[-1] - self.keep :].contiguous()
        return self.conv(full)


class TransposeStep:
    """A `CausalConvTranspose1d` on consecutive pieces: the last inputs kept as context."""

    def __init__(self, conv: CausalConvTranspose1d) -> None:
        self.conv = conv.conv
        self.stride = int(self.conv.stride[0])
        self.keep = math.ceil(conv.right_pad / self.stride)  # inputs whose outputs reach past their own stride
        self.history: torch.Tensor | None = None  # (B, C_in, <= keep)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, n) -> (B, C_out, n * stride)."""
        full = x if self.history is None else torch.cat([self.history, x], dim=-1)
        past = full.shape[-1] - x.shape[-1]
        self.history = full[..., max(0, full.shape[-1] - self.keep) :].contiguous() if self.keep else None
        y = self.conv(full)
        return y[..., past * self.stride : full.shape[-1] * self.stride].contiguous()


class ConvNeXtStep:
    def __init__(self, block: ConvNeXtBlock) -> None:
        self.block = block
        self.dwconv = ConvStep(block.dwconv)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block.pointwise(self.dwconv(x))


class ResidualStep:
    def __init__(self, unit: ResidualUnit) -> None:
        self.chain = Chain(unit.block)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.chain(x)


class KeyCache:
    """One attention layer's keys (after rotary) and values, (B, H, P, D): the last `keep` positions
    (None: all of them)."""

    def __init__(self, keep: int | None) -> None:
        self.keep = keep
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions' k, v; return every cached position's (the new ones last)."""
        if self.k is not None and self.v is not None:
            k, v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        start = 0 if self.keep is None else max(0, k.shape[2] - self.keep)
        self.k, self.v = k[:, :, start:], v[:, :, start:]
        return k, v


def stream_mask(first: int, n: int, keys_from: int, window: int | None) -> torch.Tensor:
    """(1, 1, n, K) bool: queries at positions first.., keys at keys_from..first + n - 1; the rows of
    `codec.window_mask` for those positions."""
    q = torch.arange(first, first + n).view(-1, 1)
    k = torch.arange(keys_from, first + n).view(1, -1)
    mask = k <= q
    if window is not None:
        mask &= k >= (q - window + 1).clamp(min=0)
    return mask[None, None]


class TransformerStep:
    """A `WindowedTransformer` over consecutive frames: per-layer key caches, positions go on."""

    def __init__(self, model: WindowedTransformer) -> None:
        self.model = model
        keep = None if model.window is None else model.window - 1
        self.caches = [KeyCache(keep) for _ in model.layers]
        self.position = 0
        self.table = torch.zeros(0, HEAD_DIM // 2, 2)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, n) -> (B, C, n), as `WindowedTransformer.forward` on the whole would give these frames."""
        x = x.transpose(1, 2)  # (B, n, C): a strided view, as the one-shot's
        n, first = x.shape[1], self.position
        if self.table.shape[0] < first + n:
            self.table = rotary_table(max(first + n, 2 * self.table.shape[0])).to(x.device)  # rows do not depend on the length
        table = self.table[first : first + n]
        past = 0 if self.caches[0].k is None else self.caches[0].k.shape[2]
        mask = stream_mask(first, n, first - past, self.model.window).to(x.device)
        for layer, cache in zip(self.model.layers, self.caches):
            x = self._block(layer, x, table, mask, cache)
        self.position += n
        return self.model.norm(x).transpose(1, 2)

    @staticmethod
    def _block(block: TransformerBlock, x: torch.Tensor, table: torch.Tensor, mask: torch.Tensor, cache: KeyCache) -> torch.Tensor:
        h = x + block.attention_layer_scale(TransformerStep._attend(block.attention, block.attention_norm(x), table, mask, cache))
        return h + block.ffn_layer_scale(block.feed_forward(block.ffn_norm(h)))

    @staticmethod
    def _attend(attention: nn.Module, x: torch.Tensor, table: torch.Tensor, mask: torch.Tensor, cache: KeyCache) -> torch.Tensor:
        """`codec.Attention.forward` on new rows, keys and values of the cached positions added."""
        b, t, _ = x.shape
        heads = attention.heads
        width = heads * HEAD_DIM
        q, k, v = attention.wqkv(x).split([width, width, width], dim=-1)
        q, k = (apply_rotary_pairs(y.view(b, t, heads, HEAD_DIM), table) for y in (q, k))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.view(b, t, heads, HEAD_DIM).transpose(1, 2)
        k, v = cache.update(k, v)
        k, v = k.repeat_interleave(1, dim=1), v.repeat_interleave(1, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return attention.wo(y.transpose(1, 2).contiguous().view(b, t, width))


def _step(module: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """The frame-by-frame counterpart of one decoder module (stateless ones as they are)."""
    if isinstance(module, CausalConv1d):
        return ConvStep(module)
    if isinstance(module, CausalConvTranspose1d):
        return TransposeStep(module)
    if isinstance(module, ConvNeXtBlock):
        return ConvNeXtStep(module)
    if isinstance(module, ResidualUnit):
        return ResidualStep(module)
    if isinstance(module, (DecoderBlock, nn.Sequential)):
        return Chain(module.block if isinstance(module, DecoderBlock) else module)
    return module


class Chain:
    """Modules in order, each through its frame-by-frame counterpart."""

    def __init__(self, modules: Iterable[nn.Module]) -> None:
        self.steps = [_step(m) for m in modules]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for step in self.steps:
            x = step(x)
        return x


class StreamDecoder:
    """`codec.decode` of a stream of codes, frame by frame: `push(codes (1 + N, k))` returns the k
    new frames' samples (k x frame_length float32), `flush()` the rest (nothing: no layer looks
    ahead). One decoder per utterance (per batch, as the engine decodes them one-shot)."""

    def __init__(self, codec: FishCodec) -> None:
        self.codec = codec
        self.frames = 0
        q = codec.quantizer
        self.transformer = TransformerStep(q.post_module)
        self.upsample = Chain(q.upsample)
        self.decoder = Chain(codec.decoder.model)

    @torch.inference_mode()
    def push(self, codes: torch.Tensor) -> np.ndarray:
        """codes (1 + N, k) integers -> float32 samples (k x frame_length,) of exactly those frames."""
        c = self.codec.config
        if codes.ndim != 2 or codes.shape[0] != c.num_codebooks or codes.is_floating_point() or codes.is_complex():
            raise ValueError(f"codes must be integers ({c.num_codebooks}, frames), got {codes.dtype} {tuple(codes.shape)}")
        if codes.shape[1] == 0:
            return np.zeros(0, dtype=np.float32)
        if int(codes.min()) < 0:
            raise ValueError("codes must not be negative")
        codes = codes.long().clone()[None].to(self.codec.decoder.model[0].conv.weight.device)
        codes[:, 0] = torch.clamp(codes[:, 0], max=c.semantic_codebook_size - 1)  # as codec.decode clamps
        codes[:, 1:] = torch.clamp(codes[:, 1:], max=c.codebook_size - 1)
        if self.codec.decode_autocast is None:
            audio = self._decode(codes)
        else:
            with torch.autocast(codes.device.type, self.codec.decode_autocast):  # as `codec.decode` (upstream's server in bf16)
                audio = self._decode(codes)
        self.frames += codes.shape[-1]
        return audio[0, 0].float().cpu().numpy()

    def _decode(self, codes: torch.Tensor) -> torch.Tensor:
        q = self.codec.quantizer
        z = q.semantic_quantizer.from_codes(codes[:, :1]) + q.quantizer.from_codes(codes[:, 1:])
        return self.decoder(self.upsample(self.transformer(z)))

    def flush(self) -> np.ndarray:
        """The samples still held back: none (every pushed frame's samples were final)."""
        return np.zeros(0, dtype=np.float32)
