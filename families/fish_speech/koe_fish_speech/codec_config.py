"""Fish Speech S2's codec (upstream's modded DAC, `codec.pth`) as data: its sizes, and the released
tensor names and shapes they imply.

The release ships no codec config: upstream always builds the codec from its packaged
`configs/modded_dac_vq.yaml`, whose values are `CodecConfig()`'s defaults (391 M parameters). A
stand-in (koe's tiny fixture) differs only in sizes, and those are read from the checkpoint's
tensor shapes by `CodecConfig.from_state`:

- read: `encoder_dim` (the first conv's width), `encoder_rates` (one per encoder block, the strided
  conv's kernel / 2), `encoder_transformer_layers` (per block), `decoder_dim`, `decoder_rates` (the
  transposed convs' kernel / 2), `n_codebooks`, `codebook_size`, `codebook_dim`,
  `semantic_codebook_size`, `downsample_factor` (the quantizer's strided convs' kernels),
  `quantizer_layers`, `quantizer_heads` (`wqkv` rows / 3 / 64), `quantizer_intermediate_size`;
  the latent width (the encoder's last conv, the quantizer's `input_dim`) must be
  `encoder_dim * 2 ** len(encoder_rates)`, as upstream derives it. Then every tensor is checked
  against `released_shapes(config)`: a checkpoint that does not fit is a `CodecCheckpointError`.
- fixed (upstream's code or YAML, not in the weights): causal convs, 44.1 kHz, head width 64,
  rotary base 10000, RMSNorm eps 1e-5, the encoder transformers' window 512 frames (`getattr` of a
  partial's missing attribute: its default), the quantizer transformers' window 128; an encoder
  transformer has `dim // 64` heads and a `3 * dim` feed-forward; the quantizer's transformers are
  as wide as its input (no input projection) and its downsampling keeps the width.
- inert: the YAML's `decoder_transformer_layers` builds a transformer that upstream's
  `DecoderBlock` never uses (it is commented out of its `nn.Sequential`): no weights, no compute.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

SAMPLE_RATE = 44100
HEAD_DIM = 64
ROPE_BASE = 10000
NORM_EPS = 1e-5
ENCODER_WINDOW = 512
QUANTIZER_WINDOW = 128

G, V = "parametrizations.weight.original0", "parametrizations.weight.original1"  # weight norm (torch.nn.utils.parametrizations)


class CodecCheckpointError(ValueError):
    """A checkpoint that is not (or does not fit) a Fish Speech S2 codec."""


@dataclass(frozen=True)
class CodecConfig:
    """The modded DAC's sizes; defaults are the packaged `modded_dac_vq.yaml` (the release)."""

    encoder_dim: int = 64
    encoder_rates: tuple[int, ...] = (2, 4, 8, 8)
    encoder_transformer_layers: tuple[int, ...] = (0, 0, 0, 4)
    decoder_dim: int = 1536
    decoder_rates: tuple[int, ...] = (8, 8, 4, 2)
    n_codebooks: int = 9
    codebook_size: int = 1024
    codebook_dim: int = 8
    semantic_codebook_size: int = 4096
    downsample_factor: tuple[int, ...] = (2, 2)
    quantizer_layers: int = 8
    quantizer_heads: int = 16
    quantizer_intermediate_size: int = 3072

    def __post_init__(self) -> None:
        if len(self.encoder_transformer_layers) != len(self.encoder_rates):
            raise ValueError("encoder_transformer_layers needs one count per encoder block")
        sizes = (self.encoder_dim, self.decoder_dim, self.n_codebooks, self.codebook_size, self.codebook_dim, self.semantic_codebook_size)
        if min(sizes) <= 0 or min(self.encoder_rates + self.decoder_rates + self.downsample_factor, default=1) <= 0:
            raise ValueError(f"codec sizes must be positive: {self}")
        for i, n in enumerate(self.encoder_transformer_layers):
            if n and self.encoder_width(i) % HEAD_DIM:
                raise ValueError(f"encoder block {i} has a transformer: its width {self.encoder_width(i)} must be a multiple of {HEAD_DIM}")
        if self.decoder_dim % 2 ** len(self.decoder_rates):
            raise ValueError(f"decoder_dim {self.decoder_dim} must halve {len(self.decoder_rates)} times")
        if self.quantizer_heads <= 0 or self.latent_dim % self.quantizer_heads:
            raise ValueError(f"the quantizer's width {self.latent_dim} must divide by its {self.quantizer_heads} heads")

    def encoder_width(self, block: int) -> int:
        """Channels out of encoder block `block` (each block doubles them)."""
        return self.encoder_dim * 2 ** (block + 1)

    @property
    def latent_dim(self) -> int:
        """The encoder's output width, the quantizer's input and its transformers' width."""
        return self.encoder_dim * 2 ** len(self.encoder_rates)

    @property
    def hop_length(self) -> int:
        """Samples per encoder frame (512 released)."""
        return math.prod(self.encoder_rates)

    @property
    def frame_length(self) -> int:
        """Samples per code frame: the hop times the quantizer's downsampling (2048 released, ~21.5 Hz)."""
        return self.hop_length * math.prod(self.downsample_factor)

    @property
    def num_codebooks(self) -> int:
        """Code rows: the semantic codebook and the residual ones (10 released)."""
        return 1 + self.n_codebooks

    def yaml_overrides(self) -> dict:
        """The packaged YAML's entries this config sets, by their YAML paths (for an oracle's copy)."""
        d = asdict(self)
        q = {"input_dim": self.latent_dim, "n_codebooks": self.n_codebooks, "codebook_size": self.codebook_size, "codebook_dim": self.codebook_dim}
        q |= {"semantic_codebook_size": self.semantic_codebook_size, "downsample_factor": list(self.downsample_factor)}
        module = {
            "input_dim": self.latent_dim,
            "config": {
                "n_layer": self.quantizer_layers,
                "n_head": self.quantizer_heads,
                "dim": self.latent_dim,
                "intermediate_size": self.quantizer_intermediate_size,
            },
        }
        top = {
            k: list(d[k]) if isinstance(d[k], tuple) else d[k]
            for k in ("encoder_dim", "encoder_rates", "encoder_transformer_layers", "decoder_dim", "decoder_rates")
        }
        return top | {"quantizer": q | {"pre_module": module, "post_module": module}}

    @classmethod
    def from_state(cls, state: dict) -> CodecConfig:
        """The sizes a codec state dict (released names, `generator.` already dropped) implies;
        `CodecCheckpointError` for one that is not a modded DAC or whose tensors do not fit them."""
        shapes = {k: tuple(v.shape) for k, v in state.items()}

        def shape(key: str) -> tuple[int, ...]:
            if key not in shapes:
                raise CodecCheckpointError(f"not a Fish Speech S2 codec (modded DAC) state: it has no {key}")
            return shapes[key]

        def count(pattern: str) -> int:
            found = {int(m.group(1)) for k in shapes if (m := re.fullmatch(pattern, k))}
            if found != set(range(len(found))):
                raise CodecCheckpointError(f"codec state: the indices of {pattern!r} are not 0..n-1: {sorted(found)}")
            return len(found)

        def run(pattern: str) -> int:  # blocks numbered from 1 while `pattern.format(i)` is there
            n = 0
            while pattern.format(n + 1) in shapes:
                n += 1
            return n

        def half(kernel: int, what: str) -> int:
            if kernel % 2:
                raise CodecCheckpointError(f"codec state: {what} has an odd kernel {kernel} (upstream's is 2 x its stride)")
            return kernel // 2

        encoder_dim = shape(f"encoder.block.0.conv.{V}")[0]
        n_enc = run("encoder.block.{}.block.4.conv." + V)
        encoder_rates = tuple(half(shape(f"encoder.block.{i + 1}.block.4.conv.{V}")[-1], f"encoder block {i}") for i in range(n_enc))
        encoder_layers = tuple(count(rf"encoder\.block\.{i + 1}\.block\.5\.layers\.(\d+)\..*") for i in range(n_enc))
        decoder_dim = shape(f"decoder.model.0.conv.{V}")[0]
        n_dec = run("decoder.model.{}.block.1.conv." + V)
        decoder_rates = tuple(half(shape(f"decoder.model.{i + 1}.block.1.conv.{V}")[-1], f"decoder block {i}") for i in range(n_dec))
        semantic_size, codebook_dim = shape("quantizer.semantic_quantizer.quantizers.0.codebook.weight")
        codebook_size = shape("quantizer.quantizer.quantizers.0.codebook.weight")[0]
        n_down = count(r"quantizer\.downsample\.(\d+)\.0\.conv\.weight")
        downsample = tuple(shape(f"quantizer.downsample.{i}.0.conv.weight")[-1] for i in range(n_down))
        wqkv = shape("quantizer.pre_module.layers.0.attention.wqkv.weight")[0]
        if wqkv % (3 * HEAD_DIM):
            raise CodecCheckpointError(f"codec state: the quantizer's wqkv has {wqkv} rows, not 3 x heads x {HEAD_DIM}")
        try:
            config = cls(
                encoder_dim=encoder_dim,
                encoder_rates=encoder_rates,
                encoder_transformer_layers=encoder_layers,
                decoder_dim=decoder_dim,
                decoder_rates=decoder_rates,
                n_codebooks=count(r"quantizer\.quantizer\.quantizers\.(\d+)\.codebook\.weight"),
                codebook_size=codebook_size,
                codebook_dim=codebook_dim,
                semantic_codebook_size=semantic_size,
                downsample_factor=downsample,
                quantizer_layers=count(r"quantizer\.pre_module\.layers\.(\d+)\..*"),
                quantizer_heads=wqkv // (3 * HEAD_DIM),
                quantizer_intermediate_size=shape("quantizer.pre_module.layers.0.feed_forward.w1.weight")[0],
            )
        except ValueError as e:
            raise CodecCheckpointError(f"codec state: inconsistent sizes: {e}") from e
        check_shapes(shapes, config)
        return config


