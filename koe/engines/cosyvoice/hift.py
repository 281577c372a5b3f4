"""CosyVoice's HiFT vocoders (neural source filter + iSTFT head): mel (80 bins) -> 24 kHz audio.

Two generators, named as the released `hift.pt`:
- **v2** (CosyVoice 2, `HiFTGenerator`): centred convs, transposed-conv upsampling. Each call
  draws its source noise from a torch generator, in upstream's order: one `rand` (the harmonics'
  initial phases, `(B, 9)`), then two normals (the sine source's additive noise `(B, L, 9)`, laid
  out as `randn_like` lays out upstream's transposed tensor, which decides torch's kernel, then the noise branch
  `(B, L, 1)`, which the output never uses but which advances the generator).
- **v3** (CosyVoice 3, `CausalHiFTGenerator`): causal convs (left-padded; the first conv and the
  F0 predictor's first conv look 4 and 3 frames ahead), nearest-neighbour upsampling and convs,
  the F0 predictor in float64, and no draws at inference: upstream draws its phase and noise
  tables once, when the module is built (`HiFTTables`). `finalize=False` is upstream's streaming
  call: the look-ahead frames come from the mel instead of zeros, and the audio they cover is cut.

How koe gets upstream's bits (CPU, float32): weight norm folded once with `torch._weight_norm`
(the op upstream's parametrization runs on every call; for v3's F0 predictor on float64 copies of
g and v, as upstream's `.to(torch.float64)` makes them); every conv on an explicitly padded input;
the source's interpolations with upstream's scale factors; the Hann window as scipy computes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from koe.nn.conv import Snake
from koe.runtime.weights import fold_weight_norm

__all__ = ["HiFT", "HiFTConfig", "HiFTTables", "hift_tables", "load_hift", "v3_draws_before_source"]


@dataclass(frozen=True)
class HiFTConfig:
    """The yaml's `hift` arguments (defaults: the released v2/v3 generator)."""

    in_channels: int = 80
    base_channels: int = 512
    nb_harmonics: int = 8
    sampling_rate: int = 24000
    nsf_alpha: float = 0.1
    nsf_sigma: float = 0.003
    nsf_voiced_threshold: float = 10
    upsample_rates: tuple[int, ...] = (8, 5, 3)
    upsample_kernel_sizes: tuple[int, ...] = (16, 11, 7)
    n_fft: int = 16
    hop_len: int = 4
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    source_resblock_kernel_sizes: tuple[int, ...] = (7, 7, 11)
    source_resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    lrelu_slope: float = 0.1
    audio_limit: float = 0.99
    f0_channels: int = 512  # the F0 predictor's cond_channels
    causal: bool = False  # v3's CausalHiFTGenerator
    conv_pre_look_right: int = 4  # v3 only

    def __post_init__(self) -> None:
        if self.sampling_rate == 22050:
            raise ValueError("the 22.05 kHz HiFT of CosyVoice 1 (SineGen) is not supported; koe runs CosyVoice 2 and 3's 24 kHz generators")
        if len(self.upsample_rates) != len(self.upsample_kernel_sizes):
            raise ValueError("upsample_rates and upsample_kernel_sizes differ in length")

    @classmethod
    def from_yaml(cls, args: dict[str, Any], causal: bool) -> HiFTConfig:
        """From the yaml's `hift` mapping (its `f0_predictor` as a mapping of arguments, or absent)."""
        istft = args.get("istft_params", {})
        f0 = args.get("f0_predictor") or {}
        known = {f.name for f in cls.__dataclass_fields__.values()}  # type: ignore[attr-defined]
        plain = {k: v for k, v in args.items() if k in known}
        for k in ("upsample_rates", "upsample_kernel_sizes", "resblock_kernel_sizes", "source_resblock_kernel_sizes"):
            if k in plain:
                plain[k] = tuple(plain[k])
        for k in ("resblock_dilation_sizes", "source_resblock_dilation_sizes"):
            if k in plain:
                plain[k] = tuple(tuple(d) for d in plain[k])
        if "n_fft" in istft:
            plain["n_fft"] = int(istft["n_fft"])
        if "hop_len" in istft:
            plain["hop_len"] = int(istft["hop_len"])
        if isinstance(f0, dict) and "cond_channels" in f0:
            plain["f0_channels"] = int(f0["cond_channels"])
        return cls(**plain, causal=causal)

    @property
    def upsample_scale(self) -> int:
        """Audio samples per mel frame (480 at the released rates)."""
        return int(np.prod(self.upsample_rates)) * self.hop_len


# -- convolutions, padded as upstream pads them ------------------------------------------------------


