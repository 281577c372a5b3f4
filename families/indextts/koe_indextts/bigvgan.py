"""IndexTTS 1.5's vocoder: a BigVGAN generator that turns the GPT's latent into 24 kHz audio,
conditioned on a speaker embedding its own ECAPA-TDNN takes from the reference log-mel.

    latent (B, T, gpt_dim) -> conv_pre (k7) + cond_layer(spk)
      -> per stage i: ups[i] (transposed conv) [+ conds[i](spk)] -> mean of the AMP blocks
      -> anti-aliased Snake(Beta) -> conv_post (k7) -> tanh -> (B, 1, T * prod(upsample_rates))

Parameter names are `bigvgan_generator.pth`'s (`{"generator": state_dict}`): the generator's
convs are weight-normed there (`weight_g`, `weight_v`, torch's old-style `weight_norm`), which
`load_bigvgan` folds into one `weight` as upstream's `remove_weight_norm()` does
(`torch._weight_norm(v, g, 0)`); the anti-aliasing filters are buffers of the checkpoint and are
used as loaded. An AMP block's activation upsamples by 2 (replicate pad, transposed depthwise conv
with a Kaiser-windowed sinc, times 2), applies Snake/SnakeBeta (`koe.nn.conv`), and downsamples by
2 (replicate pad, strided depthwise conv): the same torch calls on the same shapes as upstream,
so CPU float32 gives upstream's bits.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conv import Snake, SnakeBeta

from .ecapa import ECAPA

_G = TypeVar("_G", bound="Generator")
_C = TypeVar("_C")

__all__ = [
    "AMPBlock1",
    "AMPBlock2",
    "AntiAliasActivation",
    "BigVGAN",
    "BigVGANConfig",
    "kaiser_sinc_filter",
    "load_bigvgan",
    "to_pcm_scale",
]


@dataclass(frozen=True)
class BigVGANConfig:
    """The `bigvgan:` section of IndexTTS's `config.yaml` (the generator's keys; training keys are ignored)."""

    gpt_dim: int
    num_mels: int
    speaker_embedding_dim: int
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    upsample_initial_channel: int
    resblock: str
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    activation: str
    snake_logscale: bool
    feat_upsample: bool
    cond_d_vector_in_each_upsampling_layer: bool
    sampling_rate: int = 24000

    def __post_init__(self) -> None:
        normalise_config(
            self,
            ("gpt_dim", "num_mels", "speaker_embedding_dim", "upsample_initial_channel", "sampling_rate"),
            ("snake_logscale", "feat_upsample", "cond_d_vector_in_each_upsampling_layer"),
        )
        if self.resblock not in ("1", "2"):
            raise ValueError(f"bigvgan config: resblock must be '1' or '2', got {self.resblock!r}")
        check_stages(self)
        wanted = 3 if self.resblock == "1" else 2
        if any(len(ds) < wanted for ds in self.resblock_dilation_sizes):
            raise ValueError(f"bigvgan config: resblock {self.resblock} needs {wanted} dilations per block")

    @property
    def hop_length(self) -> int:
        """Output samples per latent frame."""
        return math.prod(self.upsample_rates) * (4 if self.feat_upsample else 1)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BigVGANConfig:
        """From the yaml's `bigvgan` mapping; unknown (training) keys are ignored, a missing one is an error."""
        return config_from_mapping(cls, data)


# -- what both releases' configs share (BigVGAN v2's is koe_indextts.bigvgan2's) --------------------


def normalise_config(config: Any, ints: tuple[str, ...], bools: tuple[str, ...]) -> None:
    """A frozen generator config's stage lists as tuples of ints and `resblock` as a string; `ints`
    must be positive ints, `bools` true or false."""
    set_ = object.__setattr__
    for name in ("upsample_rates", "upsample_kernel_sizes", "resblock_kernel_sizes"):
        set_(config, name, tuple(int(v) for v in getattr(config, name)))
    set_(config, "resblock_dilation_sizes", tuple(tuple(int(d) for d in ds) for ds in config.resblock_dilation_sizes))
    set_(config, "resblock", str(config.resblock))
    for name in ints:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"bigvgan config: {name} must be a positive int, got {value!r}")
    for name in bools:
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"bigvgan config: {name} must be true or false, got {getattr(config, name)!r}")


