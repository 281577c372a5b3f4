"""An OmniVoice model folder, loaded: text in, 24 kHz float32 samples out, in the model's own
voice or a reference's (a `VoicePrompt` from `koe.engines.omnivoice.reference`).

`OmniVoiceModel.generate` follows upstream's `OmniVoice.generate` step by step: each text's length
(`duration` in seconds, else the rule-based estimate at the reference's rate over `speed`), one
batch through the unmasking sampler, each item's codes decoded, then post-processing (silence
removal when `postprocess_output`, the reference's level or a 0.5 peak, fades and padding).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
from koe.engines.omnivoice.text import TextTokenizer, chunk_text, estimate_frames
from koe.runtime.weights import build_from_weights

__all__ = ["Chunking", "OmniVoiceModel", "Output"]


@dataclass(frozen=True)
class Chunking:
    """When and how long texts are spoken in chunks (upstream's names and defaults, in seconds)."""

    audio_chunk_duration: float = 15.0
    audio_chunk_threshold: float = 30.0


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
    def load(cls, folder: Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> OmniVoiceModel:
        """The folder's models: the LM in `dtype` (float32: upstream's bits), the audio tokenizer in float32."""
        folder = Path(folder)
        config = read_config(folder)
        lm = build_from_weights(lambda: OmniVoiceLM(config), [folder / "model.safetensors"], dtype=dtype, device=device).eval()
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
        chunking: Chunking | None = None,
        on_step: Callable[[int], None] | None = None,
    ) -> list[np.ndarray]:
        """Each text in its voice (None: the model's own), drawing from torch's global generator as
        upstream does: the texts under the chunking threshold in one batch, then the longer ones in
        chunks (`Chunking`). `on_step(step)` runs after every unmasking step (a cancel check)."""
        n = len(texts)
        settings, output, chunking = settings or Settings(), output or Output(), chunking or Chunking()
        durations, speeds, voices = durations or [None] * n, speeds or [None] * n, voices or [None] * n
        frames = [self.frames_for(t, d, s, v) for t, d, s, v in zip(texts, durations, speeds, voices, strict=True)]
        # the speed of a long text's chunks: as asked, or what a fixed duration implies
        rates = [
            self.frames_for(t, None, None, v) / f if d is not None else (s or 1.0)
            for t, d, s, v, f in zip(texts, durations, speeds, voices, frames, strict=True)
        ]
        limit = int(chunking.audio_chunk_threshold * self.frame_rate)
        short = [i for i in range(n) if frames[i] <= limit]
        long = [i for i in range(n) if frames[i] > limit]
        codes: list[list[torch.Tensor]] = [[] for _ in range(n)]
        if short:
            pick = [voices[i] for i in short]
            done = unmask(self.lm, self.items([texts[i] for i in short], language, instruct, [frames[i] for i in short], denoise, pick), settings, on_step)
            for i, c in zip(short, done, strict=True):
                codes[i] = [c]
        if long:
            chunked = self._chunked(long, texts, frames, rates, voices, settings, language, instruct, denoise, chunking, on_step)
            for i, chunks in zip(long, chunked, strict=True):
                codes[i] = chunks
        out = []
        for i in range(n):
            pieces = [self.decode(c) for c in codes[i]]
            joined = audio.cross_fade_chunks(pieces, self.sample_rate) if len(pieces) > 1 else pieces[0]
            out.append(self.finish(joined, None if voices[i] is None else voices[i].rms, output))
        return out

    def chunks_of(self, text: str, frames: int, chunking: Chunking) -> list[str]:
        """The chunks a long text of `frames` target frames is spoken in (upstream's characters per chunk)."""
        per_char = frames / len(text)
        return chunk_text(text, int(chunking.audio_chunk_duration * self.frame_rate / per_char), 3)

    def is_long(self, frames: int, chunking: Chunking) -> bool:
        """Whether a text of `frames` target frames is spoken in chunks."""
        return frames > int(chunking.audio_chunk_threshold * self.frame_rate)

    @torch.inference_mode()
    def stream(
        self,
        text: str,
        settings: Settings,
        output: Output,
        duration: float | None = None,
        speed: float | None = None,
        language: str | None = None,
        instruct: str | None = None,
        voice: VoicePrompt | None = None,
        denoise: bool = True,
        chunking: Chunking | None = None,
        on_step: Callable[[int], None] | None = None,
    ) -> Iterator[tuple[np.ndarray, int]]:
        """One text as (samples, frames) per text chunk, each as soon as it is made: the tokens of
        `generate([text])` (the same draws in the same order), but each chunk decoded and
        post-processed on its own (its own level, fades and padding) instead of joined first. A
        text under the chunking threshold is one piece, `generate`'s samples."""
        chunking = chunking or Chunking()
        frames = self.frames_for(text, duration, speed, voice)
        if not self.is_long(frames, chunking):
            (wave,) = self.generate([text], settings, output, [duration], [speed], language, instruct, [voice], denoise, chunking, on_step)
            yield wave, frames
            return
        rate = self.frames_for(text, None, None, voice) / frames if duration is not None else (speed or 1.0)
        reference = voice
        for k, chunk in enumerate(self.chunks_of(text, frames, chunking)):
            n = self.frames_for(chunk, None, rate, reference)
            (codes,) = unmask(self.lm, self.items([chunk], language, instruct, [n], denoise, [reference]), settings, on_step)
            if voice is None and k == 0:
                reference = VoicePrompt(codes, chunk, 0.0)  # the first chunk is the rest's reference
            yield self.finish(self.decode(codes), None if voice is None else voice.rms, output), n

    def _chunked(self, rows, texts, frames, rates, voices, settings, language, instruct, denoise, chunking, on_step=None) -> list[list[torch.Tensor]]:
        """Codes of each long text's chunks. With references, chunk k of every text in one batch, k
        in order; without, every text's first chunk, then the rest with that chunk as their reference."""
        if len({voices[i] is None for i in rows}) > 1:
            raise ValueError("long texts in one call must all have a reference or all have none (upstream's rule for chunked generation)")
        pieces = [self.chunks_of(texts[i], frames[i], chunking) for i in rows]
        results: list[list[torch.Tensor]] = [[] for _ in rows]

        def run(which: list[int], chunk: list[str], refs: list[VoicePrompt | None]) -> None:
            sizes = [self.frames_for(t, None, rates[rows[j]], v) for j, t, v in zip(which, chunk, refs, strict=True)]
            for j, c in zip(which, unmask(self.lm, self.items(chunk, language, instruct, sizes, denoise, refs), settings, on_step), strict=True):
                results[j].append(c)

        if voices[rows[0]] is not None:
            for k in range(max(len(p) for p in pieces)):
                which = [j for j, p in enumerate(pieces) if k < len(p)]
                run(which, [pieces[j][k] for j in which], [voices[rows[j]] for j in which])
            return results
        which = [j for j, p in enumerate(pieces) if p]
        run(which, [pieces[j][0] for j in which], [None] * len(which))
        firsts = {j: VoicePrompt(results[j][0], pieces[j][0], 0.0) for j in which}
        for k in range(1, max(len(p) for p in pieces)):
            which = [j for j, p in enumerate(pieces) if k < len(p)]
            run(which, [pieces[j][k] for j in which], [firsts[j] for j in which])
        return results
