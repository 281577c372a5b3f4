"""IndexTTS 1.5 as one model: a clip's mel conditions the GPT, whose mel codes (beam-sampled) and
latent become 24 kHz audio through BigVGAN, one text segment after another.

What upstream's `IndexTTS.infer` does on the CPU, in its order (its draws: one `torch.multinomial`
per search step, from torch's global generator): the reference's log-mel; the text normalised,
tokenised and cut into segments of at most `max_text_tokens_per_segment` tokens; per segment the
code search, long runs of the silence code shrunk, the latent pass, the vocoder, and
`clamp(32767 * wav)`; the segments' audio joined end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from koe.runtime import exact
from koe_indextts.beam import Sampling, search
from koe_indextts.bigvgan import BigVGAN, BigVGANConfig, load_bigvgan, to_pcm_scale
from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning, load_conditioning
from koe_indextts.config import Release15
from koe_indextts.gpt import Conv1D
from koe_indextts.voice_lm import GPTConfig, SpeechLM

SILENT_CODE = 52  # the mel code of silence in the released 1.5 vocabulary (upstream hard-codes it)
SILENCE_LIMIT = 30  # more silent codes than this in a segment and every run is cut to...
SILENCE_RUN = 10  # ...this many


def shrink_silence(codes: torch.Tensor, stop: int) -> torch.Tensor:
    """(n,) codes up to the first stop code; when the whole row holds more than `SILENCE_LIMIT`
    silent codes, every run of them is cut to `SILENCE_RUN` (upstream's `remove_long_silence`)."""
    stops = (codes == stop).nonzero()
    end = int(stops[0]) if len(stops) else codes.numel()
    if int((codes == SILENT_CODE).sum()) <= SILENCE_LIMIT:
        return codes[:end]
    keep, run = [], 0
    for k, code in enumerate(codes[:end].tolist()):
        if code != SILENT_CODE:
            keep.append(k)
            run = 0
        elif run < SILENCE_RUN:
            keep.append(k)
            run += 1
    return codes[keep]


def exact_products(lm: nn.Module) -> nn.Module:
    """The LM's linear layers (GPT-2's `Conv1D`s and the heads) on koe's exact CPU kernel where it
    gives torch's bits here (`koe.runtime.exact`, checked per shape): a search step reads the whole
    GPT for a few rows, which the kernel does in about half MKL's time; elsewhere they stay."""
    exact.exact_linears(lm, transposed=(Conv1D,))
    return lm


@dataclass(frozen=True)
class Voice:
    """What a reference clip gives every segment: its log-mel (1, 100, frames), the GPT's
    conditioning latents (1, 32, d) and the vocoder's speaker embedding (1, 1, e)."""

    mel: torch.Tensor
    latents: torch.Tensor
    speaker: torch.Tensor


class IndexTTS15:
    """A loaded 1.5 (or 1.0) release: its config, the speech LM and conditioning, the vocoder."""

    def __init__(self, release: Release15, lm: SpeechLM, conditioning: SpeechConditioning, vocoder: BigVGAN):
        self.release, self.lm, self.conditioning, self.vocoder = release, lm, conditioning, vocoder

    @classmethod
    def load(cls, folder: str | Path) -> IndexTTS15:
        """Strictly: a tensor missing from or unknown to `gpt.pth` or `bigvgan_generator.pth` is an error."""
        folder = Path(folder)
        release = Release15.read(folder)
        gpt = GPTConfig.from_dict(release.gpt)
        # mapped, not read: the LM's weights stay the file's pages (no second copy while loading)
        state = torch.load(folder / release.gpt_checkpoint, map_location="cpu", weights_only=True, mmap=True)
        state = state.get("model", state)
        conditioning = load_conditioning(state, ConditioningConfig.speaker(release.gpt))
        with torch.device("meta"):
            lm = SpeechLM(gpt)
        ours = {k: v for k, v in state.items() if not k.startswith(("conditioning_encoder.", "perceiver_encoder."))}
        ours = {k: v for k, v in ours.items() if not k.startswith("inference_model.") and not k.endswith((".attn.bias", ".attn.masked_bias"))}
        lm.load_state_dict(ours, strict=True, assign=True)
        vocoder = load_bigvgan(folder / release.bigvgan_checkpoint, BigVGANConfig.from_dict(release.bigvgan))
        return cls(release, exact_products(lm.eval()), conditioning, vocoder)

    @torch.inference_mode()
    def voice(self, mel: torch.Tensor) -> Voice:
        """The conditioning of a reference log-mel (1, 100, frames)."""
        lengths = torch.tensor([mel.shape[-1]])
        return Voice(mel, self.conditioning(mel, lengths), self.vocoder.speaker_embedding(mel.transpose(1, 2)))

    @torch.inference_mode()
    def segment(self, ids: torch.Tensor, voice: Voice, sampling: Sampling, cancel=None) -> tuple[torch.Tensor, torch.Tensor]:
        """One text segment's (n,) ids → its audio at 16-bit scale (1, samples) and its codes."""
        codes = search(self.lm, voice.latents, ids, sampling, cancel)
        kept = shrink_silence(codes, self.lm.cfg.stop_mel_token)
        latent = self.lm.latent(voice.latents, ids, kept)
        wav = self.vocoder.decode(latent, voice.speaker).squeeze(1)
        return to_pcm_scale(wav), codes