def check_shapes(shapes: dict[str, tuple[int, ...]], config: CodecConfig) -> None:
    """`CodecCheckpointError` naming the missing, unexpected and misshapen tensors, if any."""
    want = released_shapes(config)
    missing = [k for k in want if k not in shapes]
    unexpected = [k for k in shapes if k not in want]
    wrong = [f"{k} {shapes[k]} (expected {want[k]})" for k in want if k in shapes and shapes[k] != want[k]]
    if missing or unexpected or wrong:
        parts = [
            f"{what} {names[:6]}{' ...' if len(names) > 6 else ''} ({len(names)} in all)"
            for what, names in (("missing", missing), ("unexpected", unexpected), ("misshapen", wrong))
            if names
        ]
        raise CodecCheckpointError(f"codec state does not fit the codec its shapes describe: {'; '.join(parts)}")


def released_shapes(c: CodecConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of `codec.pth` (without `generator.`), in upstream's state-dict order."""
    out: dict[str, tuple[int, ...]] = {}

    def wn_conv(prefix: str, c_in: int, c_out: int, k: int, transposed: bool = False) -> None:
        out[f"{prefix}.conv.bias"] = (c_out,)
        out[f"{prefix}.conv.{G}"] = (c_in if transposed else c_out, 1, 1)
        out[f"{prefix}.conv.{V}"] = (c_in, c_out, k) if transposed else (c_out, c_in, k)

    def residual_unit(prefix: str, dim: int) -> None:
        out[f"{prefix}.block.0.alpha"] = (1, dim, 1)
        wn_conv(f"{prefix}.block.1", dim, dim, 7)
        out[f"{prefix}.block.2.alpha"] = (1, dim, 1)
        wn_conv(f"{prefix}.block.3", dim, dim, 1)

    def transformer(prefix: str, dim: int, layers: int, heads: int, hidden: int) -> None:
        for j in range(layers):
            p = f"{prefix}.layers.{j}"
            out[f"{p}.attention.wqkv.weight"] = (3 * heads * HEAD_DIM, dim)
            out[f"{p}.attention.wo.weight"] = (dim, heads * HEAD_DIM)
            out[f"{p}.feed_forward.w1.weight"] = (hidden, dim)
            out[f"{p}.feed_forward.w3.weight"] = (hidden, dim)
            out[f"{p}.feed_forward.w2.weight"] = (dim, hidden)
            for name in ("ffn_norm.weight", "attention_norm.weight", "attention_layer_scale.gamma", "ffn_layer_scale.gamma"):
                out[f"{p}.{name}"] = (dim,)
        out[f"{prefix}.norm.weight"] = (dim,)

    def convnext(prefix: str, dim: int) -> None:
        out[f"{prefix}.gamma"] = (dim,)
        out[f"{prefix}.dwconv.conv.weight"] = (dim, 1, 7)
        out[f"{prefix}.dwconv.conv.bias"] = (dim,)
        out[f"{prefix}.norm.weight"] = out[f"{prefix}.norm.bias"] = (dim,)
        out[f"{prefix}.pwconv1.weight"], out[f"{prefix}.pwconv1.bias"] = (4 * dim, dim), (4 * dim,)
        out[f"{prefix}.pwconv2.weight"], out[f"{prefix}.pwconv2.bias"] = (dim, 4 * dim), (dim,)

    def vector_quantizers(prefix: str, n: int, size: int) -> None:
        d, k = c.latent_dim, c.codebook_dim
        for i in range(n):
            p = f"{prefix}.quantizers.{i}"
            out[f"{p}.in_proj.bias"], out[f"{p}.in_proj.weight_g"], out[f"{p}.in_proj.weight_v"] = (k,), (k, 1, 1), (k, d, 1)
            out[f"{p}.out_proj.bias"], out[f"{p}.out_proj.weight_g"], out[f"{p}.out_proj.weight_v"] = (d,), (d, 1, 1), (d, k, 1)
            out[f"{p}.codebook.weight"] = (size, k)

    wn_conv("encoder.block.0", 1, c.encoder_dim, 7)
    for i, (stride, layers) in enumerate(zip(c.encoder_rates, c.encoder_transformer_layers)):
        width = c.encoder_width(i)
        for j in range(3):
            residual_unit(f"encoder.block.{i + 1}.block.{j}", width // 2)
        out[f"encoder.block.{i + 1}.block.3.alpha"] = (1, width // 2, 1)
        wn_conv(f"encoder.block.{i + 1}.block.4", width // 2, width, 2 * stride)
        if layers:
            transformer(f"encoder.block.{i + 1}.block.5", width, layers, width // HEAD_DIM, 3 * width)
    n = len(c.encoder_rates)
    out[f"encoder.block.{n + 1}.alpha"] = (1, c.latent_dim, 1)
    wn_conv(f"encoder.block.{n + 2}", c.latent_dim, c.latent_dim, 3)

    d = c.latent_dim
    vector_quantizers("quantizer.semantic_quantizer", 1, c.semantic_codebook_size)
    vector_quantizers("quantizer.quantizer", c.n_codebooks, c.codebook_size)
    for i, factor in enumerate(c.downsample_factor):
        out[f"quantizer.downsample.{i}.0.conv.weight"], out[f"quantizer.downsample.{i}.0.conv.bias"] = (d, d, factor), (d,)
        convnext(f"quantizer.downsample.{i}.1", d)
    for i, factor in enumerate(reversed(c.downsample_factor)):
        out[f"quantizer.upsample.{i}.0.conv.weight"], out[f"quantizer.upsample.{i}.0.conv.bias"] = (d, d, factor), (d,)
        convnext(f"quantizer.upsample.{i}.1", d)
    for name in ("pre_module", "post_module"):
        transformer(f"quantizer.{name}", d, c.quantizer_layers, c.quantizer_heads, c.quantizer_intermediate_size)

    wn_conv("decoder.model.0", c.latent_dim, c.decoder_dim, 7)
    for i, stride in enumerate(c.decoder_rates):
        c_in, c_out = c.decoder_dim // 2**i, c.decoder_dim // 2 ** (i + 1)
        out[f"decoder.model.{i + 1}.block.0.alpha"] = (1, c_in, 1)
        wn_conv(f"decoder.model.{i + 1}.block.1", c_in, c_out, 2 * stride, transposed=True)
        for j in range(3):
            residual_unit(f"decoder.model.{i + 1}.block.{j + 2}", c_out)
    m = len(c.decoder_rates)
    out[f"decoder.model.{m + 1}.alpha"] = (1, c.decoder_dim // 2**m, 1)
    wn_conv(f"decoder.model.{m + 2}", c.decoder_dim // 2**m, 1, 7)
    return out
