"""VoxCPM's AudioVAE (a causal DAC-style conv autoencoder), both versions, named as the release.

Version 1 is upstream's `modules/audiovae/audio_vae.py` (VoxCPM 1.5 and the 0.5B release: one
sample rate in and out); version 2 is `audio_vae_v2.py` (VoxCPM2: 16 kHz in, 48 kHz out, the
decoder conditioned on the output rate). Parameter names are upstream's `state_dict` keys, so a
released `audiovae.safetensors` loads strictly: old-style `torch.nn.utils.weight_norm` convs store
`weight_g` (per output channel; per *input* channel for the transposed convs, dim 0 of their
weight) and `weight_v`, Snake's `alpha` is (1, C, 1), and V2 keeps `decoder.sr_bin_boundaries`
(an int32 buffer) and `decoder.sr_cond_model.<i>` for the decoder blocks' indices.

How koe matches upstream bit for bit (CPU, float32):
- weight norm is `torch._weight_norm(v, g, 0)`, the op upstream's forward pre-hook runs on every
  call. koe runs it once and reuses the result until `weight_g` / `weight_v` change (their storage
  or version counter: loading a state dict, `.to()`), which is the same tensor bit for bit;
- every conv is `F.conv1d` / `F.conv_transpose1d` with padding 0 on a left-zero-padded input, as
  upstream's `CausalConv1d` (`F.pad(x, (2 p - output_padding, 0))`; V1 ignores output_padding,
  which moves V1's odd-stride encoder convs one sample left of V2's) and `CausalTransposeConv1d`
  (output cut by `2 p - output_padding` = stride samples on the right);
- Snake is upstream's op order, `x + (alpha + 1e-9).reciprocal() * sin(alpha * x).pow(2)`, done
  in place on its own temporaries when no gradient is recorded (the same kernels on the same
  shapes and layouts, so the same bits);
- the streaming decoder is upstream's `StreamingVAEDecoder` as a state object: each padded conv
  keeps the last `pad` input frames of everything it has seen (zeros at first), each transposed
  conv the last input frame, and cuts `stride` output samples on the left as well.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["AudioVAE", "COND_TYPES", "VAEConfig", "VAEStreamDecoder"]

COND_TYPES = ("scale_bias", "scale_bias_init", "add", "concat")

# upstream's pydantic defaults: AudioVAEConfig (audio_vae.py) and AudioVAEConfigV2 (audio_vae_v2.py)
_V1 = dict(
    encoder_dim=128,
    encoder_rates=(2, 5, 8, 8),
    latent_dim=64,
    decoder_dim=1536,
    decoder_rates=(8, 8, 5, 2),
    depthwise=True,
    sample_rate=16000,
    use_noise_block=False,
)
_V2 = dict(
    _V1,
    decoder_dim=2048,
    decoder_rates=(8, 6, 5, 2, 2, 2),
    out_sample_rate=48000,
    sr_bin_boundaries=(20000, 30000, 40000),
    cond_type="scale_bias",
    cond_dim=128,
    cond_out_layer=False,
)
_DEFAULTS = {1: _V1, 2: _V2}
_INTS = ("encoder_dim", "latent_dim", "decoder_dim", "sample_rate", "out_sample_rate", "cond_dim")
_BOOLS = ("depthwise", "use_noise_block", "cond_out_layer")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class VAEConfig:
    """Upstream's AudioVAE config; `from_json(d, version)` fills in that version's defaults.

    V1 has no output-rate fields: its `out_sample_rate` is `sample_rate`, `sr_bin_boundaries` None
    (the cond fields then keep V2's defaults and mean nothing)."""

    version: int
    encoder_dim: int
    encoder_rates: tuple[int, ...]
    latent_dim: int
    decoder_dim: int
    decoder_rates: tuple[int, ...]
    depthwise: bool
    sample_rate: int
    out_sample_rate: int
    use_noise_block: bool = False
    sr_bin_boundaries: tuple[int, ...] | None = None
    cond_type: str = "scale_bias"
    cond_dim: int = 128
    cond_out_layer: bool = False

    @classmethod
    def from_json(cls, d: dict | None, version: int) -> VAEConfig:
        """`audio_vae_config` of a release's config.json (None: all defaults). Unknown keys are
        ignored, as upstream's pydantic model ignores them; V1 ignores V2's fields likewise."""
        if version not in _DEFAULTS:
            raise ValueError(f"AudioVAE version must be 1 or 2, not {version!r}")
        if d is not None and not isinstance(d, dict):
            raise ValueError(f"audio_vae_config must be an object, not {type(d).__name__}")
        values: dict[str, Any] = dict(_DEFAULTS[version])
        values.update({k: v for k, v in (d or {}).items() if k in _DEFAULTS[version]})
        for name in ("encoder_rates", "decoder_rates", "sr_bin_boundaries"):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        if version == 1:
            values["out_sample_rate"] = values["sample_rate"]
        return cls(version=version, **values)

    def __post_init__(self) -> None:
        if self.version not in _DEFAULTS:
            raise ValueError(f"AudioVAE version must be 1 or 2, not {self.version!r}")
        for name in _INTS:
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise ValueError(f"audio_vae_config.{name} must be a positive integer, not {value!r}")
        for name in _BOOLS:
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"audio_vae_config.{name} must be true or false, not {getattr(self, name)!r}")
        for name in ("encoder_rates", "decoder_rates"):
            rates = getattr(self, name)
            if not isinstance(rates, tuple) or not rates or not all(_is_int(r) and r > 0 for r in rates):
                raise ValueError(f"audio_vae_config.{name} must be a non-empty list of positive integers, not {rates!r}")
        if self.decoder_dim < 2 ** len(self.decoder_rates):
            raise ValueError(
                f"audio_vae_config.decoder_dim ({self.decoder_dim}) must be at least 2 ** len(decoder_rates) "
                f"= {2 ** len(self.decoder_rates)}: each decoder block halves the channels"
            )
        if self.cond_type not in COND_TYPES:
            raise ValueError(f"audio_vae_config.cond_type must be one of {', '.join(COND_TYPES)}, not {self.cond_type!r}")
        bounds = self.sr_bin_boundaries
        if bounds is not None:
            if self.version == 1:
                raise ValueError("audio_vae_config.sr_bin_boundaries is a VoxCPM2 (version 2) field")
            if not isinstance(bounds, tuple) or not all(_is_int(b) for b in bounds) or list(bounds) != sorted(bounds):
                raise ValueError(f"audio_vae_config.sr_bin_boundaries must be an ascending list of integers or null, not {bounds!r}")
            if self.cond_type == "concat" and not self.cond_out_layer:
                raise ValueError("audio_vae_config.cond_out_layer must be true for cond_type 'concat'")
        if self.version == 1 and self.out_sample_rate != self.sample_rate:
            raise ValueError("audio_vae_config.out_sample_rate: version 1 decodes at its sample_rate")

    @property
    def hop_length(self) -> int:
        """Input samples per latent frame (the encoder's rates)."""
        return math.prod(self.encoder_rates)

    @property
    def chunk_size(self) -> int:
        return self.hop_length

    @property
    def decode_chunk_size(self) -> int:
        """Output samples per latent frame (the decoder's rates)."""
        return math.prod(self.decoder_rates)

    def to_json(self) -> dict:
        """Upstream's config dict for this version (V1 without V2's fields)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if k in _DEFAULTS[self.version]}


# ---------------------------------------------------------------------------------------------
# layers: every forward takes (x, state); state is None, or a streaming decoder's dict of tails


def _no_grad_here(*tensors: torch.Tensor) -> bool:
    return not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors)


class _WeightNormed(nn.Module):
    """`weight_g` / `weight_v` as `torch.nn.utils.weight_norm(module)` leaves them (dim 0)."""

    def _init_weight_norm(self, v_shape: tuple[int, ...], bias_channels: int, bias: bool) -> None:
        v = torch.empty(v_shape)
        nn.init.kaiming_uniform_(v, a=math.sqrt(5))
        self.weight_g = nn.Parameter(torch.norm_except_dim(v, 2, 0))
        self.weight_v = nn.Parameter(v)
        self.bias = nn.Parameter(torch.zeros(bias_channels)) if bias else None
        self._folded: tuple | None = None

    def weight(self) -> torch.Tensor:
        """`torch._weight_norm(weight_v, weight_g, 0)` = g v / ||v||, as upstream's hook computes it,
        kept until the parameters change (same storage and version counter: same bits)."""
        g, v = self.weight_g, self.weight_v
        if not _no_grad_here(g, v):
            return torch._weight_norm(v, g, 0)
        key = (g.data_ptr(), g._version, v.data_ptr(), v._version, g.device, g.dtype, torch.is_inference_mode_enabled())
        if self._folded is None or self._folded[0] != key:
            # the detached aliases keep the old storages alive, so no new tensor can reuse their addresses
            self._folded = (key, torch._weight_norm(v, g, 0), g.detach(), v.detach())
        return self._folded[1]


class WNCausalConv1d(_WeightNormed):
    """Upstream's `WNCausalConv1d`: `left_pad` zeros in front (2 p, or 2 p - output_padding in V2),
    then a padding-free conv; in a stream, the last `left_pad` input frames seen instead of zeros."""

    def __init__(
        self, c_in: int, c_out: int, kernel_size: int, *, stride: int = 1, dilation: int = 1, groups: int = 1, left_pad: int = 0, bias: bool = True
    ) -> None:
        super().__init__()
        self._init_weight_norm((c_out, c_in // groups, kernel_size), c_out, bias)
        self.stride, self.dilation, self.groups, self.left_pad = stride, dilation, groups, left_pad

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        p = self.left_pad
        if p and state is not None:
            prev = state.get(self)
            if prev is None:
                prev = x.new_zeros(x.shape[0], x.shape[1], p)
            x = torch.cat([prev, x], dim=-1)
            state[self] = x[..., -p:].contiguous()
        elif p:
            x = F.pad(x, (p, 0))
        return F.conv1d(x, self.weight(), self.bias, self.stride, 0, self.dilation, self.groups)


class WNCausalTransposeConv1d(_WeightNormed):
    """Upstream's `WNCausalTransposeConv1d` (kernel 2 s, stride s): a padding-free transposed conv
    cut by `trim` samples on the right. In a stream, upstream's `StreamingVAEDecoder`: the last
    `(kernel - 1) // stride` input frames (zeros at first) go in front, and their `context * stride`
    output samples are cut on the left."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int, trim: int) -> None:
        super().__init__()
        self._init_weight_norm((c_in, c_out, kernel_size), c_out, True)
        self.stride, self.trim = stride, trim
        self.context = (kernel_size - 1) // stride

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        left = 0
        if state is not None and self.context:
            prev = state.get(self)
            if prev is None:
                prev = x.new_zeros(x.shape[0], x.shape[1], self.context)
            x = torch.cat([prev, x], dim=-1)
            state[self] = x[..., -self.context :].contiguous()
            left = self.context * self.stride
        y = F.conv_transpose1d(x, self.weight(), self.bias, self.stride)
        return y[..., left : y.shape[-1] - self.trim]


