"""The sine engine: one tone per word, at the voice's pitch, with seeded noise.

What a family writes on `koe.engines.engine.BaseEngine`: its loader (`load`, strict, through
`koe.runtime.weights`), `capabilities`, `build_voice` (a clip -> `SineVoice`), `speak_segment`
(one segment's audio, whole or in pieces on the `Chunker`'s schedule) and its metadata. The base
does the rest: the pipeline (segments, seed + i, pauses, budgets), the voice / language / option
checks from `Capabilities`, `prepare_voice`, `load_voice`, the batch methods and `close`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import nn

from koe.audio.io import load_audio
from koe.audio.resample import resample
from koe.engines.base import AudioChunk, Capabilities, ConversionRequest, UnsupportedVoice, VoiceReference
from koe.engines.chunker import Chunker
from koe.engines.engine import BaseEngine, Checked
from koe.engines.pipeline import Piece, PipelineDefaults, Segment, steps_for
from koe.runtime.device import resolve_device
from koe.runtime.precision import check as check_precision
from koe.runtime.precision import float_dtype
from koe.runtime.weights import build_from_weights
from koe_sine import spec
from koe_sine.voice import SineVoice, SineVoiceError

__all__ = ["SineEngine", "SineModel"]

_WORD = re.compile(r"\w+")
MAX_CLIP_S = 30.0


class SineModel(nn.Module):
    """The weights: each preset speaker's `pitch` (Hz) and `amplitude`, and the `noise` level."""

    def __init__(self, speakers: int) -> None:
        super().__init__()
        self.pitch = nn.Parameter(torch.zeros(speakers))
        self.amplitude = nn.Parameter(torch.zeros(speakers))
        self.noise = nn.Parameter(torch.zeros(1))


class SineEngine(BaseEngine):
    """A loaded sine model. Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = spec.SPEC.title
    voice_type, voice_error = SineVoice, SineVoiceError
    pipeline_defaults = PipelineDefaults(max_segment_chars=200, pause_s=0.1, first_chunk_s=0.3, chunk_s=0.6)

    def __init__(self, folder: Path, config: dict, model: SineModel, device: torch.device) -> None:
        self.folder, self.config, self.model, self.device = folder, config, model, device
        self.sample_rate = int(config["sample_rate"])
        self.speakers = [s.lower() for s in config["speakers"]]

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> SineEngine:
        """Load a model folder (strict: a missing file or tensor, or a wrong shape, is an error naming it)."""
        folder = Path(folder)
        check_precision(precision, spec.PRECISIONS, "Sine")  # refused before anything is read
        float_dtype(dtype, (torch.float32,), "Sine")
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        for name in spec.REQUIRED_FILES:
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder}: missing {name}")
        config = spec.read_config(folder)
        dev = resolve_device(device)
        model = build_from_weights(lambda: SineModel(len(config["speakers"])), [folder / "model.safetensors"], device=dev, dtype=torch.float32)
        return cls(folder, config, model.eval(), dev)

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities(self.config)

    @property
    def precision(self) -> str:
        return "float32"

    def release(self) -> None:
        self.model = None

    # -- voices ---------------------------------------------------------------------------------
    def build_voice(self, reference: VoiceReference) -> SineVoice:
        """A voice from a clip alone (its transcript, if given, is not needed): its mean pitch and level."""
        samples, rate = load_audio(reference.audio, max_seconds=MAX_CLIP_S, trim=reference.trim)
        return SineVoice.from_clip(samples, rate)

    # -- speaking -------------------------------------------------------------------------------
    def _voice(self, voice: str | SineVoice) -> tuple[float, float]:
        if isinstance(voice, SineVoice):
            return voice.pitch, voice.amplitude
        i = self.speakers.index(voice.lower())
        return float(self.model.pitch[i]), float(self.model.amplitude[i])

    @torch.inference_mode()
    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        """A tone per word (its pitch steps with the word's length), noise drawn from the segment's seed,
        cut at the segment's budget; streamed in pieces when the chunker says one is due."""
        pitch, amplitude = self._voice(c.voice)
        pitch *= 2.0 ** (c.settings.get("pitch_shift", 0.0) / 12)
        rate, noise = self.sample_rate, float(self.model.noise[0])
        generator = torch.Generator().manual_seed(int(segment.seed)) if segment.seed is not None else None
        per_word, budget = max(1, round(self.config["word_seconds"] * rate)), steps_for(segment.budget_s, rate)
        chunker = Chunker.of(segment.first_chunk_s, segment.chunk_s, rate) if segment.streamed else None
        words = _WORD.findall(segment.text) or [segment.text]
        held: list[np.ndarray] = []
        made = spoken = 0
        truncated = False
        for i, word in enumerate(words):
            if c.cancel is not None:
                c.cancel.raise_if_cancelled()
            n = min(per_word, budget - made)
            t = torch.arange(per_word, dtype=torch.float64) / rate
            f = pitch * 2.0 ** ((len(word) % 5) / 12)
            tone = amplitude * torch.sin(2 * torch.pi * f * t) * torch.sin(torch.pi * (t + 0.5 / rate) * rate / per_word)
            tone = (tone.to(torch.float32) + noise * torch.randn(per_word, generator=generator))[:n]
            held.append(tone.numpy())
            made, spoken = made + n, i + 1
            truncated = made >= budget and i < len(words) - 1
            if truncated:
                break
            if chunker is not None and chunker.add(n) and i < len(words) - 1:
                yield Piece(np.concatenate(held), spoken)
                held = []
        info = {"seconds": made / rate, "words": spoken}
        yield Piece(np.concatenate(held) if held else np.zeros(0, np.float32), spoken, last=True, truncated=truncated, info=info)

    @torch.inference_mode()
    def convert(self, request: ConversionRequest) -> Iterator[AudioChunk]:
        """Voice conversion: the source's loudness, frame by frame (20 ms), carried by a tone at the
        voice's pitch, with noise from the request's seed; in chunks when streamed."""
        voice = self.check_voice(request.voice)
        if not isinstance(voice, SineVoice):
            raise UnsupportedVoice("voice conversion needs a voice cloned from a clip")
        samples, rate = request.source
        samples = resample(samples.astype(np.float32), rate, self.sample_rate)
        frame = self.sample_rate // 50
        frames = max(1, len(samples) // frame)
        level = np.sqrt(np.mean(samples[: frames * frame].reshape(frames, frame) ** 2, axis=1)) if len(samples) >= frame else np.zeros(1)
        envelope = np.repeat(level / max(float(level.max()), 1e-9), frame)[: len(samples)]
        t = np.arange(len(envelope)) / self.sample_rate
        wave = voice.amplitude * envelope * np.sin(2 * np.pi * voice.pitch * t)
        generator = torch.Generator().manual_seed(int(request.seed)) if request.seed is not None else None
        wave = (torch.from_numpy(wave).to(torch.float32) + float(self.model.noise[0]) * torch.randn(len(wave), generator=generator)).numpy()
        step = round((request.chunk_s or 0.5) * self.sample_rate) if request.streamed else len(wave)
        for start in range(0, len(wave), max(1, step)):
            if request.cancel is not None:
                request.cancel.raise_if_cancelled()
            end = min(len(wave), start + step)
            final = end >= len(wave)
            meta = {**self.result_metadata(), "seed": request.seed, "source_seconds": round(len(samples) / self.sample_rate, 3)} if final else {}
            yield AudioChunk(wave[start:end], self.sample_rate, start, final, meta)

    def result_metadata(self) -> dict:
        return {"model": spec.MODEL_TYPE, "precision": self.precision, "device": str(self.device)}
