"""Speaker embedding for Qwen3-TTS voice cloning (Base models' x-vector)."""

from __future__ import annotations

import numpy as np
import torch

from koe.audio.errors import AudioError
from koe.audio.mel import mel_spectrogram
from koe.nn.speaker import SpeakerEncoder

__all__ = ["SPEAKER_SAMPLE_RATE", "extract_speaker_embedding", "speaker_mels"]

SPEAKER_SAMPLE_RATE = 24000


def speaker_mels(audio_24k: np.ndarray) -> torch.Tensor:
    """Log-mels the speaker encoder takes: float32 mono `(n,)` at 24 kHz -> `(1, frames, 128)`."""
    audio = np.asarray(audio_24k)
    if audio.ndim != 1 or audio.dtype != np.float32:
        raise AudioError(f"speaker audio must be float32 mono (n,), got {audio.dtype} {audio.shape}")
    if audio.shape[0] < 1024:
        raise AudioError(f"reference audio too short for a speaker embedding ({audio.shape[0]} samples at 24 kHz)")
    if not np.isfinite(audio).all():
        raise AudioError("speaker audio contains NaN or infinite samples")
    mels = mel_spectrogram(
        torch.from_numpy(audio).unsqueeze(0),  # (1, n)
        n_fft=1024,
        num_mels=128,
        sampling_rate=SPEAKER_SAMPLE_RATE,
        hop_size=256,
        win_size=1024,
        fmin=0,
        fmax=12000,
    )  # (1, 128, frames)
    return mels.transpose(1, 2)  # (1, frames, 128), a view as upstream passes it


@torch.inference_mode()
def extract_speaker_embedding(encoder: SpeakerEncoder, audio_24k: np.ndarray) -> torch.Tensor:
    """Speaker embedding `(enc_dim,)` of float32 mono 24 kHz audio, as upstream computes it.

    The mels are moved to the encoder's device and dtype (as upstream does with the model's).
    """
    param = next(encoder.parameters())
    mels = speaker_mels(audio_24k).to(param.device).to(param.dtype)
    cfg = encoder.config
    # reflect padding needs more frames than the widest 'same' pad of any convolution
    widest = max(d * (k - 1) - d * (k - 1) // 2 for k, d in zip(cfg.enc_kernel_sizes, cfg.enc_dilations))
    if mels.shape[1] <= widest:
        raise AudioError(f"reference audio too short for a speaker embedding: {mels.shape[1]} mel frames, need > {widest}")
    return encoder(mels)[0]