def check_stages(config: Any) -> None:
    """The activation, and the stage and block lists' lengths, of a generator config."""
    if config.activation not in ("snake", "snakebeta"):
        raise ValueError(f"bigvgan config: activation must be 'snake' or 'snakebeta', got {config.activation!r}")
    if not config.upsample_rates or len(config.upsample_rates) != len(config.upsample_kernel_sizes):
        raise ValueError("bigvgan config: upsample_rates and upsample_kernel_sizes need one entry per stage")
    if config.upsample_initial_channel % (2 ** len(config.upsample_rates)):
        raise ValueError("bigvgan config: upsample_initial_channel must halve at every stage")
    if not config.resblock_kernel_sizes or len(config.resblock_kernel_sizes) != len(config.resblock_dilation_sizes):
        raise ValueError("bigvgan config: resblock_kernel_sizes and resblock_dilation_sizes need one entry per block")


def config_from_mapping(cls: type[_C], data: Mapping[str, Any]) -> _C:
    """A config dataclass from a mapping: unknown (training) keys ignored, a missing key without a
    default an error."""
    if not isinstance(data, Mapping):
        raise ValueError(f"bigvgan config must be a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    missing = sorted(name for name, f in known.items() if name not in data and f.default is MISSING)
    if missing:
        raise ValueError(f"bigvgan config: missing {', '.join(missing)}")
    return cls(**{k: data[k] for k in known if k in data})


def _padding(kernel_size: int, dilation: int = 1) -> int:
    return (kernel_size * dilation - dilation) // 2


# -- weight-normed convolutions ---------------------------------------------------------------------


class _WeightNormed(nn.Module):
    """A conv stored as the checkpoint stores it (`bias`, `weight_g`, `weight_v`: old-style weight
    norm over dim 0) until `fold()` makes it one `weight`, as `remove_weight_norm` does."""

    def __init__(self, weight_shape: tuple[int, ...], bias_channels: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(bias_channels))
        self.weight_g = nn.Parameter(torch.ones(weight_shape[0], *([1] * (len(weight_shape) - 1))))
        self.weight_v = nn.Parameter(torch.zeros(weight_shape))

    def fold(self) -> None:
        """Replace `weight_g` / `weight_v` by `weight = g v / ||v||` (`torch._weight_norm(v, g, 0)`)."""
        if "weight_v" not in self._parameters:
            return
        weight = torch._weight_norm(self.weight_v.detach(), self.weight_g.detach(), 0)
        del self._parameters["weight_g"], self._parameters["weight_v"]
        self.weight = nn.Parameter(weight, requires_grad=False)

    def current_weight(self) -> torch.Tensor:
        if "weight_v" in self._parameters:
            return torch._weight_norm(self.weight_v, self.weight_g, 0)
        return self.weight


class WNConv1d(_WeightNormed):
    """Weight-normed Conv1d, zero padded: `(B, C_in, T) -> (B, C_out, T')`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1, padding: int = 0) -> None:
        super().__init__((out_channels, in_channels, kernel_size), out_channels)
        self.dilation, self.padding = dilation, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, self.current_weight(), self.bias, 1, self.padding, self.dilation, 1)


class WNConvTranspose1d(_WeightNormed):
    """Weight-normed ConvTranspose1d: `(B, C_in, T) -> (B, C_out, T * stride)` for `padding = (k - stride) // 2`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int) -> None:
        super().__init__((in_channels, out_channels, kernel_size), out_channels)
        self.stride, self.padding = stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv_transpose1d(x, self.current_weight(), self.bias, self.stride, self.padding, 0, 1, 1)


# -- anti-aliased activation ------------------------------------------------------------------------


