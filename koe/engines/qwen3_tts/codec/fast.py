"""The fast codec of the opt-in modes: the same decoder, decoded in short pieces, with bfloat16
convolutions and a one-pass SnakeBeta. It changes bits, so the exact float32 path never uses it.

Where the exact decode spends its time (docs/PERFORMANCE.md, "The codec in the fast modes"): the
convolutional stack after the transformer, at up to 24,000 steps a second of audio, is about 90% of
it; half of that is oneDNN convolutions and half is SnakeBeta's five elementwise passes and the
residual adds, each writing a fresh tensor of tens of MB, so the one-shot decode gets slower per
second the longer the utterance (page faults and cache misses, not arithmetic). So:

- the one-shot decode runs the incremental decoder (`incremental.py`) over pieces of
  `PIECE_FRAMES` frames: every intermediate stays in the caches, the cost per second is flat, and
  one-shot and streaming are the same code (they differ by the rounding of other piece sizes);
- SnakeBeta is one pass (`koe/runtime/kernels/snake.c`, else an in-place torch chain), reading
  float32 or bfloat16 and writing the convolutions' input type;
- the convolutions of the upsampling blocks (and the one before them) take bfloat16 inputs and
  weights ("fast-bf16", where the CPU has bf16 dot products: AVX512-BF16/AMX): oneDNN runs them at
  about twice the float32 rate, summing in float32 inside the kernel. "fast-fp32" keeps them
  float32 (the pieces and the one-pass SnakeBeta only: float32 rounding, about half the gain);
- what decides the waveform's precision stays float32: the residual stream of every residual unit
  (float32 + a bfloat16 branch), the transposed convolutions' overlap-add and bias, the last
  SnakeBeta and the output convolution (one channel: a waveform rounded to bfloat16 would be
  audible), and everything before the upsampling blocks (quantizer, transformer, ConvNeXt stages;
  a few percent of the time).

`FastCodec` offers the `SpeechTokenizer` methods the engine decodes with (`decode`,
`incremental_decoder`, `samples_per_frame`, `device`, `decoder`), so it drops in where the exact
codec is used; its `name` goes into results' `metadata["codec"]`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from koe.nn.conv import CausalConv1d, CausalConvTranspose1d, SnakeBeta
from koe.runtime.kernels import snake as snake_kernel

from .decoder import (
    CHUNK_FRAMES,
    LEFT_CONTEXT_FRAMES,
    DecoderBlock,
    ResidualUnit,
    SpeechDecoder,
)
from .incremental import Chain, ConvNeXtState, IncrementalDecoder

PIECE_FRAMES = 16  # one-shot decode piece (30,720 samples): 8 to 32 measured in docs/PERFORMANCE.md
CONV_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


class FastSnake:
    """SnakeBeta with its per-channel factors computed once: exp(alpha), 1 / (exp(beta) + 1e-9)."""

    def __init__(self, act: SnakeBeta, out_dtype: torch.dtype) -> None:
        alpha, beta = act.alpha.detach().float(), act.beta.detach().float()
        if act.logscale:
            alpha, beta = torch.exp(alpha), torch.exp(beta)
        self.alpha = alpha.contiguous()
        self.inv_beta = (1.0 / (beta + 0.000000001)).contiguous()
        self.out_dtype = out_dtype

    def fresh(self) -> FastSnake:
        return self  # stateless

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return snake_kernel.snake_beta(x, self.alpha, self.inv_beta, self.out_dtype)


class FastConv:
    """A stride-1 `CausalConv1d` over consecutive pieces, in `dtype` (input cast, history kept in it).

    In bfloat16 a 1x1 conv of one signal is a matrix product with the bias as its addend (`addmm`):
    1.2-2x faster than oneDNN's convolution for the same shapes here (the whole fast decode ~10%).
    In float32 oneDNN's convolution is the faster one (addmm made the decode ~10% slower), so it stays.
    """

    def __init__(self, conv: CausalConv1d, dtype: torch.dtype) -> None:
        if conv.stride != 1:
            raise NotImplementedError("the fast codec supports stride-1 causal convs only")
        inner = conv.conv
        self.weight = inner.weight.detach().to(dtype).contiguous()
        self.bias = None if inner.bias is None else inner.bias.detach().to(dtype).contiguous()
        self.dilation, self.groups, self.padding, self.dtype = inner.dilation, inner.groups, conv.padding, dtype
        self.history: torch.Tensor | None = None  # (B, C_in, padding) in dtype
        self.pointwise = dtype == torch.bfloat16 and inner.kernel_size[0] == 1 and inner.groups == 1 and inner.bias is not None
        self.matrix = self.weight[..., 0] if self.pointwise else None  # (C_out, C_in)
        self.bias_column = self.bias[:, None] if self.pointwise else None

    def fresh(self) -> FastConv:
        """A copy with no past (the weights shared): the start of another signal."""
        copy = object.__new__(FastConv)
        copy.__dict__.update(self.__dict__, history=None)
        return copy

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dtype)
        if self.padding:
            if self.history is None:
                self.history = x.new_zeros(x.shape[0], x.shape[1], self.padding)
            x = torch.cat([self.history, x], dim=-1)
            self.history = x[..., x.shape[-1] - self.padding :].contiguous()
        if self.pointwise and x.shape[0] == 1:
            return torch.addmm(self.bias_column, self.matrix, x[0])[None]
        return F.conv1d(x, self.weight, self.bias, dilation=self.dilation, groups=self.groups)


class FastConvTranspose:
    """A `CausalConvTranspose1d` over consecutive pieces, as one matrix product and an overlap-add.

    torch's transposed convolution has no fast bfloat16 path on the CPU (it took ~10x the time of
    the same products as one GEMM). With weight (C_in, C_out, K) and stride s, input step t adds
    W[:, :, j] . x[:, t] to output sample t * s + j; so one product (m * C_out * s, C_in) @ x gives
    m = ceil(K / s) blocks of s samples per input step, and block i lands i steps later. The product
    is in `dtype`; the overlap-add, the carried tail and the bias are float32.
    """

    def __init__(self, conv: CausalConvTranspose1d, dtype: torch.dtype) -> None:
        inner = conv.conv
        weight = inner.weight.detach()  # (C_in, C_out, K)
        c_in, self.channels, kernel = weight.shape
        self.stride = int(inner.stride[0])
        self.blocks = -(-kernel // self.stride)
        weight = F.pad(weight, (0, self.blocks * self.stride - kernel))  # (C_in, C_out, m * s)
        rows = weight.reshape(c_in, self.channels, self.blocks, self.stride).permute(2, 1, 3, 0)  # (m, C_out, s, C_in)
        self.weight = rows.reshape(-1, c_in).to(dtype).contiguous()
        self.bias = None if inner.bias is None else inner.bias.detach().float()[:, None]
        self.dtype = dtype
        self.tail: torch.Tensor | None = None  # (B, C_out, (m - 1) * s) float32, bias not added

    def fresh(self) -> FastConvTranspose:
        """A copy with no past (the weights shared): the start of another signal."""
        copy = object.__new__(FastConvTranspose)
        copy.__dict__.update(self.__dict__, tail=None)
        return copy

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, n) -> (B, C_out, n * s)."""
        b, n, s, m = x.shape[0], x.shape[-1], self.stride, self.blocks
        y = torch.matmul(self.weight, x.to(self.dtype)).view(b, m, self.channels, s, n)
        full = torch.zeros(b, self.channels, (n + m - 1) * s)
        for i in range(m):  # block i of step t -> samples (t + i) * s + j
            full[..., i * s : (i + n) * s].view(b, self.channels, n, s).add_(y[:, i].transpose(-1, -2))
        if self.tail is not None:
            full[..., : self.tail.shape[-1]] += self.tail
        self.tail = full[..., n * s :].clone()
        out = full[..., : n * s]
        return out + self.bias if self.bias is not None else out.contiguous()


