"""Drop-in for `omnivoice.OmniVoice`: code written for upstream `omnivoice` runs unchanged on koe.

`OmniVoice.from_pretrained(name_or_path, ...)`, `generate(text, language, ref_text, ref_audio,
voice_clone_prompt, instruct, duration, speed, generation_config, normalize_text, **kwargs)` ->
a list of float32 numpy waveforms at `sampling_rate`, `create_voice_clone_prompt(ref_audio,
ref_text, preprocess_prompt)` -> a `VoiceClonePrompt` (with upstream's `save` / `load` file), and
`OmniVoiceGenerationConfig`, as upstream has them. Like upstream it draws from torch's global
generator, so `torch.manual_seed(N)` before a call gives upstream's samples.

Not supported, and said so rather than ignored: a clip without its transcript (upstream transcribes
it with Whisper; koe needs `ref_text`), `normalize_text=True`, different languages or instructions
for the texts of one call. `from_pretrained` takes a local folder, a store name or a hub id (koe's
resolver: the store, the Hugging Face cache, a download on first use).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from koe.engines.omnivoice.engine import OmniVoiceEngine
from koe.engines.omnivoice.generate import Settings
from koe.engines.omnivoice.reference import VoicePrompt
from koe.engines.omnivoice.synthesis import Chunking, Output

__all__ = ["OmniVoice", "OmniVoiceGenerationConfig", "VoiceClonePrompt"]

_PROMPT_FORMAT_VERSION = 1


@dataclass
class OmniVoiceGenerationConfig:
    """Upstream's generation settings, with its defaults (the core's: `Settings`, `Chunking`, `Output`)."""

    num_step: int = Settings.num_step
    guidance_scale: float = Settings.guidance_scale
    t_shift: float = Settings.t_shift
    layer_penalty_factor: float = Settings.layer_penalty_factor
    position_temperature: float = Settings.position_temperature
    class_temperature: float = Settings.class_temperature
    denoise: bool = True
    preprocess_prompt: bool = True
    postprocess_output: bool = Output.postprocess_output
    audio_chunk_duration: float = Chunking.audio_chunk_duration
    audio_chunk_threshold: float = Chunking.audio_chunk_threshold
    pad_duration: float = Output.pad_duration
    fade_duration: float = Output.fade_duration

    @classmethod
    def from_dict(cls, kwargs_dict: dict[str, Any]) -> OmniVoiceGenerationConfig:
        valid = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in kwargs_dict.items() if k in valid})


@dataclass
class VoiceClonePrompt:
    """A reusable clone prompt: the reference's codes (codebooks, frames), its transcript, its rms."""

    ref_audio_tokens: torch.Tensor
    ref_text: str
    ref_rms: float

    def save(self, path: str) -> None:
        """Upstream's file: a plain dict (`torch.load(weights_only=True)` reads it)."""
        data = {"format_version": _PROMPT_FORMAT_VERSION, "ref_audio_tokens": self.ref_audio_tokens.detach().cpu(), "ref_text": self.ref_text}
        torch.save({**data, "ref_rms": float(self.ref_rms)}, path)

    @classmethod
    def load(cls, path: str, map_location: str = "cpu") -> VoiceClonePrompt:
        data = torch.load(path, map_location=map_location, weights_only=True)
        if not isinstance(data, dict) or data.get("format_version") != _PROMPT_FORMAT_VERSION:
            raise ValueError(f"{path}: not a voice clone prompt of format {_PROMPT_FORMAT_VERSION}")
        return cls(data["ref_audio_tokens"], data["ref_text"], float(data["ref_rms"]))


