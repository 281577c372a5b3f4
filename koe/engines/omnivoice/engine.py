"""The OmniVoice engine: text (+ a voice: the model's own, a design, or a clone prompt) -> the
iterative unmasking of 8 audio codebooks -> the HiggsAudio-v2 decoder -> post-processing -> audio.

One request is one upstream `generate` call (`koe.engines.omnivoice.synthesis`): a request with
`seed=N` gives upstream's samples after `torch.manual_seed(N)` (the sampler draws from torch's
global generator, as upstream's does). Texts longer than `audio_chunk_threshold` seconds are
spoken in chunks as upstream chunks them; the pipeline never segments a text shorter than
`MAX_SEGMENT_CHARS`, so it does not split what upstream would speak whole.

Streaming sends each text chunk as soon as it is made (a text under the threshold is one piece):
the same tokens as one-shot, but each chunk post-processed on its own, where one-shot joins the
chunks first and post-processes the whole, as upstream does (`Capabilities.stream_is_one_shot` is
False; for a text spoken in one chunk the samples are the same).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from koe.engines.base import (
    Capabilities,
    InvalidOption,
    RequestError,
    SynthesisRequest,
    UnsupportedLanguage,
    UnsupportedVoice,
    VoicePromptMismatch,
    VoiceReference,
)
from koe.engines.engine import BaseEngine, Checked, reference_frames
from koe.engines.omnivoice import spec
from koe.engines.omnivoice.design import InvalidInstruction, resolve_instruct
from koe.engines.omnivoice.generate import Settings
from koe.engines.omnivoice.languages import UnknownLanguage, resolve_language
from koe.engines.omnivoice.reference import ReferenceError
from koe.engines.omnivoice.synthesis import Chunking, OmniVoiceModel, Output
from koe.engines.omnivoice.voice import MAX_REFERENCE_S, OmniVoiceVoice, OmniVoiceVoiceError
from koe.engines.pipeline import Piece, PipelineDefaults, Segment, steps_for
from koe.runtime.device import resolve_device
from koe.runtime.precision import check as check_precision
from koe.runtime.precision import float_dtype

__all__ = ["Call", "OmniVoiceEngine"]

MAX_SEGMENT_CHARS = 20000  # one request is one upstream call: OmniVoice chunks long texts itself
SAMPLER = ("num_step", "guidance_scale", "t_shift", "layer_penalty_factor", "position_temperature", "class_temperature")
OUTPUT = ("postprocess_output", "pad_duration", "fade_duration")
CHUNKING = ("audio_chunk_duration", "audio_chunk_threshold")


@dataclass(frozen=True)
class Call:
    """A request's OmniVoice options in the form the core takes (upstream's defaults filled in)."""

    settings: Settings
    output: Output
    chunking: Chunking
    duration: float | None
    speed: float
    denoise: bool

    @classmethod
    def of(cls, values: dict[str, Any]) -> Call:
        v = {**spec.DEFAULTS, **values}
        return cls(
            Settings(**{k: v[k] for k in SAMPLER}),
            Output(**{k: v[k] for k in OUTPUT}),
            Chunking(**{k: v[k] for k in CHUNKING}),
            v["duration"],
            float(v["speed"]),
            bool(v["denoise"]),
        )


class OmniVoiceEngine(BaseEngine):
    """A loaded OmniVoice model (LM + audio tokenizer + text tokenizer). Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = spec.SPEC.title
    voice_type, voice_error = OmniVoiceVoice, OmniVoiceVoiceError
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.25, first_chunk_s=0.5, chunk_s=1.0)

    def __init__(self, folder: Path, model: OmniVoiceModel, device: torch.device) -> None:
        self.folder, self.model, self.device = folder, model, device

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> OmniVoiceEngine:
        """Load a release folder (strict: a missing file or tensor is an error naming it), in
        float32 (upstream's bits on the CPU), or with `precision="bf16"` (or a bfloat16 `dtype`) the
        LM in bfloat16 (opt-in, faster where the CPU multiplies bf16 natively; changes bits; the
        audio tokenizer stays float32)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        mode = check_precision(precision, spec.PRECISIONS, "OmniVoice")  # before any file is read
        if mode is not None:
            lm_dtype = torch.bfloat16 if mode == "bf16" else torch.float32
        else:
            lm_dtype = float_dtype(dtype, (torch.float32, torch.bfloat16), "OmniVoice")
        missing = [f for f in spec.REQUIRED_FILES if not (folder / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{folder}: missing {', '.join(missing)} (an OmniVoice release folder has them: koe models pull {spec.REPO})")
        dev = resolve_device(device)
        model = OmniVoiceModel.load(folder, device=dev, dtype=lm_dtype)
        if model.text.tokenizer.get_vocab_size() > model.lm.config.llm.vocab_size:
            raise ValueError(
                f"{folder}: the text tokenizer has {model.text.tokenizer.get_vocab_size()} ids, the model's embedding {model.lm.config.llm.vocab_size}"
            )
        return cls(folder, model, dev)

    def release(self) -> None:
        """Drop the weights (`close`: the engine is unusable after)."""
        self.model = None

    # -- what the model offers -------------------------------------------------------------
    sample_rate = spec.SAMPLE_RATE

    @property
    def precision(self) -> str:
        """The LM's dtype ("float32" = exact; "bfloat16" opt-in)."""
        return str(self.model.lm.audio_heads.weight.dtype).removeprefix("torch.")

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities()

    # -- voices ------------------------------------------------------------------------------
    def _clip(self, audio: Any, trim: bool) -> tuple[np.ndarray, int]:
        """A clip (path, bytes, file object, or (samples, rate)) as float32 (channels, n) and its rate."""
        frames, rate = reference_frames(audio, title="OmniVoice", min_s=spec.MIN_REFERENCE_S, max_s=MAX_REFERENCE_S, trim=trim)
        wave = frames[None, :] if frames.ndim == 1 else frames.T
        return np.ascontiguousarray(wave, dtype=np.float32), rate

    def build_voice(self, reference: VoiceReference, preprocess_prompt: bool = True) -> OmniVoiceVoice:
        """A voice prompt from a clip and its transcript, as upstream's `create_voice_clone_prompt`
        makes it (`preprocess_prompt`: pauses cut, closing punctuation). A clip without its
        transcript is refused: upstream would transcribe it with Whisper, which koe does not run."""
        if reference.text is None or not str(reference.text).strip():
            raise UnsupportedVoice(
                "OmniVoice clones from a clip and its transcript: pass the exact words spoken in the clip "
                "(ref_text / --ref-text; upstream would transcribe it with Whisper, which koe does not run)"
            )
        wave, rate = self._clip(reference.audio, reference.trim)
        try:
            prompt = self.model.prompt((wave, rate), reference.text, preprocess_prompt)
        except ReferenceError as e:
            raise UnsupportedVoice(str(e)) from e
        info = {"ref_seconds": round(wave.shape[-1] / rate, 3), "prompt_seconds": round(prompt.codes.shape[-1] / spec.FRAME_RATE, 3)}
        if not preprocess_prompt:
            info["preprocess_prompt"] = False
        return OmniVoiceVoice(prompt.codes.cpu(), prompt.text, prompt.rms, info)

    def check_prompt(self, voice: OmniVoiceVoice) -> OmniVoiceVoice:
        """A prompt fits when its codes are this model's: as many codebooks, entries in range."""
        cfg = self.model.lm.config
        books, size = cfg.num_audio_codebook, self.model.codec.config.codebook_size
        if voice.codes.dim() != 2 or voice.codes.shape[0] != books or int(voice.codes.max()) >= size or int(voice.codes.min()) < 0:
            raise VoicePromptMismatch(
                f"this voice prompt holds codes of another audio tokenizer (shape {tuple(voice.codes.shape)}); this model has {books} codebooks "
                f"of {size} entries: prepare the voice again with it"
            )
        return voice

    # -- requests ------------------------------------------------------------------------------
    def check_language(self, language: str | None) -> str | None:
        """The language's code as the prompt carries it (None: none, or "auto"); a name in any case or a code."""
        if language is None or str(language).strip().lower() in ("auto", ""):
            return None
        try:
            return resolve_language(str(language).strip())
        except UnknownLanguage as e:
            raise UnsupportedLanguage(str(e)) from e

    def call(self, options: dict | None) -> Call:
        """The options checked (ranges from the schema), upstream's defaults filled in."""
        values = self.capabilities.options.validate(options)
        if values.get("normalize_text"):
            raise InvalidOption(
                "normalize_text=true: upstream's text normaliser is not supported by koe yet; write numbers and dates out in words",
                param="normalize_text",
            )
        return Call.of(values)

    def check_options(self, request: SynthesisRequest, checked: Checked) -> Checked:
        call = self.call(request.options)
        try:
            resolve_instruct(checked.instruct, request.text)
        except InvalidInstruction as e:
            raise RequestError(str(e), param="instructions") from e
        frames = self.model.frames_for(request.text, call.duration, call.speed, checked.voice)
        if frames > spec.MAX_DURATION_S * spec.FRAME_RATE:
            raise InvalidOption(
                f"speed={call.speed:g} makes this text {frames / spec.FRAME_RATE:.0f} s long; OmniVoice speaks at most {spec.MAX_DURATION_S:g} s per request: raise speed",
                param="speed",
            )
        return Checked(checked.voice, checked.language, checked.instruct, call, checked.cancel, checked.user_cap)

    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        call: Call = c.settings
        voice = c.voice
        duration, truncated = call.duration, False
        frames = self.model.frames_for(segment.text, duration, call.speed, voice)
        if c.user_cap:  # the request's own cap: the text spoken in that many seconds, as upstream's duration
            cap = steps_for(segment.budget_s, spec.FRAME_RATE)
            if frames > cap:
                duration, frames, truncated = (cap + 0.5) / spec.FRAME_RATE, cap, True
        if segment.seed is not None:
            torch.manual_seed(int(segment.seed))
        cancel = c.cancel
        on_step = None if cancel is None else (lambda _step: cancel.raise_if_cancelled())
        mode = "clone" if voice is not None else ("design" if c.instruct else "own voice")
        chunked = self.model.is_long(frames, call.chunking)
        info = {"mode": mode, "seconds": frames / spec.FRAME_RATE, "chunked": chunked, "num_step": call.settings.num_step}
        args = (call.settings, call.output)
        kw = {"language": c.language, "instruct": c.instruct, "denoise": call.denoise, "chunking": call.chunking, "on_step": on_step}
        if not segment.streamed:
            (wave,) = self.model.generate([segment.text], *args, durations=[duration], speeds=[call.speed], voices=[voice], **kw)
            yield Piece(wave, frames, last=True, truncated=truncated, info=info)
            return
        made = 0
        for wave, n in self.model.stream(segment.text, *args, duration=duration, speed=call.speed, voice=voice, **kw):
            made = min(frames, made + n)
            yield Piece(wave, made)
            if cancel is not None:
                cancel.raise_if_cancelled()
        yield Piece(np.zeros(0, np.float32), frames, last=True, truncated=truncated, info=info)

    def result_metadata(self) -> dict:
        return {"model": spec.VARIANT, "precision": self.precision, "device": str(self.device)}


