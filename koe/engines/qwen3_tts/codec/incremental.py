"""Stateful codec decoding: each pushed frame is decoded once, with the state its past left behind.

Strategy: `SpeechDecoder` is causal all the way through and has no look-ahead, so the samples of
frame t depend only on frames <= t and can be emitted as soon as frame t arrives:

- a causal conv (stride 1, left pad (kernel - 1) * dilation, no right pad: every conv of the
  decoder) keeps its last (kernel - 1) * dilation input steps and runs on [kept, new];
- a causal transposed conv (kernel K, stride s, K - s output samples cut off on the right) keeps
  the K - s samples past its final output, to which later inputs still add (overlap-add): its
  first n * s outputs for n new inputs are final, exactly the ones the one-shot decode keeps;
- the transformer keeps a KV cache per layer (keys after rotary, values) of the last
  `sliding_window - 1` positions, and positions go on counting from the chunk's first frame;
- the quantizer, SnakeBeta, the norms, the MLPs and the clamp work step by step and keep nothing.

No layer looks ahead (the right trim of the transposed convs drops exactly the samples later inputs
would still add to), so there is no delay and nothing to flush.

The one-shot decode (`SpeechDecoder.chunked_decode`) restarts every 300 frames with only 25 frames
of left context; so does this decoder: at frame 300, 600, ... it drops its state and warms up on the
last 25 frames without emitting them. Its output therefore equals the one-shot decode up to float32
rounding (the same sums in other matrix shapes; the transposed convs add their bias after the
overlap; attention uses an explicit window mask where the one-shot may use `is_causal`), and
each frame costs the same whatever its place in the chunk, except that a chunk's first frame also
pays for the 25-frame warm-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.attention import sliding_window_allowed
from koe.nn.conv import CausalConv1d, CausalConvTranspose1d, ConvNeXtBlock

from .decoder import CHUNK_FRAMES, LEFT_CONTEXT_FRAMES, DecoderBlock, DecoderTransformer, ResidualUnit, SpeechDecoder


class ConvState:
    """A `CausalConv1d` (stride 1) run on consecutive pieces of one signal."""

    def __init__(self, conv: CausalConv1d) -> None:
        if conv.stride != 1:
            raise NotImplementedError("incremental decoding supports stride-1 causal convs only")
        self.conv = conv
        self.history: torch.Tensor | None = None  # (B, C_in, (kernel - 1) * dilation)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, n) -> (B, C_out, n)."""
        if self.history is None:
            self.history = x.new_zeros(x.shape[0], x.shape[1], self.conv.padding)
        full = torch.cat([self.history, x], dim=-1)  # (B, C_in, pad + n)
        self.history = full[..., full.shape[-1] - self.conv.padding :].contiguous()  # a copy: frees `full`
        return self.conv.conv(full)


class ConvTransposeState:
    """A `CausalConvTranspose1d` run on consecutive pieces of one signal (overlap-add)."""

    def __init__(self, conv: CausalConvTranspose1d) -> None:
        self.conv = conv.conv
        self.stride = int(self.conv.stride[0])
        self.overlap = conv.right_pad  # kernel - stride
        self.tail: torch.Tensor | None = None  # (B, C_out, overlap), bias not added

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, n) -> (B, C_out, n * stride)."""
        y = F.conv_transpose1d(x, self.conv.weight, None, stride=self.stride)  # (B, C_out, (n-1)*s + K)
        if self.tail is not None and self.overlap:
            y[..., : self.overlap] += self.tail
        final = x.shape[-1] * self.stride
        self.tail = y[..., final:].contiguous()  # a copy: frees `y`
        out = y[..., :final]
        if self.conv.bias is not None:
            out = out + self.conv.bias[:, None]
        return out


class KVCache:
    """Keys (after rotary) and values of the last `keep` positions of one attention layer.

    Concatenating: it holds at most `keep` + n positions (71 + the pushed frames) on the CPU path
    this serves, and nothing here is graph-captured.
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.k: torch.Tensor | None = None  # (B, H_kv, P, D), P <= keep
        self.v: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v (B, H_kv, n, D); return the cached plus new ones (B, H_kv, P + n, D)."""
        if self.k is not None and self.v is not None:
            k = torch.cat([self.k, k], dim=2)
            v = torch.cat([self.v, v], dim=2)
        start = max(0, k.shape[2] - self.keep)
        self.k, self.v = k[:, :, start:], v[:, :, start:]
        return k, v


class TransformerState:
    """`DecoderTransformer` over consecutive frames: per-layer KV caches, positions continue."""

    def __init__(self, model: DecoderTransformer) -> None:
        self.model = model
        self.caches = [KVCache(model.window - 1) for _ in model.layers]
        self.position = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, n, latent) -> (B, n, latent)."""
        m = self.model
        x = m.input_proj(x)
        n = x.shape[1]
        positions = torch.arange(self.position, self.position + n, device=x.device)
        cos, sin = m.rotary_emb(positions[None], x.dtype)  # (1, 1, n, D)
        past = min(self.position, m.window - 1)  # cached positions before the new ones
        keys = torch.arange(self.position - past, self.position + n, device=x.device)
        allowed = sliding_window_allowed(positions, keys, m.window)  # (n, P + n)
        for layer, cache in zip(m.layers, self.caches):
            x = layer(x, cos, sin, cache, allowed)
        self.position += n
        return m.output_proj(m.norm(x))