class Snake1d(nn.Module):
    """x + sin(alpha x)^2 / (alpha + 1e-9), alpha (1, C, 1), in upstream's op order."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        alpha = self.alpha
        inv = (alpha + 1e-9).reciprocal()
        if not _no_grad_here(x, alpha):
            return x + inv * torch.sin(alpha * x).pow(2)
        s = alpha * x
        return s.sin_().pow_(2).mul_(inv).add_(x)


class _Tanh(nn.Module):
    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        return torch.tanh(x)


def _chain(layers: nn.Module, x: torch.Tensor, state: dict | None) -> torch.Tensor:
    for layer in layers:
        x = layer(x, state)
    return x


class CausalResidualUnit(nn.Module):
    """Snake, kernel-7 conv with `dilation` (groups: depthwise), Snake, 1x1 conv; plus the input."""

    def __init__(self, dim: int, dilation: int, groups: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(dim), WNCausalConv1d(dim, dim, 7, dilation=dilation, groups=groups, left_pad=6 * dilation), Snake1d(dim), WNCausalConv1d(dim, dim, 1)
        )

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        y = _chain(self.block, x, state)
        return y.add_(x) if _no_grad_here(x, y) else x + y


class CausalEncoderBlock(nn.Module):
    """Three residual units (dilations 1, 3, 9) at `dim // 2` channels, Snake, a conv of kernel 2 s
    and stride s to `dim` channels."""

    def __init__(self, dim: int, stride: int, groups: int, version: int) -> None:
        super().__init__()
        c = dim // 2
        pad = 2 * math.ceil(stride / 2) - (stride % 2 if version == 2 else 0)
        self.block = nn.Sequential(
            *(CausalResidualUnit(c, d, groups) for d in (1, 3, 9)), Snake1d(c), WNCausalConv1d(c, dim, 2 * stride, stride=stride, left_pad=pad)
        )

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        return _chain(self.block, x, state)


class NoiseBlock(nn.Module):
    """x + n * (1x1 conv of x), n = `torch.randn((B, 1, T))` from torch's generator, as upstream draws it."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = WNCausalConv1d(dim, dim, 1, bias=False)

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        b, _, t = x.shape
        noise = torch.randn((b, 1, t), device=x.device, dtype=x.dtype)
        return x + noise * self.linear(x, state)


