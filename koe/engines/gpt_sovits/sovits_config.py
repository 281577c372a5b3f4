"""SoVITS's architecture, read from the `config` a released `s2G*.pth` carries (upstream's training
hyper-parameters: `data`, `train`, `model`).

Upstream builds `SynthesizerTrn(filter_length // 2 + 1, segment_size // hop_length,
n_speakers=..., **config["model"])` and overrides two of the model's entries when it loads a file:
`semantic_frame_rate` is always "25hz", and `version` is what the weights say (v1 when
`enc_p.text_embedding` has v1's 322 rows, else v2; a v2Pro/ProPlus file is told by its header). Some
widths are fixed in upstream's code whatever the config says (the HuBERT features' 768 channels,
the multi-reference timbre encoder's 512-wide attention over 192-wide content, the reference
encoder's first 704 spectrogram bins, the flow's 4 couplings of 4 WaveNet layers with kernel 5):
`SoVITSConfig` refuses a config that contradicts them, as upstream's modules would fail on it.

v2Pro and v2ProPlus (`PRO_VERSIONS`) are v2 with a speaker-verification embedding: their timbre
embedding is `gin_channels` wide (1024 in the released configs) and reaches the 512-wide timbre
encoder through a projection (`ge_to512`), so only v1/v2 must have gin_channels 512. v2ProPlus
differs from v2Pro only in its config (a 768-channel generator with a first upsampling kernel of 20).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PRO_VERSIONS", "SSL_DIM", "SYMBOLS", "SoVITSConfig", "SoVITSConfigError"]

SSL_DIM = 768  # HuBERT features (chinese-hubert-base)
SYMBOLS = {"v1": 322, "v2": 732}  # rows of enc_p.text_embedding: upstream's symbol tables
MRTE_WIDTH = 512  # the timbre encoder's attention width (its reference embedding must be as wide)
MRTE_CONTENT = 192  # the timbre encoder's content and output width (hard-coded upstream)
STYLE_BINS = 704  # the reference encoder reads the spectrogram's first 704 bins (v2 onwards)
PRO_VERSIONS = ("v2Pro", "v2ProPlus")  # v2 plus a speaker-verification embedding
VERSIONS = ("v1", "v2", *PRO_VERSIONS)  # v3/v4 (CFM) are not built here


class SoVITSConfigError(ValueError):
    """A SoVITS config koe cannot build (a missing entry, or a width upstream's code fixes otherwise)."""


@dataclass(frozen=True)
class SoVITSConfig:
    """The synthesizer's sizes (defaults: the released v2 `s2G2333k.pth`'s config)."""

    version: str = "v2"
    inter_channels: int = 192
    hidden_channels: int = 192
    filter_channels: int = 768
    n_heads: int = 2
    n_layers: int = 6
    kernel_size: int = 3
    resblock: str = "1"
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    upsample_rates: tuple[int, ...] = (10, 8, 2, 2, 2)
    upsample_initial_channel: int = 512
    upsample_kernel_sizes: tuple[int, ...] = (16, 16, 8, 2, 2)
    gin_channels: int = 512
    filter_length: int = 2048  # the reference spectrogram's n_fft: filter_length // 2 + 1 bins
    hop_length: int = 640
    win_length: int = 2048
    sampling_rate: int = 32000

    def __post_init__(self) -> None:
        if self.version not in VERSIONS:
            raise SoVITSConfigError(f"SoVITS {self.version!r} is not supported (koe builds {', '.join(VERSIONS)})")
        if self.hidden_channels != MRTE_CONTENT:
            raise SoVITSConfigError(f"hidden_channels must be {MRTE_CONTENT} (upstream's timbre encoder is fixed at that width), not {self.hidden_channels}")
        if self.gin_channels != MRTE_WIDTH and not self.is_pro:
            raise SoVITSConfigError(
                f"gin_channels must be {MRTE_WIDTH} (the reference embedding joins the timbre encoder's {MRTE_WIDTH} channels), not {self.gin_channels}"
            )
        if self.hidden_channels % self.n_heads:
            raise SoVITSConfigError(f"hidden_channels {self.hidden_channels} is not a multiple of n_heads {self.n_heads}")
        if self.kernel_size < 1 or self.n_layers < 2:
            raise SoVITSConfigError(f"kernel_size {self.kernel_size} and n_layers {self.n_layers} must be >= 1 and >= 2")
        if len(self.upsample_rates) != len(self.upsample_kernel_sizes):
            raise SoVITSConfigError("upsample_rates and upsample_kernel_sizes differ in length")
        if len(self.resblock_kernel_sizes) != len(self.resblock_dilation_sizes):
            raise SoVITSConfigError("resblock_kernel_sizes and resblock_dilation_sizes differ in length")
        if self.resblock not in ("1", "2"):
            raise SoVITSConfigError(f"resblock must be '1' or '2', not {self.resblock!r}")
        if self.upsample_initial_channel % (2 ** len(self.upsample_rates)):
            raise SoVITSConfigError(f"upsample_initial_channel {self.upsample_initial_channel} does not halve {len(self.upsample_rates)} times")
        if self.spec_channels < STYLE_BINS:
            raise SoVITSConfigError(f"filter_length {self.filter_length} gives {self.spec_channels} bins, fewer than the reference encoder's {STYLE_BINS}")

    @property
    def is_pro(self) -> bool:
        """v2Pro/ProPlus: a speaker-verification embedding joins the timbre embedding."""
        return self.version in PRO_VERSIONS

    @property
    def spec_channels(self) -> int:
        """Bins of the reference spectrogram (1025 at the released n_fft 2048)."""
        return self.filter_length // 2 + 1

    @property
    def style_bins(self) -> int:
        """Bins the reference encoder reads: all of them for v1, the first 704 from v2 on."""
        return self.spec_channels if self.version == "v1" else STYLE_BINS

    @property
    def symbols(self) -> int:
        return SYMBOLS["v1" if self.version == "v1" else "v2"]

    @property
    def samples_per_code(self) -> int:
        """Waveform samples per semantic code at speed 1: two latent frames (25 Hz codes, 50 Hz
        frames) of the generator's upsampling (1280 at the released rates: 32 kHz, 25 codes/s)."""
        n = 2
        for r in self.upsample_rates:
            n *= r
        return n

    @classmethod
    def from_hps(cls, hps: dict[str, Any], version: str) -> SoVITSConfig:
        """From a `.pth`'s `config` (as plain dicts) and the version its weights tell."""
        try:
            model, data = hps["model"], hps["data"]
            return cls(
                version=version,
                inter_channels=int(model["inter_channels"]),
                hidden_channels=int(model["hidden_channels"]),
                filter_channels=int(model["filter_channels"]),
                n_heads=int(model["n_heads"]),
                n_layers=int(model["n_layers"]),
                kernel_size=int(model["kernel_size"]),
                resblock=str(model["resblock"]),
                resblock_kernel_sizes=tuple(int(k) for k in model["resblock_kernel_sizes"]),
                resblock_dilation_sizes=tuple(tuple(int(d) for d in ds) for ds in model["resblock_dilation_sizes"]),
                upsample_rates=tuple(int(r) for r in model["upsample_rates"]),
                upsample_initial_channel=int(model["upsample_initial_channel"]),
                upsample_kernel_sizes=tuple(int(k) for k in model["upsample_kernel_sizes"]),
                gin_channels=int(model["gin_channels"]),
                filter_length=int(data["filter_length"]),
                hop_length=int(data["hop_length"]),
                win_length=int(data["win_length"]),
                sampling_rate=int(data["sampling_rate"]),
            )
        except (KeyError, TypeError) as e:
            raise SoVITSConfigError(f"the SoVITS config lacks an entry koe needs: {e}") from e

    def hps(self) -> dict[str, Any]:
        """The `config` mapping upstream's training would save for this architecture (the entries
        inference reads, with the released file's other values)."""
        return {
            "train": {"segment_size": 20480, "fp16_run": True},
            "data": {
                "max_wav_value": 32768.0,
                "sampling_rate": self.sampling_rate,
                "filter_length": self.filter_length,
                "hop_length": self.hop_length,
                "win_length": self.win_length,
                "n_mel_channels": 128,
                "n_speakers": 300,
            },
            "model": {
                "inter_channels": self.inter_channels,
                "hidden_channels": self.hidden_channels,
                "filter_channels": self.filter_channels,
                "n_heads": self.n_heads,
                "n_layers": self.n_layers,
                "kernel_size": self.kernel_size,
                "p_dropout": 0.0 if self.is_pro else 0.1,
                "resblock": self.resblock,
                "resblock_kernel_sizes": list(self.resblock_kernel_sizes),
                "resblock_dilation_sizes": [list(d) for d in self.resblock_dilation_sizes],
                "upsample_rates": list(self.upsample_rates),
                "upsample_initial_channel": self.upsample_initial_channel,
                "upsample_kernel_sizes": list(self.upsample_kernel_sizes),
                "n_layers_q": 3,
                "use_spectral_norm": False,
                "gin_channels": self.gin_channels,
                "semantic_frame_rate": "25hz",
                "freeze_quantizer": True,
            },
        }