class PaddedConv1d(nn.Conv1d):
    """A padding-free conv on an input padded with zeros (`left`, `right`): upstream's centred convs
    (`padding=p`: both p), `CausalConv1d` ('left': (k - 1) d on the left; 'right': on the right)."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int = 1, dilation: int = 1, left: int = 0, right: int = 0) -> None:
        centred = left == right
        super().__init__(c_in, c_out, kernel_size, stride=stride, dilation=dilation, padding=left if centred else 0)
        self.left, self.right = (0, 0) if centred else (left, right)  # centred: the conv's own padding, as upstream's

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, C, T); `context`: frames that replace the right padding (upstream's cache of a
        right-looking causal conv; only for such a conv)."""
        if context is not None:
            x = torch.cat([x, context], dim=2)
        elif self.left or self.right:
            x = F.pad(x, (self.left, self.right))
        return super().forward(x)


class UpsampleConv1d(PaddedConv1d):
    """v3's `CausalConv1dUpsample`: nearest-neighbour upsampling, then a left-padded conv."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int) -> None:
        super().__init__(c_in, c_out, kernel_size, left=kernel_size - 1)
        self.scale = float(stride)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(F.interpolate(x, scale_factor=self.scale, mode="nearest"))


def _centred(kernel: int, dilation: int = 1) -> int:
    return (kernel * dilation - dilation) // 2


def _causal_padding(kernel: int, dilation: int = 1) -> int:
    """Upstream's `CausalConv1d.causal_padding`."""
    return int((kernel * dilation - dilation) / 2) * 2 + (kernel + 1) % 2


class ResBlock(nn.Module):
    """Snake, conv (dilated), Snake, conv, residual; once per dilation (HiFi-GAN's ResBlock1 with Snake)."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...], causal: bool) -> None:
        super().__init__()

        def conv(d: int) -> PaddedConv1d:
            if causal:
                return PaddedConv1d(channels, channels, kernel, dilation=d, left=_causal_padding(kernel, d))
            return PaddedConv1d(channels, channels, kernel, dilation=d, left=_centred(kernel, d), right=_centred(kernel, d))

        self.convs1 = nn.ModuleList([conv(d) for d in dilations])
        self.convs2 = nn.ModuleList([conv(1) for _ in dilations])
        self.activations1 = nn.ModuleList([Snake(channels) for _ in dilations])
        self.activations2 = nn.ModuleList([Snake(channels) for _ in dilations])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c1, c2, a1, a2 in zip(self.convs1, self.convs2, self.activations1, self.activations2):
            x = c2(a2(c1(a1(x)))) + x
        return x


class F0Predictor(nn.Module):
    """Mel -> F0 (B, T): five convs with ELU, a linear head, the absolute value. v3's is causal
    (its first conv sees 3 frames ahead, the rest look back) and runs in float64."""

    def __init__(self, in_channels: int, channels: int, causal: bool) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(5):
            c_in = in_channels if i == 0 else channels
            if not causal:
                conv = PaddedConv1d(c_in, channels, 3, left=1, right=1)
            elif i == 0:
                conv = PaddedConv1d(c_in, channels, 4, right=_causal_padding(4))
            else:
                conv = PaddedConv1d(c_in, channels, 3, left=_causal_padding(3))
            layers += [conv, nn.ELU()]
        self.condnet = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, 1)
        self.look_ahead = _causal_padding(4) if causal else 0

    def forward(self, x: torch.Tensor, finalize: bool = True) -> torch.Tensor:
        first = self.condnet[0]
        if finalize or not self.look_ahead:
            x = first(x)
        else:
            x = first(x[:, :, : -self.look_ahead], x[:, :, -self.look_ahead :])
        for layer in list(self.condnet)[1:]:
            x = layer(x)
        return torch.abs(self.classifier(x.transpose(1, 2)).squeeze(-1))


# -- the harmonic source ------------------------------------------------------------------------------


@dataclass
class HiFTTables:
    """v3's source tables, drawn once when upstream builds the generator: the harmonics' initial
    phases (1, 9) and the sine source's noise for up to 300 s of audio (the noise branch's table is
    drawn after it and never reaches the output).

    Only the first L samples of the noise are ever read, so it is kept as the generator's state
    and drawn on demand (`noise(L)`; the longest prefix drawn so far is kept, since a shorter draw
    is its prefix): upstream's values without its 260 MB table.
    """

    rand_ini: torch.Tensor
    sine_state: torch.Tensor = field(repr=False)
    dim: int = 9
    length: int = 300 * 24000
    _drawn: torch.Tensor | None = field(default=None, repr=False)

    def noise(self, length: int) -> torch.Tensor:
        """`sine_waves[:, :length]` of upstream's SineGen2 (1, L, 9)."""
        if length > self.length:
            raise ValueError(f"HiFT v3 makes at most {self.length} samples per call (upstream's table); asked for {length}")
        if self._drawn is None or self._drawn.shape[1] < length:
            g = torch.Generator().set_state(self.sine_state)
            self._drawn = torch.rand(1, length, self.dim, generator=g)
        return self._drawn[:, :length]