class CausalDecoderBlock(nn.Module):
    """Snake, transposed conv (kernel 2 s, stride s) to `c_out`, [noise], three residual units."""

    def __init__(self, c_in: int, c_out: int, stride: int, groups: int, noise: bool) -> None:
        super().__init__()
        trim = 2 * math.ceil(stride / 2) - stride % 2  # = stride
        layers: list[nn.Module] = [Snake1d(c_in), WNCausalTransposeConv1d(c_in, c_out, 2 * stride, stride, trim)]
        if noise:
            layers.append(NoiseBlock(c_out))
        layers += [CausalResidualUnit(c_out, d, groups) for d in (1, 3, 9)]
        self.block = nn.Sequential(*layers)
        self.input_channels = c_in

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        return _chain(self.block, x, state)


class SampleRateConditionLayer(nn.Module):
    """V2's output-rate condition before a decoder block: `x * scale[i] + bias[i]` (scale_bias,
    scale_bias_init), `x + embed[i]` (add), or `cat(x, embed[i] over time)` (concat); then Snake and
    a 1x1 conv when `out_layer`. i is the output rate's bucket."""

    def __init__(self, dim: int, buckets: int, cond_type: str, cond_dim: int, out_layer: bool) -> None:
        super().__init__()
        self.cond_type = cond_type
        width = dim
        if cond_type in ("scale_bias", "scale_bias_init"):
            self.scale_embed = nn.Embedding(buckets, dim)
            self.bias_embed = nn.Embedding(buckets, dim)
        elif cond_type == "add":
            self.cond_embed = nn.Embedding(buckets, dim)
        else:  # concat
            self.cond_embed = nn.Embedding(buckets, cond_dim)
            width = dim + cond_dim
        self.out_layer = nn.Sequential(Snake1d(width), WNCausalConv1d(width, dim, 1)) if out_layer else None

    def forward(self, x: torch.Tensor, idx: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        if self.cond_type == "concat":
            e = self.cond_embed(idx).unsqueeze(-1)  # upstream repeats it over time (which works for batch 1 only)
            x = torch.cat([x, e.expand(x.shape[0], -1, x.shape[-1])], dim=1)
        elif self.cond_type == "add":
            x = x + self.cond_embed(idx).unsqueeze(-1)
        else:
            x = x * self.scale_embed(idx).unsqueeze(-1) + self.bias_embed(idx).unsqueeze(-1)
        return x if self.out_layer is None else _chain(self.out_layer, x, state)


class CausalEncoder(nn.Module):
    def __init__(self, cfg: VAEConfig) -> None:
        super().__init__()
        d = cfg.encoder_dim
        layers: list[nn.Module] = [WNCausalConv1d(1, d, 7, left_pad=6)]
        for stride in cfg.encoder_rates:
            d *= 2
            layers.append(CausalEncoderBlock(d, stride, d // 2 if cfg.depthwise else 1, cfg.version))
        self.block = nn.Sequential(*layers)
        self.fc_mu = WNCausalConv1d(d, cfg.latent_dim, 3, left_pad=2)
        self.fc_logvar = WNCausalConv1d(d, cfg.latent_dim, 3, left_pad=2)  # in the checkpoint; encode needs only mu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 1, T) -> mu (B, latent, T / hop)."""
        return self.fc_mu(_chain(self.block, x, None))


class CausalDecoder(nn.Module):
    def __init__(self, cfg: VAEConfig) -> None:
        super().__init__()
        c, z = cfg.decoder_dim, cfg.latent_dim
        if cfg.depthwise:
            layers: list[nn.Module] = [WNCausalConv1d(z, z, 7, groups=z, left_pad=6), WNCausalConv1d(z, c, 1)]
        else:
            layers = [WNCausalConv1d(z, c, 7, left_pad=6)]
        for i, stride in enumerate(cfg.decoder_rates):
            c_in, c_out = c // 2**i, c // 2 ** (i + 1)
            layers.append(CausalDecoderBlock(c_in, c_out, stride, c_out if cfg.depthwise else 1, cfg.use_noise_block))
        layers += [Snake1d(c_out), WNCausalConv1d(c_out, 1, 7, left_pad=6), _Tanh()]
        self.model = nn.ModuleList(layers)
        self.sr_cond_model: nn.ModuleList | None = None
        if cfg.sr_bin_boundaries is not None:
            self.register_buffer("sr_bin_boundaries", torch.tensor(cfg.sr_bin_boundaries, dtype=torch.int32))
            buckets = len(cfg.sr_bin_boundaries) + 1
            self.sr_cond_model = nn.ModuleList(
                [
                    SampleRateConditionLayer(layer.input_channels, buckets, cfg.cond_type, cfg.cond_dim, cfg.cond_out_layer)
                    if isinstance(layer, CausalDecoderBlock)
                    else None
                    for layer in layers
                ]
            )

    def forward(self, z: torch.Tensor, sr_idx: torch.Tensor | None = None, state: dict | None = None) -> torch.Tensor:
        x = z
        conds = self.sr_cond_model if self.sr_cond_model is not None else [None] * len(self.model)
        for layer, cond in zip(self.model, conds):
            if cond is not None:
                x = cond(x, sr_idx, state)
            x = layer(x, state)
        return x


class AudioVAE(nn.Module):
    """`encoder` (audio -> latent mu) and `decoder` (latent -> audio in [-1, 1]), names as upstream's."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = CausalEncoder(config)
        self.decoder = CausalDecoder(config)

    @property
    def latent_dim(self) -> int:
        return self.config.latent_dim

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    @property
    def out_sample_rate(self) -> int:
        return self.config.out_sample_rate

    def encode(self, audio: torch.Tensor, sample_rate: int | None = None) -> torch.Tensor:
        """(B, T) or (B, 1, T) audio at `sample_rate` (None: the config's) -> mu (B, latent, ceil(T / hop)).

        Upstream's `preprocess`: zeros on the right up to a whole hop; the rate must be the VAE's."""
        if sample_rate is not None and sample_rate != self.config.sample_rate:
            raise ValueError(f"the AudioVAE encodes {self.config.sample_rate} Hz audio, not {sample_rate} Hz")
        if audio.ndim == 2:
            audio = audio.unsqueeze(1)
        if audio.ndim != 3 or audio.shape[1] != 1:
            raise ValueError(f"audio must be (B, T) or (B, 1, T), not {tuple(audio.shape)}")
        hop, length = self.config.hop_length, audio.shape[-1]
        audio = F.pad(audio, (0, -(-length // hop) * hop - length))
        return self.encoder(audio)

    def _sr_index(self, z: torch.Tensor, out_sample_rate: int | torch.Tensor | None) -> torch.Tensor | None:
        """The output rate's bucket, `torch.bucketize(rate, sr_bin_boundaries)` as upstream (V2 only)."""
        if self.decoder.sr_cond_model is None:
            if out_sample_rate is not None and self.config.version == 1 and out_sample_rate != self.config.sample_rate:
                raise ValueError(f"this AudioVAE decodes at {self.config.sample_rate} Hz only, not {out_sample_rate}")
            return None
        rate = self.config.out_sample_rate if out_sample_rate is None else out_sample_rate
        if not isinstance(rate, torch.Tensor):
            rate = torch.tensor([rate], device=z.device, dtype=torch.int32)
        return torch.bucketize(rate, self.decoder.sr_bin_boundaries)

    def decode(self, z: torch.Tensor, out_sample_rate: int | torch.Tensor | None = None) -> torch.Tensor:
        """Latent (B, latent, T) -> audio (B, 1, T * decode_chunk_size). V2 with a rate condition:
        `out_sample_rate` picks the bucket (None: the config's), as upstream's `sr_cond`."""
        return self.decoder(z, self._sr_index(z, out_sample_rate))

    def stream_decoder(self, out_sample_rate: int | torch.Tensor | None = None) -> VAEStreamDecoder:
        """A fresh streaming decoder (V2's `streaming_decode()`). V1 has none upstream: VoxCPM 1.5
        re-decodes an overlap of patches with `decode` (the engine does that)."""
        if self.config.version == 1:
            raise NotImplementedError(
                "VoxCPM 1.5's AudioVAE (version 1) has no streaming decoder upstream; stream by re-decoding the last patches with decode(), as upstream does"
            )
        return VAEStreamDecoder(self, out_sample_rate)


class VAEStreamDecoder:
    """Upstream's `StreamingVAEDecoder` as explicit state: `decode(z)` decodes only the new latent
    frames (B, latent, t) -> (B, 1, t * decode_chunk_size), each causal conv carrying its input tail.

    The first call sees zeros as history, exactly like a one-shot decode; later calls are upstream's
    chunk-by-chunk bits (close to, not equal to, one decode of the whole: float sums of other shapes).
    """

    def __init__(self, vae: AudioVAE, out_sample_rate: int | torch.Tensor | None = None) -> None:
        self.vae = vae
        self.out_sample_rate = out_sample_rate
        self.tails: dict[nn.Module, torch.Tensor] = {}

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.vae.decoder(z, self.vae._sr_index(z, self.out_sample_rate), self.tails)

    def reset(self) -> None:
        """Forget the history: the next `decode` starts a new stream."""
        self.tails.clear()