def speak_texts(
    engine: OmniVoiceEngine,
    texts: list[str],
    *,
    voices: list[Any],
    language: str | None,
    instruct: str | None,
    seed: int | None,
    durations: list[float | None],
    speeds: list[float | None],
    options: dict[str, Any],
    cancel=None,
) -> list[np.ndarray]:
    """Texts as one upstream `generate(text=[...])` call: the short ones in one batch, the long ones
    in chunks after them, each in its voice (None: the model's own, or `instruct`'s design).
    Every text is checked as a request of its own first (voice, language, instruction, options)."""
    checks = []
    for text, voice, d, s in zip(texts, voices, durations, speeds, strict=True):
        extra = {k: v for k, v in (("duration", d), ("speed", s)) if v is not None}
        request = SynthesisRequest(text=text, language=language, voice=voice, instruct=instruct, seed=seed, cancel=cancel, options={**options, **extra})
        checks.append(engine.check_request(request))
    first: Call = checks[0].settings
    on_step = None if cancel is None else (lambda _step: cancel.raise_if_cancelled())
    long = [
        engine.model.is_long(engine.model.frames_for(t, c.settings.duration, c.settings.speed, c.voice), first.chunking)
        for t, c in zip(texts, checks, strict=True)
    ]
    if len({c.voice is None for c, is_long in zip(checks, long, strict=True) if is_long}) > 1:
        raise UnsupportedVoice(
            "long texts (spoken in chunks) in one batch must all have a voice prompt or all have none, as upstream's chunked generation needs"
        )
    if seed is not None:
        torch.manual_seed(int(seed))
    return engine.model.generate(
        texts,
        first.settings,
        first.output,
        durations=[c.settings.duration for c in checks],
        speeds=[c.settings.speed for c in checks],
        language=checks[0].language,
        instruct=checks[0].instruct,
        voices=[c.voice for c in checks],
        denoise=first.denoise,
        chunking=first.chunking,
        on_step=on_step,
    )