def hift_tables(draws_before: list[tuple[str, tuple[int, ...]]], dim: int = 9) -> HiFTTables:
    """v3's tables as upstream's build draws them: the flow's decoder reseeds torch with 0 and draws
    its noise, then everything built after it draws its initial weights (`draws_before`: each
    `("normal" | "uniform", shape)` in build order, up to the source module), then SineGen2 draws
    `rand(1, 9)` and `rand(1, 7200000, 9)` (then the source's linear layer and the noise branch's
    table, which inference never reads). Replayed on a private generator: torch's global one is
    untouched.
    """
    g = torch.Generator().manual_seed(0)
    for kind, shape in draws_before:
        t = torch.empty(shape)
        t.normal_(generator=g) if kind == "normal" else t.uniform_(generator=g)
    rand_ini = torch.rand(1, dim, generator=g)
    rand_ini[:, 0] = 0
    return HiFTTables(rand_ini=rand_ini, sine_state=g.get_state(), dim=dim)


def _linear_init(c_in: int, c_out: int) -> list[tuple[str, tuple[int, ...]]]:
    """The draws of `nn.Linear(c_in, c_out)`'s initialisation: its weight, then its bias."""
    return [("uniform", (c_out, c_in)), ("uniform", (c_out,))]


def _conv_init(c_in: int, c_out: int, kernel: int) -> list[tuple[str, tuple[int, ...]]]:
    return [("uniform", (c_out, c_in, kernel)), ("uniform", (c_out,))]


def v3_draws_before_source(vocab_size: int, flow_input_size: int, spk_embed_dim: int, flow_output_size: int, config: HiFTConfig) -> list:
    """What upstream's CosyVoice 3 build draws between the flow decoder's reseed (after its noise)
    and the vocoder's source tables: the flow's token embedding and speaker projection, then the
    causal F0 predictor's five convs and linear head."""
    draws: list[tuple[str, tuple[int, ...]]] = [("normal", (1, 80, 50 * 300))]  # the decoder's noise
    draws.append(("normal", (vocab_size, flow_input_size)))
    draws += _linear_init(spk_embed_dim, flow_output_size)
    c = config.f0_channels
    draws += _conv_init(config.in_channels, c, 4)
    for _ in range(4):
        draws += _conv_init(c, c, 3)
    draws += _linear_init(c, 1)
    return draws


class SourceModule(nn.Module):
    """Upstream's `SourceModuleHnNSF` with `SineGen2`: F0 at the audio rate (B, L, 1) -> the merged
    harmonic excitation (B, L, 1)."""

    def __init__(self, config: HiFTConfig) -> None:
        super().__init__()
        self.config = config
        self.l_linear = nn.Linear(config.nb_harmonics + 1, 1)
        self.harmonics = torch.arange(1, config.nb_harmonics + 2, dtype=torch.float32).view(1, 1, -1)

    def forward(self, f0: torch.Tensor, generator: torch.Generator | None, tables: HiFTTables | None) -> torch.Tensor:
        c = self.config
        b, length, _ = f0.shape
        # draws happen where the generator lives (torch's default generator: where the audio is)
        draw_on = generator.device if generator is not None else f0.device
        fn = torch.multiply(f0, self.harmonics.to(f0.device))
        rad = (fn / c.sampling_rate) % 1
        if tables is not None:
            rand_ini = tables.rand_ini
        else:
            rand_ini = torch.rand(b, fn.shape[2], generator=generator, device=draw_on)
            rand_ini[:, 0] = 0
        rad[:, 0, :] = rad[:, 0, :] + rand_ini.to(rad.device)
        scale = c.upsample_scale
        rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / scale, mode="linear").transpose(1, 2)
        phase = torch.cumsum(rad, dim=1) * 2 * np.pi
        mode = "nearest" if tables is not None else "linear"
        phase = F.interpolate(phase.transpose(1, 2) * scale, scale_factor=float(scale), mode=mode).transpose(1, 2)
        sines = torch.sin(phase) * c.nsf_alpha
        uv = (f0 > c.nsf_voiced_threshold).type(torch.float32)
        noise_amp = uv * c.nsf_sigma + (1 - uv) * c.nsf_alpha / 3
        if tables is not None:
            noise = noise_amp * tables.noise(sines.shape[1]).to(sines.device)
        else:
            # upstream's randn_like keeps the sines' transposed layout, and torch fills a tensor that
            # is not contiguous with another kernel: draw into the same layout
            drawn = torch.empty((b, sines.shape[2], sines.shape[1]), dtype=sines.dtype, device=draw_on).transpose(1, 2).normal_(generator=generator)
            noise = noise_amp * drawn.to(sines.device)
        sines = sines * uv + noise
        merged = torch.tanh(self.l_linear(sines))
        if tables is None:
            torch.randn(uv.shape, generator=generator, dtype=uv.dtype, device=draw_on)  # the noise branch: drawn, unused
        return merged


