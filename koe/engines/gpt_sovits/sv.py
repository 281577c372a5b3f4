"""GPT-SoVITS v2Pro/ProPlus's speaker-verification embedding (upstream's `sv.SV`): a 16 kHz clip ->
the (B, 20480) ERes2NetV2 embedding SoVITS adds to its timbre embedding.

Upstream (`SV.compute_embedding3`) takes the clips as a (B, samples) batch, computes each one's
Kaldi filterbanks (`kaldi.fbank(clip[None], num_mel_bins=80, sample_frequency=16000, dither=0)`,
its own copy of torchaudio's, which caches the mel banks but computes the same bits:
`koe.audio.kaldi.kaldi_fbank`), stacks them (no mean normalisation, unlike CAM++) and runs
`ERes2NetV2.forward3`. `TTS.run` passes one reference at a time, (1, samples): the reference
resampled to the SoVITS rate, then to 16 kHz (`reference.reference_spectrogram(sv_audio=True)`).

The released model is `sv/pretrained_eres2netv2w24s4ep4.ckpt`, a `torch.save`d state dict of
upstream's `ERes2NetV2(baseWidth=24, scale=4, expansion=4)` (53.6 M numbers; the released 108 MB
fits float16) that upstream loads with `weights_only=False` and strictly. koe reads it with
`weights_only=True` (plain tensors: nothing else is needed), upcasts floats to float32 (as
upstream's `load_state_dict` copies them into its float32 model) and loads strictly what
`forward3` uses (the batch norms' `num_batches_tracked` counters included, as buffers); ignored
by name: the unused `seg_1` projection, which a file may also lack.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from torch import nn

from koe.audio.kaldi import SAMPLE_RATE, kaldi_fbank
from koe.engines.gpt_sovits.eres2net import ERes2NetV2, ERes2NetV2Config
from koe.runtime.weights import WeightsError, build_on_meta, check_state_fits

__all__ = ["SV_DIM", "SV_FILE", "SV_IGNORED", "MEL_BINS", "SpeakerVerifier", "load_sv", "sv_state"]

SV_FILE = "sv/pretrained_eres2netv2w24s4ep4.ckpt"  # under upstream's pretrained_models
MEL_BINS = 80
SV_DIM = ERes2NetV2Config().embedding_dim  # 20480: SoVITS's `sv_emb` reads this many
SV_IGNORED = ("seg_1.",)  # held by released files, used only by the network's own `forward`


class SpeakerVerifier(nn.Module):
    """Upstream's `SV`: 16 kHz clips -> ERes2NetV2 embeddings of their filterbanks."""

    def __init__(self, config: ERes2NetV2Config | None = None) -> None:
        super().__init__()
        self.model = ERes2NetV2(config or ERes2NetV2Config())
        self.ignored: tuple[str, ...] = ()  # stored tensors the loader left out

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    @staticmethod
    def features(audio: torch.Tensor) -> torch.Tensor:
        """(B, samples) float32 16 kHz clips -> (B, frames, 80) filterbanks (each clip's, stacked)."""
        if audio.dim() != 2:
            raise ValueError(f"clips must be (batch, samples) at 16 kHz, not {tuple(audio.shape)}")
        return torch.stack([kaldi_fbank(clip.unsqueeze(0), MEL_BINS) for clip in audio])

    @torch.no_grad()
    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """`compute_embedding3`: (B, samples) float32 16 kHz clips -> (B, 20480) embeddings."""
        return self.model(self.features(audio))


def sv_state(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """A released state dict as koe's `ERes2NetV2` holds it (floats as float32, under the network's
    names) and the names left out (`seg_1.*`)."""
    ignored = sorted(k for k in state if k.startswith(SV_IGNORED))
    kept = {k: (v.to(torch.float32) if v.is_floating_point() else v) for k, v in state.items() if k not in ignored}
    return kept, ignored


def load_sv(path: str | Path) -> SpeakerVerifier:
    """The released `pretrained_eres2netv2w24s4ep4.ckpt` -> koe's verifier in float32, eval mode.
    Strict: a missing, unexpected or misshapen tensor is a `WeightsError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no speaker-verification checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as e:
        raise WeightsError(f"{path}: refused to load: it holds more than tensors (koe never runs code from a checkpoint): {e}") from e
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise WeightsError(f"{path}: not a readable checkpoint ({e})") from e
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{path}: not an ERes2NetV2 state dict (a mapping of names to tensors)")
    kept, ignored = sv_state(state)
    verifier = build_on_meta(SpeakerVerifier)
    check_state_fits(kept, verifier.model, f"{path}: does not match ERes2NetV2 (baseWidth 24, scale 4, expansion 4)")
    verifier.model.load_state_dict(kept, strict=True, assign=True)
    verifier.ignored = tuple(ignored)
    return verifier.eval()
