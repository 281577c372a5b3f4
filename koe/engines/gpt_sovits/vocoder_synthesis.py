"""SoVITS v3/v4's waveform path (upstream's `TTS.using_vocoder_synthesis`): semantic codes ->
features (`SoVITSV3.decode_encp`) -> mel by the CFM, chunk by chunk, continuing the reference's
mel -> waveform by the vocoder (v3: BigVGAN at 24 kHz; v4: its own generator at 48 kHz).

Upstream's steps, in its order:
- the prompt's features `fea_ref` from the reference's codes and phonemes (which also gives ge);
- the reference mel: the raw reference audio (channels averaged), resampled to 24 kHz (v3) or
  32 kHz (v4) with torchaudio's `Resample` (koe's `resample_sinc`, the same bits), its log-mel
  (`mel_spectrogram_torch`, center=False: v3 n_fft 1024 / hop 256, v4 1280 / 320; 100 slaney mels,
  log of the magnitude clamped at 1e-5), normalised to [-1, 1] over [-12, 2] (`norm_spec`);
- both cut to the shorter length, then to the last `T_ref` frames (468 / 500);
- the target's features; chunks of `T_chunk - T_ref'` frames (934 / 1000 in all), each one run
  through `cfm.inference` behind the current prompt (`sample_steps` Euler steps, no guidance, one
  normal draw per chunk) and its new frames kept; the last frames of each chunk become the next
  chunk's prompt mel and features;
- the chunks joined, de-normalised (`denorm_spec`), and vocoded.
Speed stretches the features in `decode_encp`. `super_sampling` (v3's AP_BWE 24 -> 48 kHz
upsampler) is another model and is not built; parallel inference's batched chunks with SOLA
joins (`using_vocoder_synthesis_batched_infer`) are not built yet.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from koe.audio.mel import mel_filterbank
from koe.audio.sinc_resample import resample_sinc
from koe.engines.gpt_sovits.reference import spectrogram
from koe.engines.gpt_sovits.sovits_v3 import SoVITSV3

__all__ = ["SPEC_MAX", "SPEC_MIN", "VOCODER_SETTINGS", "VocoderSettings", "denorm_spec", "norm_spec", "reference_mel", "synthesize"]

SPEC_MIN, SPEC_MAX = -12, 2


@dataclass(frozen=True)
class VocoderSettings:
    """Per version: the reference mel's analysis (`mel_fn` / `mel_fn_v4`) and the chunking
    (`TTS.init_vocoder`'s `vocoder_configs`)."""

    mel_rate: int
    n_fft: int
    hop: int
    t_ref: int
    t_chunk: int
    sample_rate: int  # the vocoder's output rate
    n_mels: int = 100


VOCODER_SETTINGS = {
    "v3": VocoderSettings(mel_rate=24000, n_fft=1024, hop=256, t_ref=468, t_chunk=934, sample_rate=24000),
    "v4": VocoderSettings(mel_rate=32000, n_fft=1280, hop=320, t_ref=500, t_chunk=1000, sample_rate=48000),
}


def norm_spec(x: torch.Tensor) -> torch.Tensor:
    return (x - SPEC_MIN) / (SPEC_MAX - SPEC_MIN) * 2 - 1


def denorm_spec(x: torch.Tensor) -> torch.Tensor:
    return (x + 1) / 2 * (SPEC_MAX - SPEC_MIN) + SPEC_MIN


def reference_mel(audio: torch.Tensor, sample_rate: int, settings: VocoderSettings) -> torch.Tensor:
    """The raw reference (channels, samples) at `sample_rate` -> its normalised log-mel (1, 100, frames)."""
    audio = audio.float()
    if audio.shape[0] == 2:
        audio = audio.mean(0).unsqueeze(0)
    if sample_rate != settings.mel_rate:
        audio = resample_sinc(audio, sample_rate, settings.mel_rate)
    magnitude = spectrogram(audio, settings.n_fft, settings.hop, settings.n_fft)
    basis = torch.from_numpy(mel_filterbank(settings.mel_rate, settings.n_fft, settings.n_mels, 0.0, None)).to(magnitude.dtype)
    mel = torch.log(torch.clamp(torch.matmul(basis, magnitude), min=1e-5) * 1)  # spectral_normalize_torch (C = 1)
    return norm_spec(mel)


@torch.no_grad()
def synthesize(
    model: SoVITSV3,
    vocoder: nn.Module,
    codes: torch.Tensor,
    phones: torch.Tensor,
    prompt_codes: torch.Tensor,
    prompt_phones: torch.Tensor,
    spec: torch.Tensor,
    ref_audio: torch.Tensor,
    ref_rate: int,
    speed: float = 1.0,
    sample_steps: int = 32,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """`using_vocoder_synthesis`: codes (1, 1, T), phones (1, N), the prompt's codes (1, 1, P) and
    phones (1, M), the reference spectrogram (1, bins, frames) and raw audio (channels, samples) at
    `ref_rate` -> the waveform (samples,) at the vocoder's rate. One normal draw per chunk from
    `generator` (torch's default generator when None, as upstream draws)."""
    settings = VOCODER_SETTINGS[model.version]
    fea_ref, ge = model.decode_encp(prompt_codes, prompt_phones, spec)
    mel2 = reference_mel(ref_audio, ref_rate, settings)
    t_min = min(mel2.shape[2], fea_ref.shape[2])
    mel2, fea_ref = mel2[:, :, :t_min], fea_ref[:, :, :t_min]
    if t_min > settings.t_ref:
        mel2, fea_ref = mel2[:, :, -settings.t_ref :], fea_ref[:, :, -settings.t_ref :]
        t_min = settings.t_ref
    chunk_len = settings.t_chunk - t_min
    fea_todo, ge = model.decode_encp(codes, phones, spec, ge, speed)
    chunks = []
    idx = 0
    while True:
        fea_chunk = fea_todo[:, :, idx : idx + chunk_len]
        if fea_chunk.shape[-1] == 0:
            break
        idx += chunk_len
        fea = torch.cat([fea_ref, fea_chunk], 2).transpose(2, 1)  # (1, frames, 512)
        mel = model.cfm.inference(fea, mel2, sample_steps, cfg_rate=0, generator=generator)
        mel = mel[:, :, mel2.shape[2] :]
        mel2 = mel[:, :, -t_min:]
        fea_ref = fea_chunk[:, :, -t_min:]
        chunks.append(mel)
    with torch.inference_mode():
        return vocoder(denorm_spec(torch.cat(chunks, 2)))[0][0]
