"""An OmniVoice model folder, loaded: text in, 24 kHz float32 samples out (the model's own voice;
cloning and voice design build on the same calls).

`OmniVoiceModel.generate` follows upstream's `OmniVoice.generate` step by step: each text's length
(`duration` in seconds, else the rule-based estimate over `speed`), one batch through the
unmasking sampler, each item's codes decoded, then post-processing (silence removal when
`postprocess_output`, a 0.5 peak, fades and padding).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from koe.engines.omnivoice import audio
from koe.engines.omnivoice.audio_tokenizer import AudioTokenizer, load_audio_tokenizer
from koe.engines.omnivoice.config import read_config
from koe.engines.omnivoice.generate import Item, Settings, unmask
from koe.engines.omnivoice.model import OmniVoiceLM
from koe.engines.omnivoice.text import TextTokenizer, estimate_frames
from koe.runtime.weights import build_from_weights

__all__ = ["OmniVoiceModel", "Output"]


@dataclass(frozen=True)
class Output:
    """How the codes become the returned samples (upstream's post-processing options)."""

    postprocess_output: bool = True
    pad_duration: float = 0.1
    fade_duration: float = 0.1


class OmniVoiceModel:
    """The LM, the audio tokenizer and the text tokenizer of one folder."""

    def __init__(self, lm: OmniVoiceLM, codec: AudioTokenizer, text: TextTokenizer) -> None:
        self.lm, self.codec, self.text = lm, codec, text

    @classmethod
    def load(cls, folder: Path, device: torch.device | str = "cpu") -> OmniVoiceModel:
        folder = Path(folder)
        config = read_config(folder)
        lm = build_from_weights(lambda: OmniVoiceLM(config), [folder / "model.safetensors"], dtype=torch.float32, device=device).eval()
        return cls(lm, load_audio_tokenizer(folder, device=device), TextTokenizer.from_folder(folder))

    @property
    def sample_rate(self) -> int:
        return self.codec.sample_rate

    @property
    def frame_rate(self) -> int:
        return self.codec.config.frame_rate

    def frames_for(self, text: str, duration: float | None = None, speed: float | None = None) -> int:
        """Target frames of one text: `duration` seconds when given, else the estimate at `speed`."""
        if duration is not None:
            return max(1, int(duration * self.frame_rate))
        return estimate_frames(text, speed=1.0 if speed is None else speed)

    def items(
        self, texts: list[str], language: str | None = None, instruct: str | None = None, frames: list[int] | None = None, denoise: bool = True
    ) -> list[Item]:
        """The prompts of texts spoken in the model's own voice (no reference)."""
        frames = frames or [self.frames_for(t) for t in texts]
        out = []
        for text, n in zip(texts, frames, strict=True):
            style, ids = self.text.prompt_ids(text, None, language, instruct, denoise=False)
            out.append(Item(style, ids, None, n))
        return out

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> np.ndarray:
        """codes (8, T) -> float32 samples (T * hop,) as the tokenizer decodes them."""
        return self.codec.decode(codes.unsqueeze(0))[0, 0].cpu().numpy()

    def finish(self, samples: np.ndarray, ref_rms: float | None, output: Output) -> np.ndarray:
        """Upstream's post-processing of one decoded item."""
        if output.postprocess_output:
            samples = audio.remove_silence(samples, self.sample_rate, 500, 100, 100)
        samples = audio.loudness(samples, ref_rms)
        return audio.fade_and_pad(samples, self.sample_rate, output.pad_duration, output.fade_duration)

    @torch.inference_mode()
    def generate(
        self,
        texts: list[str],
        settings: Settings | None = None,
        output: Output | None = None,
        durations: list[float | None] | None = None,
        speeds: list[float | None] | None = None,
        language: str | None = None,
        instruct: str | None = None,
    ) -> list[np.ndarray]:
        """Each text in the model's own voice, one batch (draws from torch's global generator)."""
        durations = durations or [None] * len(texts)
        speeds = speeds or [None] * len(texts)
        frames = [self.frames_for(t, d, s) for t, d, s in zip(texts, durations, speeds, strict=True)]
        codes = unmask(self.lm, self.items(texts, language, instruct, frames), settings or Settings())
        return [self.finish(self.decode(c), None, output or Output()) for c in codes]