class ConvNeXtState:
    def __init__(self, block: ConvNeXtBlock) -> None:
        self.block = block
        self.dwconv = ConvState(block.dwconv)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, n) -> (B, C, n)."""
        return x + self.block.pointwise(self.dwconv(x))


class ResidualUnitState:
    def __init__(self, unit: ResidualUnit) -> None:
        self.unit = unit
        self.conv1 = ConvState(unit.conv1)
        self.conv2 = ConvState(unit.conv2)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        u = self.unit
        return self.conv2(u.act2(self.conv1(u.act1(x)))) + x


def _stateful(module: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """The step-by-step counterpart of one decoder module (stateless ones are used as they are)."""
    if isinstance(module, CausalConv1d):
        return ConvState(module)
    if isinstance(module, CausalConvTranspose1d):
        return ConvTransposeState(module)
    if isinstance(module, ConvNeXtBlock):
        return ConvNeXtState(module)
    if isinstance(module, ResidualUnit):
        return ResidualUnitState(module)
    if isinstance(module, DecoderBlock):
        return Chain(module.block)
    return module


class Chain:
    """Modules applied in order, each through its step-by-step counterpart."""

    def __init__(self, modules: Iterable[nn.Module]) -> None:
        self.steps = [_stateful(m) for m in modules]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for step in self.steps:
            x = step(x)
        return x


class IncrementalDecoder:
    """Decode codes frame by frame as they arrive; `push` returns exactly the new frames' samples.

    Equals `decoder.chunked_decode` up to float32 rounding, with no delay (the decoder has no
    look-ahead, so there is nothing to flush). `prefix` (T_p, K) frames, e.g. an ICL reference,
    are decoded as context and never emitted; chunk boundaries count from the prefix's first frame,
    as in a one-shot decode of prefix + frames.
    """

    def __init__(
        self, decoder: SpeechDecoder, prefix: torch.Tensor | None = None, chunk_size: int = CHUNK_FRAMES, left_context: int = LEFT_CONTEXT_FRAMES
    ) -> None:
        self.decoder = decoder
        self.chunk_size = chunk_size
        self.left_context = left_context
        self.samples_per_frame = decoder.total_upsample
        self.frames = 0  # frames pushed so far (prefix included)
        self.device = decoder.pre_conv.conv.weight.device
        self.recent = torch.zeros(0, decoder.config.num_quantizers, dtype=torch.long, device=self.device)  # (<= left_context, K)
        if not 0 <= left_context < chunk_size:
            raise ValueError("left_context must be smaller than chunk_size")
        self._reset()
        if prefix is not None and prefix.shape[0]:
            # Frames before the last chunk the prefix reaches matter only as that chunk's context.
            start = prefix.shape[0] // chunk_size * chunk_size
            self.frames = start
            self._remember(prefix[:start].to(self.device, torch.long))
            with torch.inference_mode():
                self._feed(prefix[start:], emit=False)

    def _reset(self) -> None:
        d = self.decoder
        self.pre_conv = ConvState(d.pre_conv)
        self.transformer = TransformerState(d.pre_transformer)
        self.upsample = Chain(m for blocks in d.upsample for m in blocks)
        self.layers = Chain(d.decoder)

    @torch.inference_mode()
    def push(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (T_new, K) -> float32 samples (T_new * samples_per_frame,) of exactly those frames."""
        return self._feed(codes, emit=True)

    def _feed(self, codes: torch.Tensor, emit: bool) -> torch.Tensor:
        if codes.dim() != 2 or codes.shape[1] != self.decoder.config.num_quantizers:
            raise ValueError(f"codes must be (T, {self.decoder.config.num_quantizers}), got {tuple(codes.shape)}")
        codes = codes.to(self.device, torch.long)
        pieces: list[torch.Tensor] = []
        done = 0
        while done < codes.shape[0]:
            if self.frames and self.frames % self.chunk_size == 0:
                self._start_chunk()  # each piece ends at a boundary at the latest
            stop = min(codes.shape[0], done + self.chunk_size - self.frames % self.chunk_size)
            piece = codes[done:stop]
            wav = self._run(piece)
            if emit:
                pieces.append(wav)
            self._remember(piece)
            self.frames += stop - done
            done = stop
        if not pieces:
            return torch.zeros(0, device=self.device)
        return torch.cat(pieces).float()

    def _start_chunk(self) -> None:
        """At a chunk boundary: restart as the one-shot decode does, on the last frames as context."""
        context = self.recent[self.recent.shape[0] - min(self.left_context, self.frames) :]
        self._reset()
        if context.shape[0]:
            self._run(context)

    def _remember(self, codes: torch.Tensor) -> None:
        recent = torch.cat([self.recent, codes])
        self.recent = recent[max(0, recent.shape[0] - self.left_context) :]

    def _run(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (n, K) -> samples (n * samples_per_frame,), advancing every state."""
        d = self.decoder
        hidden = d.quantizer.decode(codes.T[None])  # (1, codebook_dim, n)
        hidden = self.pre_conv(hidden).transpose(1, 2)  # (1, n, latent)
        hidden = self.transformer(hidden).permute(0, 2, 1)  # (1, latent, n)
        hidden = self.layers(self.upsample(hidden))  # (1, 1, n * samples_per_frame)
        return hidden.clamp(min=-1, max=1)[0, 0]
