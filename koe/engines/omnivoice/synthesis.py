"""An OmniVoice model folder, loaded: text in, 24 kHz float32 samples out, in the model's own
voice or a reference's (a `VoicePrompt` from `koe.engines.omnivoice.reference`).

`OmniVoiceModel.generate` follows upstream's `OmniVoice.generate` step by step: each text's length
(`duration` in seconds, else the rule-based estimate at the reference's rate over `speed`), one
batch through the unmasking sampler, each item's codes decoded, then post-processing (silence
removal when `postprocess_output`, the reference's level or a 0.5 peak, fades and padding).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from koe.engines.omnivoice import audio
from koe.engines.omnivoice.audio_tokenizer import AudioTokenizer, load_audio_tokenizer
from koe.engines.omnivoice.config import read_config
from koe.engines.omnivoice.design import resolve_instruct
from koe.engines.omnivoice.generate import Item, Settings, unmask
from koe.engines.omnivoice.languages import resolve_language
from koe.engines.omnivoice.model import OmniVoiceLM
from koe.engines.omnivoice.reference import VoicePrompt, make_prompt
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

    def frames_for(self, text: str, duration: float | None = None, speed: float | None = None, voice: VoicePrompt | None = None) -> int:
        """Target frames of one text: `duration` seconds when given, else the estimate at the voice's rate and `speed`."""
        if duration is not None:
            return max(1, int(duration * self.frame_rate))
        ref_text, ref_frames = (voice.text, voice.codes.shape[-1]) if voice is not None else (None, None)
        return estimate_frames(text, ref_text, ref_frames, speed=1.0 if speed is None else speed)

    def prompt(self, clip, text: str | None, preprocess: bool = True) -> VoicePrompt:
        """The voice prompt of a reference clip (a path or (samples, rate)) and its transcript."""
        return make_prompt(self.codec, clip, text, preprocess)

    def items(
        self,
        texts: list[str],
        language: str | None = None,
        instruct: str | None = None,
        frames: list[int] | None = None,
        denoise: bool = True,
        voices: list[VoicePrompt | None] | None = None,
    ) -> list[Item]:
        """The prompts of texts, each in its voice (None: the model's own); `language` a name or code,
        `instruct` a voice design (checked and normalised per text)."""
        voices = voices or [None] * len(texts)
        frames = frames or [self.frames_for(t, voice=v) for t, v in zip(texts, voices, strict=True)]
        out = []
        code = resolve_language(language)
        for text, n, voice in zip(texts, frames, voices, strict=True):
            ref_text, codes = (voice.text, voice.codes) if voice is not None else (None, None)
            style, ids = self.text.prompt_ids(text, ref_text, code, resolve_instruct(instruct, text), denoise=denoise and voice is not None)
            out.append(Item(style, ids, codes, n))
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
        voices: list[VoicePrompt | None] | None = None,
        denoise: bool = True,
    ) -> list[np.ndarray]:
        """Each text in its voice (None: the model's own), one batch (draws from torch's global generator)."""
        n = len(texts)
        durations, speeds, voices = durations or [None] * n, speeds or [None] * n, voices or [None] * n
        frames = [self.frames_for(t, d, s, v) for t, d, s, v in zip(texts, durations, speeds, voices, strict=True)]
        codes = unmask(self.lm, self.items(texts, language, instruct, frames, denoise, voices), settings or Settings())
        return [self.finish(self.decode(c), None if v is None else v.rms, output or Output()) for c, v in zip(codes, voices, strict=True)]
