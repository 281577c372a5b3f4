"""GPT-SoVITS v3's vocoder: NVIDIA's BigVGAN v2 (`nvidia/bigvgan_v2_24khz_100band_256x`, MIT),
as upstream vendors it in `GPT_SoVITS/BigVGAN`: a mel (B, 100, frames) -> a 24 kHz waveform
(B, 1, frames * 256).

conv_pre (kernel 7); per upsampling stage a transposed conv (`ups.i.0`, no activation before it)
and the mean of the stage's anti-aliased multi-periodicity blocks (`resblocks.{i * n + j}`: AMPBlock1,
per dilation act-conv_d-act-conv plus the residual; AMPBlock2, act-conv_d plus the residual); a
last anti-aliased activation (`activation_post`), conv_post (bias per `use_bias_at_final`), then
tanh, or a clamp to [-1, 1] when `use_tanh_at_final` is false (the v2 24 kHz release's choice).

Every activation is alias-free (`Activation1d`): upsample x2 (replicate padding, a transposed
conv with a Kaiser-windowed sinc of 12 taps, times 2, trimmed), Snake or SnakeBeta per channel
(`snake_logscale`: the parameters are logs), downsample x2 (replicate padding, the low-pass
filter, stride 2). The filters are buffers the release stores (`...upsample.filter`,
`...downsample.lowpass.filter`); koe computes them as upstream does (`kaiser_sinc_filter`), and
loads the stored ones. The weight-normed convs hold their folded weight, as upstream's
`remove_weight_norm()` leaves them before inference.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conv import Snake, SnakeBeta
from koe.runtime.weights import build_on_meta, check_state_fits, fold_weight_norm, generator_state

__all__ = ["CHECKPOINT", "BigVGAN", "BigVGANConfig", "kaiser_sinc_filter", "load_bigvgan"]

CHECKPOINT = "bigvgan_generator.pt"  # beside config.json in the release folder

FILTER_TAPS = 12


@dataclass(frozen=True)
class BigVGANConfig:
    """A BigVGAN `config.json`'s generator entries (defaults: the 24 kHz 100-band 256x release)."""

    num_mels: int = 100
    upsample_rates: tuple[int, ...] = (4, 4, 2, 2, 2, 2)
    upsample_kernel_sizes: tuple[int, ...] = (8, 8, 4, 4, 4, 4)
    upsample_initial_channel: int = 1536
    resblock: str = "1"
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    activation: str = "snakebeta"
    snake_logscale: bool = True
    use_tanh_at_final: bool = False
    use_bias_at_final: bool = False
    sampling_rate: int = 24000
    hop_size: int = 256

    def __post_init__(self) -> None:
        if self.resblock not in ("1", "2"):
            raise ValueError(f"BigVGAN resblock must be '1' or '2', not {self.resblock!r}")
        if self.activation not in ("snake", "snakebeta"):
            raise ValueError(f"BigVGAN activation must be 'snake' or 'snakebeta', not {self.activation!r}")
        if len(self.upsample_rates) != len(self.upsample_kernel_sizes) or len(self.resblock_kernel_sizes) != len(self.resblock_dilation_sizes):
            raise ValueError("BigVGAN's upsample rates/kernels or resblock kernels/dilations differ in length")
        if self.upsample_initial_channel % (2 ** len(self.upsample_rates)):
            raise ValueError(f"upsample_initial_channel {self.upsample_initial_channel} does not halve {len(self.upsample_rates)} times")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BigVGANConfig:
        """From the release's `config.json` (training entries ignored; the two `use_*_at_final`
        default to True when absent, as upstream's code defaults them)."""
        try:
            return cls(
                num_mels=int(data["num_mels"]),
                upsample_rates=tuple(int(r) for r in data["upsample_rates"]),
                upsample_kernel_sizes=tuple(int(k) for k in data["upsample_kernel_sizes"]),
                upsample_initial_channel=int(data["upsample_initial_channel"]),
                resblock=str(data["resblock"]),
                resblock_kernel_sizes=tuple(int(k) for k in data["resblock_kernel_sizes"]),
                resblock_dilation_sizes=tuple(tuple(int(d) for d in ds) for ds in data["resblock_dilation_sizes"]),
                activation=str(data["activation"]),
                snake_logscale=bool(data["snake_logscale"]),
                use_tanh_at_final=bool(data.get("use_tanh_at_final", True)),
                use_bias_at_final=bool(data.get("use_bias_at_final", True)),
                sampling_rate=int(data.get("sampling_rate", 24000)),
                hop_size=int(data.get("hop_size", math.prod(int(r) for r in data["upsample_rates"]))),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a BigVGAN config koe can build: {e}") from e

    def to_json(self) -> dict[str, Any]:
        """The generator's entries as the release's `config.json` spells them."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return {k: [list(x) for x in v] if k == "resblock_dilation_sizes" else list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def kaiser_sinc_filter(cutoff: float, half_width: float, kernel_size: int) -> torch.Tensor:
    """(1, 1, kernel_size) Kaiser-windowed sinc low-pass, normalised to sum 1 (upstream's `kaiser_sinc_filter1d`)."""
    even = kernel_size % 2 == 0
    half = kernel_size // 2
    delta_f = 4 * half_width
    attenuation = 2.285 * (half - 1) * math.pi * delta_f + 7.95
    if attenuation > 50.0:
        beta = 0.1102 * (attenuation - 8.7)
    elif attenuation >= 21.0:
        beta = 0.5842 * (attenuation - 21) ** 0.4 + 0.07886 * (attenuation - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(kernel_size, beta=beta, periodic=False, device="cpu")  # real even under build_on_meta
    time = torch.arange(-half, half, device="cpu") + 0.5 if even else torch.arange(kernel_size, device="cpu") - half
    taps = 2 * cutoff * window * torch.sinc(2 * cutoff * time)
    taps /= taps.sum()
    return taps.view(1, 1, kernel_size)


class _UpSample(nn.Module):
    """x2 upsampling: replicate pad, transposed conv with the filter (times 2), trim."""

    def __init__(self) -> None:
        super().__init__()
        ratio, k = 2, FILTER_TAPS
        self.pad = k // ratio - 1
        self.pad_left = self.pad * ratio + (k - ratio) // 2
        self.pad_right = self.pad * ratio + (k - ratio + 1) // 2
        self.register_buffer("filter", kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, k))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        x = 2 * F.conv_transpose1d(x, self.filter.expand(c, -1, -1), stride=2, groups=c)
        return x[..., self.pad_left : -self.pad_right]


class _LowPass(nn.Module):
    """The downsampler's low-pass (`lowpass.filter`): replicate pad, filter, stride 2."""

    def __init__(self) -> None:
        super().__init__()
        k = FILTER_TAPS
        self.pad_left, self.pad_right = k // 2 - 1, k // 2
        self.register_buffer("filter", kaiser_sinc_filter(0.25, 0.3, k))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        x = F.pad(x, (self.pad_left, self.pad_right), mode="replicate")
        return F.conv1d(x, self.filter.expand(c, -1, -1), stride=2, groups=c)


class _DownSample(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lowpass = _LowPass()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lowpass(x)


class Activation1d(nn.Module):
    """Alias-free activation: upsample x2, Snake/SnakeBeta (`act`), downsample x2."""

    def __init__(self, channels: int, config: BigVGANConfig) -> None:
        super().__init__()
        self.act = (SnakeBeta if config.activation == "snakebeta" else Snake)(channels, logscale=config.snake_logscale)
        self.upsample = _UpSample()
        self.downsample = _DownSample()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(self.act(self.upsample(x)))


def _padding(kernel: int, dilation: int) -> int:
    return int((kernel * dilation - dilation) / 2)


class AMPBlock(nn.Module):
    """AMPBlock1 (`convs1` dilated, `convs2` not; activations alternate) or AMPBlock2 (`convs`)."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...], config: BigVGANConfig) -> None:
        super().__init__()
        self.two_convs = config.resblock == "1"
        dilated = nn.ModuleList([nn.Conv1d(channels, channels, kernel, dilation=d, padding=_padding(kernel, d)) for d in dilations])
        if self.two_convs:
            self.convs1 = dilated
            self.convs2 = nn.ModuleList([nn.Conv1d(channels, channels, kernel, padding=_padding(kernel, 1)) for _ in dilations])
        else:
            self.convs = dilated
        n = len(dilations) * (2 if self.two_convs else 1)
        self.activations = nn.ModuleList([Activation1d(channels, config) for _ in range(n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.two_convs:
            acts = self.activations
            for c1, c2, a1, a2 in zip(self.convs1, self.convs2, acts[::2], acts[1::2]):
                x = c2(a2(c1(a1(x)))) + x
            return x
        for c, a in zip(self.convs, self.activations):
            x = c(a(x)) + x
        return x


class BigVGAN(nn.Module):
    """The generator (`bigvgan_generator.pt`'s `generator`): mel (B, num_mels, T) -> (B, 1, T * prod(rates))."""

    def __init__(self, config: BigVGANConfig | None = None) -> None:
        super().__init__()
        c = self.config = config or BigVGANConfig()
        ch = c.upsample_initial_channel
        self.n_kernels = len(c.resblock_kernel_sizes)
        self.conv_pre = nn.Conv1d(c.num_mels, ch, 7, padding=3)
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for i, (u, k) in enumerate(zip(c.upsample_rates, c.upsample_kernel_sizes)):
            self.ups.append(nn.ModuleList([nn.ConvTranspose1d(ch // 2**i, ch // 2 ** (i + 1), k, u, padding=(k - u) // 2)]))
            for kernel, dilations in zip(c.resblock_kernel_sizes, c.resblock_dilation_sizes):
                self.resblocks.append(AMPBlock(ch // 2 ** (i + 1), kernel, dilations, c))
        last = ch // 2 ** len(c.upsample_rates)
        self.activation_post = Activation1d(last, c)
        self.conv_post = nn.Conv1d(last, 1, 7, padding=3, bias=c.use_bias_at_final)

    @property
    def sample_rate(self) -> int:
        return self.config.sampling_rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_pre(x)
        n = self.n_kernels
        for i, up in enumerate(self.ups):
            x = up[0](x)
            xs = self.resblocks[i * n](x)
            for j in range(1, n):
                xs += self.resblocks[i * n + j](x)
            x = xs / n
        x = self.conv_post(self.activation_post(x))
        return torch.tanh(x) if self.config.use_tanh_at_final else torch.clamp(x, min=-1.0, max=1.0)


def load_bigvgan(folder: str | Path) -> BigVGAN:
    """A BigVGAN release folder (`config.json`, `bigvgan_generator.pt` = {"generator": state}) -> the
    vocoder in float32, eval mode. The state is read with weights_only; weight-normed pairs
    (`weight_g`, `weight_v`) are folded as upstream's `remove_weight_norm()` folds them, a state
    already folded is taken as it is (upstream's fallback). Strict."""
    folder = Path(folder)
    for name in ("config.json", CHECKPOINT):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"no BigVGAN {name} in {folder}")
    config = BigVGANConfig.from_json(json.loads((folder / "config.json").read_text()))
    state = fold_weight_norm(generator_state(folder / CHECKPOINT, "BigVGAN"))
    model = build_on_meta(lambda: BigVGAN(config))
    check_state_fits(state, model, f"{folder / CHECKPOINT}: does not match its config")
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()