class FastMonoConv:
    """The output conv (C_in -> 1 channel, stride 1, causal) over consecutive pieces, in float32.

    oneDNN runs a one-channel convolution at a few GFLOP/s; here it is one product (K, C_in) @ x
    and K shifted adds over a single row.
    """

    def __init__(self, conv: CausalConv1d) -> None:
        inner = conv.conv
        if conv.stride != 1 or inner.out_channels != 1 or inner.groups != 1:
            raise NotImplementedError("FastMonoConv is for the one-channel, stride-1 output conv")
        self.weight = inner.weight.detach().float()[0].T.contiguous()  # (K, C_in)
        self.bias = None if inner.bias is None else inner.bias.detach().float()
        self.dilation, self.padding = int(inner.dilation[0]), conv.padding
        self.history: torch.Tensor | None = None

    def fresh(self) -> FastMonoConv:
        """A copy with no past (the weights shared): the start of another signal."""
        copy = object.__new__(FastMonoConv)
        copy.__dict__.update(self.__dict__, history=None)
        return copy

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, n) -> (B, 1, n)."""
        x = x.float()
        if self.padding:
            if self.history is None:
                self.history = x.new_zeros(x.shape[0], x.shape[1], self.padding)
            x = torch.cat([self.history, x], dim=-1)
            self.history = x[..., x.shape[-1] - self.padding :].contiguous()
        taps = torch.matmul(self.weight, x)  # (B, K, padding + n)
        n = x.shape[-1] - self.padding
        out = taps[:, 0, :n].clone()
        for k in range(1, taps.shape[1]):
            out += taps[:, k, k * self.dilation : k * self.dilation + n]
        if self.bias is not None:
            out += self.bias
        return out[:, None]


class FastResidualUnit:
    """float32 residual stream + (SnakeBeta, dilated conv, SnakeBeta, 1x1 conv) in the conv dtype."""

    def __init__(self, unit: ResidualUnit, dtype: torch.dtype) -> None:
        self.steps = [FastSnake(unit.act1, dtype), FastConv(unit.conv1, dtype), FastSnake(unit.act2, dtype), FastConv(unit.conv2, dtype)]

    def fresh(self) -> FastResidualUnit:
        copy = object.__new__(FastResidualUnit)
        copy.steps = [step.fresh() for step in self.steps]
        return copy

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for step in self.steps:
            h = step(h)
        return x + h  # float32 + the branch's dtype -> float32


class FastWeights:
    """What the fast decode of one `SpeechDecoder` needs that the exact one does not: the upsampling
    blocks' weights in the conv dtype (made once, shared by every decode) and a factory of fresh
    per-signal states over them."""

    def __init__(self, decoder: SpeechDecoder, dtype: torch.dtype) -> None:
        self.dtype = dtype
        layers = list(decoder.decoder)
        first, blocks, last_act, out_conv = layers[0], layers[1:-2], layers[-2], layers[-1]
        if not (
            isinstance(first, CausalConv1d)
            and all(isinstance(b, DecoderBlock) for b in blocks)
            and isinstance(last_act, SnakeBeta)
            and isinstance(out_conv, CausalConv1d)
        ):
            raise TypeError("the fast codec expects the 12 Hz decoder's layout (conv, upsampling blocks, SnakeBeta, conv)")
        self._first = FastConv(first, dtype)
        self._blocks = [
            [FastSnake(b.block[0], dtype), FastConvTranspose(b.block[1], dtype), *(FastResidualUnit(u, dtype) for u in b.block[2:])] for b in blocks
        ]
        self._last_act = FastSnake(last_act, torch.float32)
        self._out_conv = FastMonoConv(out_conv)
        self._upsample = [(FastConvTranspose(conv, torch.float32), block) for conv, block in decoder.upsample]

    def fresh(self) -> FastLayers:
        return FastLayers(self)

    def fresh_upsample(self) -> Chain:
        """The ConvNeXt upsampling stages for one signal: their transposed convs as float32 products."""
        steps = Chain(())
        for conv, block in self._upsample:
            steps.steps += [conv.fresh(), ConvNeXtState(block)]
        return steps


class FastLayers:
    """The decoder's `decoder` layers for one signal: states over `FastWeights`' shared tensors."""

    def __init__(self, weights: FastWeights) -> None:
        self.steps: list = [weights._first.fresh()]
        for block in weights._blocks:
            self.steps += [step.fresh() for step in block]
        self.steps += [weights._last_act, weights._out_conv.fresh()]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for step in self.steps:
            x = step(x)
        return x


class FastIncrementalDecoder(IncrementalDecoder):
    """`IncrementalDecoder` with the upsampling blocks on `FastWeights` (same chunk plan, prefix, push)."""

    def __init__(
        self,
        decoder: SpeechDecoder,
        weights: FastWeights,
        prefix: torch.Tensor | None = None,
        chunk_size: int = CHUNK_FRAMES,
        left_context: int = LEFT_CONTEXT_FRAMES,
    ) -> None:
        self.weights = weights
        super().__init__(decoder, prefix=prefix, chunk_size=chunk_size, left_context=left_context)

    def _reset(self) -> None:
        super()._reset()
        self.upsample = self.weights.fresh_upsample()
        self.layers = self.weights.fresh()


class FastCodec:
    """The fast decode of a loaded `SpeechTokenizer` (see the module doc); shares its weights.

    `conv_dtype`: "bf16" (the opt-in modes' default) or "fp32" (only SnakeBeta and the piecewise
    decode change bits). `piece_frames`: the one-shot decode's piece.
    """

    def __init__(self, tokenizer, conv_dtype: str = "bf16", piece_frames: int = PIECE_FRAMES) -> None:
        if conv_dtype not in CONV_DTYPES:
            raise ValueError(f"conv_dtype must be one of {sorted(CONV_DTYPES)}, got {conv_dtype!r}")
        if piece_frames < 1:
            raise ValueError("piece_frames must be at least 1")
        if tokenizer.dtype != torch.float32 or tokenizer.device.type != "cpu":
            raise ValueError(f"the fast codec runs a float32 codec on the CPU (this one: {tokenizer.dtype}, {tokenizer.device})")
        self.tokenizer = tokenizer
        self.conv_dtype = conv_dtype
        self.piece_frames = piece_frames
        self.weights = FastWeights(tokenizer.decoder, CONV_DTYPES[conv_dtype])

    @property
    def name(self) -> str:
        """What results' `metadata["codec"]` says, e.g. "fast-bf16" (with "-torch-snake" where snake.c could not be built)."""
        return f"fast-{self.conv_dtype}" + ("" if snake_kernel.describe() == "koe-c" else "-torch-snake")

    @property
    def decoder(self) -> SpeechDecoder:
        return self.tokenizer.decoder

    @property
    def samples_per_frame(self) -> int:
        return self.tokenizer.samples_per_frame

    @property
    def sample_rate(self) -> int:
        return self.tokenizer.sample_rate

    @property
    def device(self) -> torch.device:
        return self.tokenizer.device

    def incremental_decoder(self, prefix: torch.Tensor | None = None) -> FastIncrementalDecoder:
        return FastIncrementalDecoder(self.decoder, self.weights, prefix=prefix)

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """As `SpeechTokenizer.decode`: one float32 waveform per sample, trimmed to its length.

        `codes` (B, T, K) or (T, K) with -1 padding, or a list of (T_i, K). A sample's length is
        its number of frames whose first code is not -1 (upstream's rule); its first that many
        frames (-1 as 0) are decoded alone, in pieces, which is what the padded batch gives them:
        the decoder is causal, so the frames after them change none of their samples.
        """
        if isinstance(codes, torch.Tensor):
            rows = list(codes.unsqueeze(0) if codes.dim() == 2 else codes)
        else:
            rows = [c.long() for c in codes]
        out = []
        for row in rows:
            if row.dim() != 2:
                raise ValueError(f"codes must be (T, K) per sample, got shape {tuple(row.shape)}")
            n = int((row[:, 0] > -1).sum())
            frames = row[:n].clamp(min=0).to(self.device, torch.long)
            decoder = self.incremental_decoder()
            pieces = [decoder.push(frames[i : i + self.piece_frames]) for i in range(0, n, self.piece_frames)]
            out.append(torch.cat(pieces) if pieces else torch.zeros(0))
        return out