def _as_list(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != n:
            raise ValueError(f"{name} has {len(value)} items for {n} texts")
        return value
    return [value] * n


def _one(values: list[Any], name: str) -> Any:
    if len(set(values)) > 1:
        raise NotImplementedError(f"different {name}s for the texts of one call are not supported by koe yet: call generate once per {name}")
    return values[0]


class OmniVoice:
    """A koe OmniVoice engine behind upstream's `OmniVoice` class."""

    def __init__(self, engine: OmniVoiceEngine) -> None:
        self.engine = engine
        self.sampling_rate = engine.sample_rate

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str, *args: Any, **kwargs: Any) -> OmniVoice:
        """A local folder, or a hub id or store name through koe's resolver
        (`koe.service.store.resolve.model_folder`): the store, the Hugging Face cache (`cache_dir`), a
        download into the store unless `local_files_only`. `device_map` ("cpu", "cuda:0", ...) places
        it; `dtype` / `torch_dtype` must be float32 (koe's exact mode); `load_asr=True` is refused."""
        from koe.service.store.resolve import model_folder

        if kwargs.pop("load_asr", False):
            raise NotImplementedError("load_asr=True: koe does not run Whisper; pass ref_text with each reference clip")
        device = kwargs.pop("device_map", None)
        if isinstance(device, dict):
            device = next(iter(device.values()), None)
        dtype = kwargs.pop("dtype", None) or kwargs.pop("torch_dtype", None)
        path = model_folder(pretrained_model_name_or_path, cache_dir=kwargs.pop("cache_dir", None), local_files_only=kwargs.pop("local_files_only", False))
        return cls(OmniVoiceEngine.load(path, device=None if device in (None, "auto") else str(device), dtype=dtype))

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def create_voice_clone_prompt(self, ref_audio: Any, ref_text: str | None = None, preprocess_prompt: bool = True) -> VoiceClonePrompt:
        """As upstream: `ref_audio` a file path or a (waveform, sample_rate) tuple; `ref_text` its transcript."""
        prompt = self.engine.model.prompt(ref_audio, ref_text, preprocess_prompt)
        return VoiceClonePrompt(prompt.codes, prompt.text, prompt.rms)

    def generate(
        self,
        text: str | list[str],
        language: str | list[str] | None = None,
        ref_text: str | list[str] | None = None,
        ref_audio: Any = None,
        voice_clone_prompt: VoiceClonePrompt | list[VoiceClonePrompt] | None = None,
        instruct: str | list[str] | None = None,
        duration: float | list[float | None] | None = None,
        speed: float | list[float | None] | None = None,
        generation_config: OmniVoiceGenerationConfig | None = None,
        normalize_text: bool = False,
        **kwargs: Any,
    ) -> list[np.ndarray]:
        """Speech for each text, as upstream's `generate`: float32 waveforms at `sampling_rate`."""
        if normalize_text:
            raise NotImplementedError("normalize_text=True: upstream's text normaliser is not supported by koe yet; write numbers and dates out in words")
        config = generation_config if generation_config is not None else OmniVoiceGenerationConfig.from_dict(kwargs)
        texts = [text] if isinstance(text, str) else list(text)
        n = len(texts)
        model = self.engine.model
        if voice_clone_prompt is not None:
            prompts = _as_list(voice_clone_prompt, n, "voice_clone_prompt")
            voices = [VoicePrompt(p.ref_audio_tokens.to(torch.long), p.ref_text, float(p.ref_rms)) for p in prompts]
        elif ref_audio is not None:
            clips, transcripts = _as_list(ref_audio, n, "ref_audio"), _as_list(ref_text, n, "ref_text")
            voices = [model.prompt(c, t, config.preprocess_prompt) for c, t in zip(clips, transcripts, strict=True)]
        else:
            voices = [None] * n
        return model.generate(
            texts,
            Settings(
                config.num_step, config.guidance_scale, config.t_shift, config.layer_penalty_factor, config.position_temperature, config.class_temperature
            ),
            Output(config.postprocess_output, config.pad_duration, config.fade_duration),
            durations=_as_list(duration, n, "duration"),
            speeds=_as_list(speed, n, "speed"),
            language=_one(_as_list(language, n, "language"), "language"),
            instruct=_one(_as_list(instruct, n, "instruct"), "instruct"),
            voices=voices,
            denoise=config.denoise,
            chunking=Chunking(config.audio_chunk_duration, config.audio_chunk_threshold),
        )