# -- the generator --------------------------------------------------------------------------------


def hann_window(n: int) -> torch.Tensor:
    """scipy's `get_window("hann", n, fftbins=True)` (float64 general cosine) as float32."""
    fac = np.linspace(-np.pi, np.pi, n + 1)
    w = np.zeros(n + 1)
    for k, a in enumerate((0.5, 0.5)):
        w += a * np.cos(k * fac)
    return torch.from_numpy(w[:n].astype(np.float32))


class HiFT(nn.Module):
    """HiFT v2 (`causal=False`) or v3 (`causal=True`): `inference(mel)` -> (audio (B, samples), source)."""

    def __init__(self, config: HiFTConfig) -> None:
        super().__init__()
        c = self.config = config
        ch = c.base_channels
        self.m_source = SourceModule(c)
        if c.causal:
            self.conv_pre = PaddedConv1d(c.in_channels, ch, c.conv_pre_look_right + 1, right=c.conv_pre_look_right)
        else:
            self.conv_pre = PaddedConv1d(c.in_channels, ch, 7, left=3, right=3)
        ups: list[nn.Module] = []
        for i, (u, k) in enumerate(zip(c.upsample_rates, c.upsample_kernel_sizes)):
            c_in, c_out = ch // 2**i, ch // 2 ** (i + 1)
            ups.append(UpsampleConv1d(c_in, c_out, k, u) if c.causal else nn.ConvTranspose1d(c_in, c_out, k, u, padding=(k - u) // 2))
        self.ups = nn.ModuleList(ups)
        spec_channels = c.n_fft + 2
        downs: list[nn.Module] = []
        source_blocks: list[nn.Module] = []
        rates = [1, *list(c.upsample_rates[::-1][:-1])]
        cum = np.cumprod(rates)[::-1]
        for i, (u, k, d) in enumerate(zip(cum, c.source_resblock_kernel_sizes, c.source_resblock_dilation_sizes)):
            u = int(u)
            c_out = ch // 2 ** (i + 1)
            if u == 1:
                downs.append(PaddedConv1d(spec_channels, c_out, 1))
            elif c.causal:
                downs.append(PaddedConv1d(spec_channels, c_out, u * 2, stride=u, left=u - 1))
            else:
                downs.append(PaddedConv1d(spec_channels, c_out, u * 2, stride=u, left=u // 2, right=u // 2))
            source_blocks.append(ResBlock(c_out, k, tuple(d), c.causal))
        self.source_downs = nn.ModuleList(downs)
        self.source_resblocks = nn.ModuleList(source_blocks)
        blocks = []
        for i in range(len(self.ups)):
            c_out = ch // 2 ** (i + 1)
            blocks += [ResBlock(c_out, k, tuple(d), c.causal) for k, d in zip(c.resblock_kernel_sizes, c.resblock_dilation_sizes)]
        self.resblocks = nn.ModuleList(blocks)
        last = ch // 2 ** len(self.ups)
        if c.causal:
            self.conv_post = PaddedConv1d(last, spec_channels, 7, left=_causal_padding(7))
        else:
            self.conv_post = PaddedConv1d(last, spec_channels, 7, left=3, right=3)
        self.f0_predictor = F0Predictor(c.in_channels, c.f0_channels, c.causal)
        if c.causal:
            self.f0_predictor.to(torch.float64)
        self.window = hann_window(c.n_fft)
        self.tables: HiFTTables | None = None  # v3: set by the loader (upstream's build-time draws)

    def _source(self, mel: torch.Tensor, finalize: bool, generator: torch.Generator | None) -> torch.Tensor:
        c = self.config
        if c.causal:
            f0 = self.f0_predictor(mel.to(torch.float64), finalize=finalize).to(mel)
        else:
            f0 = self.f0_predictor(mel)
        s = F.interpolate(f0[:, None], scale_factor=float(c.upsample_scale), mode="nearest").transpose(1, 2)  # (B, L, 1)
        if c.causal and self.tables is None:
            raise RuntimeError("HiFT v3 needs its source tables (load_hift sets them)")
        return self.m_source(s, generator, self.tables).transpose(1, 2)  # (B, 1, L)

    def _stft(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        spec = torch.view_as_real(torch.stft(x, c.n_fft, c.hop_len, c.n_fft, window=self.window.to(x.device), return_complex=True))
        return torch.cat([spec[..., 0], spec[..., 1]], dim=1)

    def _istft(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        c = self.config
        magnitude = torch.clip(magnitude, max=1e2)
        real, imag = magnitude * torch.cos(phase), magnitude * torch.sin(phase)
        return torch.istft(torch.complex(real, imag), c.n_fft, c.hop_len, c.n_fft, window=self.window.to(magnitude.device))

    def decode(self, mel: torch.Tensor, source: torch.Tensor, finalize: bool = True) -> torch.Tensor:
        """Mel (B, 80, T) and source (B, 1, L) -> audio (B, samples)."""
        c = self.config
        s_stft = self._stft(source.squeeze(1))
        look = c.conv_pre_look_right
        if c.causal and not finalize:
            x = self.conv_pre(mel[:, :, :-look], mel[:, :, -look:])
            s_stft = s_stft[:, :, : -int(np.prod(c.upsample_rates)) * look]
        else:
            x = self.conv_pre(mel)
        n = len(c.resblock_kernel_sizes)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, c.lrelu_slope))
            if i == len(self.ups) - 1:
                x = F.pad(x, (1, 0), mode="reflect")
            si = self.source_resblocks[i](self.source_downs[i](s_stft))
            x = x + si
            xs = self.resblocks[i * n](x)
            for j in range(1, n):
                xs += self.resblocks[i * n + j](x)
            x = xs / n
        x = self.conv_post(F.leaky_relu(x))
        half = c.n_fft // 2 + 1
        audio = self._istft(torch.exp(x[:, :half, :]), torch.sin(x[:, half:, :]))
        if c.causal and not finalize:
            audio = audio[:, : -c.upsample_scale]
        return torch.clamp(audio, -c.audio_limit, c.audio_limit)

    @torch.inference_mode()
    def inference(
        self,
        mel: torch.Tensor,
        *,
        finalize: bool = True,
        cache_source: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mel (B, 80, T) -> (audio (B, samples), source (B, 1, L)), upstream's `inference`.

        v2: the source noise comes from `generator` (torch's global generator when None), and
        `cache_source` overwrites the start of the source (upstream's streaming glue). v3: no draws;
        `finalize=False` treats the last frames as look-ahead (a streamed chunk).
        """
        c = self.config
        if c.causal:
            source = self._source(mel, finalize, None)
            if not finalize:
                mel = mel[:, :, : -self.f0_predictor.look_ahead]
            return self.decode(mel, source, finalize), source
        source = self._source(mel, True, generator)
        if cache_source is not None and cache_source.shape[2] != 0:
            source[:, :, : cache_source.shape[2]] = cache_source
        return self.decode(mel, source), source


# -- loading ------------------------------------------------------------------------------------------


def load_hift(state: dict[str, torch.Tensor], config: HiFTConfig, tables: HiFTTables | None = None) -> HiFT:
    """A HiFT from `hift.pt`'s state dict (a `generator.` prefix dropped, as upstream drops it),
    strictly: a missing or unexpected tensor is an error naming it. v3 needs `tables`."""
    state = {k.replace("generator.", ""): v for k, v in state.items()}
    folded = fold_weight_norm(state, float64=("f0_predictor.",) if config.causal else ())
    with torch.device("meta"):
        model = HiFT(config)
    wanted = set(model.state_dict())
    missing, unexpected = sorted(wanted - set(folded)), sorted(set(folded) - wanted)
    if missing or unexpected:
        raise ValueError(f"hift.pt does not match the {'v3' if config.causal else 'v2'} generator: missing {missing[:8]}, unexpected {unexpected[:8]}")
    model.load_state_dict(folded, strict=True, assign=True)
    model.window = hann_window(config.n_fft)
    model.m_source.harmonics = torch.arange(1, config.nb_harmonics + 2, dtype=torch.float32).view(1, 1, -1)
    if config.causal:
        if tables is None:
            raise ValueError("HiFT v3 needs its source tables (hift_tables)")
        model.tables = tables
    return model.eval()