def fast_codec_for(tokenizer, precision: str | None, setting: str | None = None) -> FastCodec | None:
    """The fast codec an engine in `precision` decodes with, or None for the exact codec.

    `setting` is `KOE_FAST_CODEC` ("0": exact codec in every mode, "1": the fast codec in every
    mode, "bf16"/"fp32": that fast codec in every mode); unset, the int8 and int4 modes get the fast
    codec (bf16 convolutions where the CPU has bf16 dot products, `cpu_has_bf16_dot`, else fp32) and
    the others (fp32, upstream's bits; bf16, upstream's bf16 bits) the exact codec.
    The bf16 mode's codec is itself bfloat16 (upstream's bf16 path) and never gets the fast one.
    """
    setting = (setting or "").strip().lower()
    if setting not in ("", "0", "exact", "off", "1", "fast", "on", *CONV_DTYPES):
        raise ValueError(f"KOE_FAST_CODEC={setting!r}: use 0 (the exact codec), 1 (the fast codec), bf16 or fp32")
    if setting in ("0", "exact", "off") or precision == "bf16":
        return None
    if setting in CONV_DTYPES:
        return FastCodec(tokenizer, setting)
    if setting in ("1", "fast", "on") or precision in ("int8", "int4"):
        return FastCodec(tokenizer, "bf16" if cpu_has_bf16_dot() else "fp32")
    return None


@functools.cache
def cpu_has_bf16_dot() -> bool:
    """Whether the CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX-BF16, from Linux's CPU
    flags). There oneDNN's bf16 convolutions ran at about twice the float32 rate; elsewhere it emulates
    bf16, which was not measured to gain, so the default fast codec keeps float32 convolutions."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return re.search(r"\b(avx512_bf16|amx_bf16)\b", flags) is not None


__all__ = ["PIECE_FRAMES", "FastCodec", "FastIncrementalDecoder", "fast_codec_for"]
