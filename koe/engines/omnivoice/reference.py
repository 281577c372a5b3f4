"""A reference clip and its transcript made into OmniVoice's voice prompt, as upstream's
`create_voice_clone_prompt` makes it (with `preprocess_prompt`, its default):

1. the clip as float32 (channels, samples) (soundfile for a file), channels averaged, resampled
   to 24 kHz with torchaudio's `functional.resample` arithmetic (`koe.audio.sinc_resample`);
2. its rms; a quiet clip (rms in (0, 0.1)) scaled up to 0.1 (the prompt keeps the original rms,
   which brings the output down to the clip's level);
3. silences cut through 16-bit PCM (`koe.engines.omnivoice.audio.remove_silence`: pauses over
   200 ms, 100 ms kept at the start and 200 ms at the end);
4. cut to a whole number of frames (960 samples) and encoded to 8 x T codes;
5. the transcript stripped and given closing punctuation ("." or "。" for Chinese text).

Upstream transcribes a clip without a transcript with Whisper; koe needs the transcript.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from koe.audio.sinc_resample import resample_sinc
from koe.engines.omnivoice import audio
from koe.engines.omnivoice.audio_tokenizer import AudioTokenizer

__all__ = ["END_PUNCTUATION", "VoicePrompt", "add_punctuation", "load_clip", "make_prompt"]

END_PUNCTUATION = frozenset(";:,.!?…)]}\"'“”‘’；：，。！？、）】")


class ReferenceError(ValueError):
    """A reference clip or transcript OmniVoice cannot clone from."""


@dataclass(frozen=True)
class VoicePrompt:
    """The reference's codes (8, T), its transcript as the prompt uses it, and its original rms."""

    codes: torch.Tensor
    text: str
    rms: float


def add_punctuation(text: str) -> str:
    """`text` stripped, with "." (or "。" when it holds a CJK ideograph) added unless it ends in punctuation."""
    text = text.strip()
    if text and text[-1] not in END_PUNCTUATION:
        text += "。" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "."
    return text


def load_clip(clip: str | Path | tuple[np.ndarray | torch.Tensor, int], rate: int) -> np.ndarray:
    """A file path or (samples, rate) -> mono float32 (1, N) at `rate`."""
    if isinstance(clip, (str, Path)):
        data, source_rate = sf.read(str(clip), dtype="float32", always_2d=True)
        wave = data.T  # (C, N)
    else:
        wave, source_rate = clip
        if isinstance(wave, torch.Tensor):
            wave = wave.detach().cpu().numpy()
        wave = np.asarray(wave)
        if wave.ndim == 1:
            wave = wave[np.newaxis, :]
    if wave.shape[0] > 1:
        wave = np.mean(wave, axis=0, keepdims=True)
    if source_rate != rate:
        wave = resample_sinc(torch.from_numpy(np.ascontiguousarray(wave)), int(source_rate), rate, kernel_dtype=torch.float32).numpy()
    return wave


@torch.inference_mode()
def make_prompt(codec: AudioTokenizer, clip: str | Path | tuple[np.ndarray | torch.Tensor, int], text: str | None, preprocess: bool = True) -> VoicePrompt:
    """The voice prompt of `clip` spoken as `text` (see the module docstring)."""
    if text is None or not str(text).strip():
        raise ReferenceError(
            "OmniVoice needs the reference clip's transcript: pass the exact words spoken in it "
            "(upstream would transcribe the clip with Whisper; koe does not run an ASR model)"
        )
    rate = codec.sample_rate
    wave = load_clip(clip, rate)
    if wave.shape[-1] == 0:
        raise ReferenceError("the reference clip has no samples")
    rms = float(np.sqrt(np.mean(wave**2)))
    if 0 < rms < 0.1:
        wave = wave * 0.1 / rms
    if preprocess:
        wave = audio.remove_silence(wave[0], rate, 200, 100, 200)[None]
        if wave.shape[-1] == 0:
            raise ReferenceError("the reference clip is silent: nothing is left once silences are cut (-50 dBFS)")
    extra = wave.shape[-1] % codec.config.hop_length
    if extra:
        wave = wave[:, :-extra]
    if wave.shape[-1] == 0:
        raise ReferenceError(f"the reference clip is shorter than one frame ({codec.config.hop_length} samples at {rate} Hz)")
    codes = codec.encode(torch.from_numpy(np.ascontiguousarray(wave))[None])[0]  # (8, T)
    return VoicePrompt(codes, add_punctuation(text) if preprocess else text, rms)