def kaiser_sinc_filter(cutoff: float, half_width: float, kernel_size: int) -> torch.Tensor:
    """A Kaiser-windowed sinc low-pass `(1, 1, kernel_size)` summing to 1 (float32), as BigVGAN's
    alias-free resampling builds it: window beta from the transition width, taps at half-integer
    times for an even kernel."""
    half = kernel_size // 2
    attenuation = 2.285 * (half - 1) * math.pi * (4 * half_width) + 7.95
    if attenuation > 50.0:
        beta = 0.1102 * (attenuation - 8.7)
    elif attenuation >= 21.0:
        beta = 0.5842 * (attenuation - 21) ** 0.4 + 0.07886 * (attenuation - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(kernel_size, beta=beta, periodic=False)
    if kernel_size % 2 == 0:
        t = torch.arange(-half, half) + 0.5
    else:
        t = torch.arange(kernel_size) - half
    if cutoff == 0:
        return torch.zeros_like(t).view(1, 1, kernel_size)
    taps = 2 * cutoff * window * torch.sinc(2 * cutoff * t)
    taps /= taps.sum()
    return taps.view(1, 1, kernel_size)


class _Upsample(nn.Module):
    """x2 (or `ratio`) band-limited upsampling; its filter buffer is the checkpoint's `upsample.filter`."""

    def __init__(self, ratio: int = 2, kernel_size: int = 12) -> None:
        super().__init__()
        self.ratio = ratio
        self.pad = kernel_size // ratio - 1
        self.crop_left = self.pad * ratio + (kernel_size - ratio) // 2
        self.crop_right = self.pad * ratio + (kernel_size - ratio + 1) // 2
        self.register_buffer("filter", kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, kernel_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        x = self.ratio * F.conv_transpose1d(x, self.filter.expand(channels, -1, -1), stride=self.ratio, groups=channels)
        return x[..., self.crop_left : -self.crop_right]


class _LowPass(nn.Module):
    """Strided depthwise low-pass on a replicate-padded input; its filter is `downsample.lowpass.filter`."""

    def __init__(self, stride: int = 2, kernel_size: int = 12) -> None:
        super().__init__()
        even = kernel_size % 2 == 0
        self.pad_left, self.pad_right = kernel_size // 2 - int(even), kernel_size // 2
        self.stride = stride
        self.register_buffer("filter", kaiser_sinc_filter(0.5 / stride, 0.6 / stride, kernel_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (self.pad_left, self.pad_right), mode="replicate")
        return F.conv1d(x, self.filter.expand(channels, -1, -1), stride=self.stride, groups=channels)


class _Downsample(nn.Module):
    def __init__(self, ratio: int = 2, kernel_size: int = 12) -> None:
        super().__init__()
        self.lowpass = _LowPass(ratio, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lowpass(x)


class AntiAliasActivation(nn.Module):
    """Upsample x2, Snake / SnakeBeta (`act`), downsample x2: `(B, C, T) -> (B, C, T)`."""

    def __init__(self, channels: int, kind: str, logscale: bool) -> None:
        super().__init__()
        self.act = SnakeBeta(channels, logscale=logscale) if kind == "snakebeta" else Snake(channels, logscale=logscale)
        self.upsample = _Upsample(2, 12)
        self.downsample = _Downsample(2, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(self.act(self.upsample(x)))


# -- AMP blocks -------------------------------------------------------------------------------------


class AMPBlock1(nn.Module):
    """Three residual pairs (activation, dilated conv, activation, conv): `(B, C, T) -> (B, C, T)`."""

    def __init__(self, channels: int, kernel_size: int, dilations: Sequence[int], kind: str, logscale: bool) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(WNConv1d(channels, channels, kernel_size, d, _padding(kernel_size, d)) for d in dilations[:3])
        self.convs2 = nn.ModuleList(WNConv1d(channels, channels, kernel_size, 1, _padding(kernel_size)) for _ in range(3))
        self.activations = nn.ModuleList(AntiAliasActivation(channels, kind, logscale) for _ in range(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (c1, c2) in enumerate(zip(self.convs1, self.convs2)):
            h = c2(self.activations[2 * i + 1](c1(self.activations[2 * i](x))))
            x = h + x
        return x


class AMPBlock2(nn.Module):
    """Two residual steps (activation, dilated conv): `(B, C, T) -> (B, C, T)`."""

    def __init__(self, channels: int, kernel_size: int, dilations: Sequence[int], kind: str, logscale: bool) -> None:
        super().__init__()
        self.convs = nn.ModuleList(WNConv1d(channels, channels, kernel_size, d, _padding(kernel_size, d)) for d in dilations[:2])
        self.activations = nn.ModuleList(AntiAliasActivation(channels, kind, logscale) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv, act in zip(self.convs, self.activations):
            x = conv(act(x)) + x
        return x


# -- the generator ----------------------------------------------------------------------------------


class Generator(nn.Module):
    """What both releases' generators share: `conv_pre` (k7) from `in_channels`, the stages (`ups[i]`,
    a transposed conv, then the mean of their AMP blocks), the anti-aliased activation and
    `conv_post` (k7), registered in the checkpoints' order."""

    def _build_trunk(self, config: Any, in_channels: int, block: type[nn.Module]) -> None:
        c0, kind, logscale = config.upsample_initial_channel, config.activation, config.snake_logscale
        self.num_kernels = len(config.resblock_kernel_sizes)
        self.conv_pre = WNConv1d(in_channels, c0, 7, 1, 3)
        self.ups = nn.ModuleList(
            nn.ModuleList([WNConvTranspose1d(c0 // 2**i, c0 // 2 ** (i + 1), k, u, (k - u) // 2)])
            for i, (u, k) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes))
        )
        self.resblocks = nn.ModuleList(
            block(c0 // 2 ** (i + 1), k, d, kind, logscale)
            for i in range(len(self.ups))
            for k, d in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes)
        )
        channels = c0 // 2 ** len(self.ups)
        self.activation_post = AntiAliasActivation(channels, kind, logscale)
        self.conv_post = WNConv1d(channels, 1, 7, 1, 3)

    def fold_weight_norm(self: _G) -> _G:
        """Fold every weight-normed conv into a plain weight (upstream's `remove_weight_norm()`)."""
        for module in self.modules():
            if isinstance(module, _WeightNormed):
                module.fold()
        return self

    def amp_blocks(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """Stage `i`'s AMP blocks on `x`, summed in order and divided by their count."""
        blocks = self.resblocks[i * self.num_kernels : (i + 1) * self.num_kernels]
        total = blocks[0](x)
        for block in blocks[1:]:
            total += block(x)
        return total / self.num_kernels


class BigVGAN(Generator):
    """GPT latent `(B, T, gpt_dim)` + reference log-mel `(B, T_ref, num_mels)` -> waveform `(B, 1, samples)` in [-1, 1]."""

    def __init__(self, config: BigVGANConfig) -> None:
        super().__init__()
        self.config = config
        c0 = config.upsample_initial_channel
        self._build_trunk(config, config.gpt_dim, AMPBlock1 if config.resblock == "1" else AMPBlock2)
        self.speaker_encoder = ECAPA(config.num_mels, embedding_dim=config.speaker_embedding_dim)
        self.cond_layer = nn.Conv1d(config.speaker_embedding_dim, c0, 1)
        if config.cond_d_vector_in_each_upsampling_layer:
            self.conds = nn.ModuleList(nn.Conv1d(config.speaker_embedding_dim, c0 // 2 ** (i + 1), 1) for i in range(len(self.ups)))

    def speaker_embedding(self, mel_ref: torch.Tensor) -> torch.Tensor:
        """Reference log-mel `(B, T_ref, num_mels)` -> `(B, 1, speaker_embedding_dim)`."""
        return self.speaker_encoder(mel_ref)

    def decode(self, latent: torch.Tensor, speaker: torch.Tensor) -> torch.Tensor:
        """Latent `(B, T, gpt_dim)` and speaker embedding `(B or 1, 1, dim)` -> waveform `(B, 1, T * hop_length)`."""
        if speaker.shape[0] not in (1, latent.shape[0]):
            raise ValueError(f"speaker embeddings for a batch of {speaker.shape[0]}, latents for {latent.shape[0]}")
        spk = speaker.transpose(1, 2)  # (B, dim, 1)
        if self.config.feat_upsample:
            x = F.interpolate(latent.transpose(1, 2), scale_factor=[4], mode="linear").squeeze(1)
        else:
            x = latent.transpose(1, 2)  # (B, gpt_dim, T)
        x = self.conv_pre(x)
        x = x + self.cond_layer(spk)
        for i, up in enumerate(self.ups):
            x = up[0](x)
            if self.config.cond_d_vector_in_each_upsampling_layer:
                x = x + self.conds[i](spk)
            x = self.amp_blocks(i, x)
        x = self.conv_post(self.activation_post(x))
        return torch.tanh(x)

    def forward(self, latent: torch.Tensor, mel_ref: torch.Tensor) -> torch.Tensor:
        """Upstream's call `bigvgan(latent, cond_mel.transpose(1, 2))` (its waveform; no contrastive loss)."""
        return self.decode(latent, self.speaker_embedding(mel_ref))


def to_pcm_scale(wav: torch.Tensor) -> torch.Tensor:
    """A waveform in [-1, 1] scaled to 16-bit range as upstream does: `clamp(32767 * wav, -32767, 32767)` (float)."""
    return torch.clamp(32767 * wav, -32767.0, 32767.0)


def load_bigvgan(source: str | os.PathLike | Mapping[str, torch.Tensor], config: BigVGANConfig) -> BigVGAN:
    """The vocoder from `bigvgan_generator.pth` (`{"generator": state_dict}`, or that state dict),
    loaded strictly (a missing or unexpected tensor is an error), weight norm folded, in eval mode."""
    if isinstance(source, Mapping):
        state = source
    else:
        state = torch.load(source, map_location="cpu", weights_only=True)
    with torch.device("meta"):
        model = BigVGAN(config)
    return load_generator(model, state)


def generator_state(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """A generator's state dict from a checkpoint: `{"generator": state}` as released, or the state."""
    if "generator" in state and isinstance(state["generator"], Mapping):
        return state["generator"]
    return state


def load_generator(model: _G, state: Mapping[str, Any]) -> _G:
    """`model` (on the meta device) loaded strictly from a checkpoint's generator state, weight norm
    folded, in eval mode."""
    model.load_state_dict(generator_state(state), strict=True, assign=True)
    return model.fold_weight_norm().eval()
