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
Speed stretches the features in `decode_encp`. `super_sampling` (v3's AP-BWE 24 -> 48 kHz) is
another model, run after `audio_postprocess` joins the audio (`ap_bwe.py`, the drop-in's).

`synthesize_batched` is `using_vocoder_synthesis_batched_infer` (what `TTS.run` uses with
`parallel_infer`): the prompt as above; every fragment's features joined, `overlapped_len` (12)
zero frames put in front, cut into chunks of `chunk_len` frames that overlap by 12 (the last one
zero-padded), ALL chunks through ONE `cfm.inference` behind the same prompt (one normal draw of the
whole batch), their new frames laid end to end and vocoded at once; the audio cut back into chunks
and joined by upstream's SOLA (`sola`: the best offset within 320 samples by normalised
cross-correlation, a Hann crossfade over the overlap), the leading overlap and the padding
dropped, and the audio cut into fragments by their feature lengths.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.audio.mel import mel_filterbank
from koe.audio.sinc_resample import resample_sinc
from koe.engines.gpt_sovits.reference import spectrogram
from koe.engines.gpt_sovits.sovits_v3 import SoVITSV3

__all__ = [
    "SPEC_MAX",
    "SPEC_MIN",
    "VOCODER_SETTINGS",
    "VocoderPrompt",
    "VocoderSettings",
    "denorm_spec",
    "norm_spec",
    "prompt_of",
    "reference_mel",
    "sola",
    "sola_offset",
    "synthesize",
    "synthesize_batched",
    "synthesize_serial",
]

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
    overlapped_len: int = 12  # frames two batched chunks share

    @property
    def upsample_rate(self) -> int:
        """Vocoder samples per mel frame."""
        return self.sample_rate * self.hop // self.mel_rate


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


@dataclass
class VocoderPrompt:
    """What every chunk continues: the prompt's features `fea` (1, 512, t) and normalised mel `mel`
    (1, 100, t), cut to one length `t` <= T_ref, and the reference's timbre `ge`."""

    fea: torch.Tensor
    mel: torch.Tensor
    ge: torch.Tensor

    @property
    def frames(self) -> int:
        return self.mel.shape[2]


@torch.no_grad()
def prompt_of(model: SoVITSV3, prompt_codes: torch.Tensor, prompt_phones: torch.Tensor, spec: torch.Tensor, mel: torch.Tensor) -> VocoderPrompt:
    """The prompt's features (decode_encp of its codes and phonemes, which gives ge) and the
    reference mel (`reference_mel`), both cut to the shorter one, then to the last T_ref frames."""
    settings = VOCODER_SETTINGS[model.version]
    fea_ref, ge = model.decode_encp(prompt_codes, prompt_phones, spec)
    t_min = min(mel.shape[2], fea_ref.shape[2])
    mel, fea_ref = mel[:, :, :t_min], fea_ref[:, :, :t_min]
    if t_min > settings.t_ref:
        mel, fea_ref = mel[:, :, -settings.t_ref :], fea_ref[:, :, -settings.t_ref :]
    return VocoderPrompt(fea_ref, mel, ge)


@torch.no_grad()
def synthesize_serial(
    model: SoVITSV3,
    vocoder: nn.Module,
    prompt: VocoderPrompt,
    codes: torch.Tensor,
    phones: torch.Tensor,
    spec: torch.Tensor,
    speed: float = 1.0,
    sample_steps: int = 32,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """`using_vocoder_synthesis` after its prompt: codes (1, 1, T), phones (1, N) -> the waveform
    (samples,) at the vocoder's rate. One normal draw per chunk."""
    settings = VOCODER_SETTINGS[model.version]
    t_min = prompt.frames
    fea_ref, mel2 = prompt.fea, prompt.mel
    chunk_len = settings.t_chunk - t_min
    fea_todo, _ = model.decode_encp(codes, phones, spec, prompt.ge, speed)
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


def sola(fragments: list[torch.Tensor], overlap: int, search: int = 320) -> torch.Tensor:
    """Upstream's `sola_algorithm`: each pair of neighbours joined at the offset (within `search`
    samples) where the next one's start best matches the previous one's last `overlap` samples
    (normalised cross-correlation), crossfaded there by a Hann window."""
    fragments = list(fragments)
    window = torch.hann_window(overlap * 2, dtype=fragments[0].dtype)
    for i in range(len(fragments) - 1):
        f1, f2 = fragments[i], fragments[i + 1]
        offset = sola_offset(f1, f2, overlap, search)
        fragments[i] = f1[:-overlap]
        joined = f2[offset:].clone()
        joined[:overlap] = window[:overlap] * joined[:overlap] + window[overlap:] * f1[-overlap:]
        fragments[i + 1] = joined
    return torch.cat(fragments, 0)


def sola_offset(previous: torch.Tensor, current: torch.Tensor, overlap: int, search: int = 320) -> int:
    """Where `sola_algorithm` joins `current` to `previous`: the offset into `current`'s first
    `overlap + search` samples that best matches `previous`'s last `overlap` (normalised
    cross-correlation, the first best)."""
    w1, w2 = previous[-overlap:], current[: overlap + search]
    corr = F.conv1d(w2.view(1, 1, -1), w1.view(1, 1, -1)).view(-1)
    energy = F.conv1d(w2.view(1, 1, -1) ** 2, torch.ones_like(w1).view(1, 1, -1)).view(-1) + 1e-8
    return int((corr / energy.sqrt()).argmax())


@torch.no_grad()
def synthesize_batched(
    model: SoVITSV3,
    vocoder: nn.Module,
    prompt: VocoderPrompt,
    codes: list[torch.Tensor],
    phones: list[torch.Tensor],
    spec: torch.Tensor,
    speed: float = 1.0,
    sample_steps: int = 32,
    generator: torch.Generator | None = None,
) -> list[torch.Tensor]:
    """`using_vocoder_synthesis_batched_infer` after its prompt (see the module's doc): each
    fragment's codes (1, 1, T_i) and phones (1, N_i) -> its waveform at the vocoder's rate. One
    normal draw for all chunks."""
    settings = VOCODER_SETTINGS[model.version]
    chunk_len = settings.t_chunk - prompt.frames
    overlap = settings.overlapped_len
    feats = [model.decode_encp(c, p, spec, prompt.ge, speed)[0] for c, p in zip(codes, phones, strict=True)]
    lengths = [f.shape[2] for f in feats]
    padded = F.pad(torch.cat(feats, 2), (overlap, 0), "constant", 0)
    chunks, pos, padding = [], 0, 0
    while True:
        if pos > 0:
            pos -= overlap
        chunk = padded[:, :, pos : pos + chunk_len]
        pos += chunk_len
        if chunk.shape[-1] == 0:
            break
        padding = chunk_len - chunk.shape[2]
        chunks.append(F.pad(chunk, (0, padding), "constant", 0) if padding else chunk)
    batch = torch.cat(chunks, 0)
    fea = torch.cat([prompt.fea.repeat(batch.shape[0], 1, 1), batch], 2).transpose(2, 1)
    mel = model.cfm.inference(fea, prompt.mel, sample_steps, cfg_rate=0, generator=generator)[:, :, -chunk_len:]
    mel = mel.permute(1, 0, 2).contiguous().view(mel.shape[1], -1).unsqueeze(0)
    audio = vocoder(denorm_spec(mel))[0][0]
    step = chunk_len * settings.upsample_rate
    audio = sola([audio[p : p + step] for p in range(0, audio.shape[-1], step)], overlap * settings.upsample_rate)
    audio = audio[overlap * settings.upsample_rate : -padding * settings.upsample_rate] if padding > 0 else audio[overlap * settings.upsample_rate :]
    out = []
    for length in lengths:
        out.append(audio[: length * settings.upsample_rate])
        audio = audio[length * settings.upsample_rate :]
    return out


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
    prompt = prompt_of(model, prompt_codes, prompt_phones, spec, reference_mel(ref_audio, ref_rate, VOCODER_SETTINGS[model.version]))
    return synthesize_serial(model, vocoder, prompt, codes, phones, spec, speed, sample_steps, generator)
