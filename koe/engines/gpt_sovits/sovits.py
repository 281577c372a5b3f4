"""SoVITS v1/v2 (GPT-SoVITS's `s2G*.pth`, upstream's `SynthesizerTrn` at inference): semantic codes,
phonemes and reference spectrograms -> a 32 kHz waveform; and HuBERT features -> the reference's
semantic codes (`extract_latent`, the AR model's prompt).

`decode` runs upstream's `SynthesizerTrn.decode` as `TTS.run` calls it (the references always a
list): each reference's timbre embedding `ge` from `ref_enc`, averaged over the references
(stacked, then the mean); the codes' codebook rows, each repeated for two 50 Hz frames (nearest
interpolation); the prior encoder `enc_p` (with `ge` in its timbre encoder, and `speed`); a sample
of the prior, z_p = m + randn * exp(logs) * noise_scale, drawn from `generator` (upstream draws
`randn_like(m_p)` from torch's global generator: the same numbers for the same seed); the flow in
reverse; the generator `dec`. The latent `enc_q` (training only) is not built.

v2Pro/ProPlus: each reference also has a speaker-verification embedding (ERes2NetV2's 20,480
numbers, `sv.SpeakerVerifier`, one per reference as `TTS.run` computes them); upstream adds its
projection `sv_emb` to that reference's `ge` and applies a per-channel PReLU (`prelu`) before the
references are averaged; the averaged `ge` (gin_channels wide, 1024 released) conditions the flow
and the generator as it is, and reaches the prior encoder's 512-wide timbre encoder through
`ge_to512` (a linear over channels).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.gpt_sovits.quantizer import SemanticQuantizer
from koe.engines.gpt_sovits.sovits_config import MRTE_WIDTH, SSL_DIM, SoVITSConfig
from koe.engines.gpt_sovits.sovits_flow import Flow
from koe.engines.gpt_sovits.sovits_generator import Generator
from koe.engines.gpt_sovits.sovits_style import StyleEncoder
from koe.engines.gpt_sovits.sovits_text import PriorEncoder
from koe.engines.gpt_sovits.sv import SV_DIM

__all__ = ["SoVITS"]


class SoVITS(nn.Module):
    """The synthesizer's inference modules under their released names (`enc_p`, `ref_enc`, `flow`,
    `dec`, `ssl_proj`, `quantizer`; v2Pro/ProPlus also `sv_emb`, `ge_to512`, `prelu`)."""

    def __init__(self, config: SoVITSConfig) -> None:
        super().__init__()
        self.config = config
        self.ignored: tuple[str, ...] = ()  # stored tensors the loader left out (training state)
        self.info = ""  # the file's `info` (upstream's epoch and step)
        self.enc_p = PriorEncoder(config)
        self.ref_enc = StyleEncoder(config.style_bins, config.gin_channels)
        self.flow = Flow(config.inter_channels, config.hidden_channels, config.gin_channels)
        self.dec = Generator(config)
        self.ssl_proj = nn.Conv1d(SSL_DIM, SSL_DIM, 2, stride=2)  # 50 Hz HuBERT frames -> 25 Hz codes
        self.quantizer = SemanticQuantizer()
        if config.is_pro:
            self.sv_emb = nn.Linear(SV_DIM, config.gin_channels)
            self.ge_to512 = nn.Linear(config.gin_channels, MRTE_WIDTH)
            self.prelu = nn.PReLU(num_parameters=config.gin_channels)

    @property
    def sample_rate(self) -> int:
        return self.config.sampling_rate

    @property
    def needs_sv(self) -> bool:
        """v2Pro/ProPlus: each reference needs its speaker-verification embedding."""
        return self.config.is_pro

    @torch.no_grad()
    def reference_embedding(self, specs: Sequence[torch.Tensor], sv: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """The timbre embedding ge (B, gin, 1) of one or more reference spectrograms (each
        (B, bins, frames)): each one's `ref_enc` (v2Pro/ProPlus: plus the projection of its
        speaker-verification embedding `sv[i]` (B, 20480), through the PReLU), stacked and averaged."""
        if not specs:
            raise ValueError("SoVITS needs at least one reference spectrogram")
        for spec in specs:
            if spec.dim() != 3 or spec.shape[1] < self.ref_enc.bins:
                raise ValueError(f"a reference spectrogram must be (batch, >= {self.ref_enc.bins} bins, frames), not {tuple(spec.shape)}")
        if not self.needs_sv:
            if sv is not None:
                raise ValueError(f"SoVITS {self.config.version} takes no speaker-verification embeddings (v2Pro/ProPlus do)")
            return torch.stack([self.ref_enc(spec) for spec in specs], 0).mean(0)
        if sv is None or len(sv) != len(specs):
            got = "none" if sv is None else len(sv)
            raise ValueError(f"SoVITS {self.config.version} needs one speaker-verification embedding per reference: {len(specs)} references, {got} embeddings")
        for emb in sv:
            if emb.dim() != 2 or emb.shape[1] != SV_DIM:
                raise ValueError(f"a speaker-verification embedding must be (batch, {SV_DIM}), not {tuple(emb.shape)}")
        return torch.stack([self.prelu(self.ref_enc(spec) + self.sv_emb(emb).unsqueeze(-1)) for spec, emb in zip(specs, sv)], 0).mean(0)

    @torch.no_grad()
    def decode(
        self,
        codes: torch.Tensor,
        phones: torch.Tensor,
        specs: Sequence[torch.Tensor],
        noise_scale: float = 0.5,
        speed: float = 1.0,
        generator: torch.Generator | None = None,
        sv: Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """codes (1, 1, T) int64 semantic codes (upstream's layout), phones (1, N) int64 phoneme ids,
        specs: reference spectrograms (1, bins, frames), sv (v2Pro/ProPlus only): each reference's
        speaker-verification embedding (1, 20480) -> waveform (1, 1, samples), 2 T x
        prod(upsample_rates) samples at speed 1. One normal draw of the prior's shape from
        `generator` (torch's default generator when None)."""
        ge, latents, ge_mrte = self._inputs(codes, phones, specs, speed, sv)
        m, logs, mask = self.enc_p(latents, phones, ge_mrte, speed)
        return self._sample(m, logs, mask, ge, noise_scale, generator)

    @torch.no_grad()
    def decode_streaming(
        self,
        codes: torch.Tensor,
        phones: torch.Tensor,
        specs: Sequence[torch.Tensor],
        speed: float = 1.0,
        sv: Sequence[torch.Tensor] | None = None,
        result_length: int | None = None,
        overlap: torch.Tensor | None = None,
        noise_scale: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Upstream's `SynthesizerTrn.decode_streaming` (TTS.run's streaming_mode): `decode` of every
        code so far, of which only the last `result_length` codes' frames (None: all) go on through
        the prior's sample, the flow and the generator, their first frames crossfaded with `overlap`
        (the previous call's kept frames' tail, or None) -> (waveform (1, 1, samples), the kept
        frames (1, 192, frames) before the speed stretch). The draw is of the kept frames' shape."""
        ge, latents, ge_mrte = self._inputs(codes, phones, specs, speed, sv)
        frames = None if result_length is None else 2 * result_length  # 25 Hz codes, 50 Hz frames
        m, logs, mask, kept = self.enc_p.streamed(latents, phones, ge_mrte, speed, frames, overlap)
        return self._sample(m, logs, mask, ge, noise_scale, generator), kept

    def _inputs(self, codes, phones, specs, speed, sv) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The inputs checked -> (ge, the codes' latents at 50 Hz, ge as the prior encoder takes it)."""
        if codes.dim() != 3 or codes.dtype != torch.long:
            raise ValueError(f"codes must be int64 (1, 1, frames), not {codes.dtype} {tuple(codes.shape)}")
        if phones.dim() != 2 or phones.dtype != torch.long:
            raise ValueError(f"phones must be int64 (1, phonemes), not {phones.dtype} {tuple(phones.shape)}")
        if speed <= 0:
            raise ValueError(f"speed must be > 0, not {speed}")
        ge = self.reference_embedding(specs, sv)
        latents = self.quantizer.decode(codes)
        latents = F.interpolate(latents, size=int(latents.shape[-1] * 2), mode="nearest")  # 25 Hz -> 50 Hz
        ge_mrte = self.ge_to512(ge.transpose(2, 1)).transpose(2, 1) if self.needs_sv else ge  # (B, 512, 1)
        return ge, latents, ge_mrte

    def _sample(self, m, logs, mask, ge, noise_scale, generator) -> torch.Tensor:
        """The prior's sample (one normal draw of its shape), the flow in reverse, the generator."""
        noise = torch.randn(m.shape, generator=generator, dtype=m.dtype, device=m.device)
        z_p = m + noise * torch.exp(logs) * noise_scale
        z = self.flow.reverse(z_p, mask, ge)
        return self.dec(z * mask, ge)

    @torch.no_grad()
    def extract_latent(self, features: torch.Tensor) -> torch.Tensor:
        """HuBERT features (B, 768, frames) at 50 Hz -> semantic codes (B, 1, frames // 2) int64."""
        if features.dim() != 3 or features.shape[1] != SSL_DIM:
            raise ValueError(f"features must be (batch, {SSL_DIM}, frames), not {tuple(features.shape)}")
        return self.quantizer.encode(self.ssl_proj(features))
