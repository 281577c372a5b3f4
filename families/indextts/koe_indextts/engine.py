"""The IndexTTS engine: text + a cloned voice -> upstream's front end (normalised, tokenised, cut
into segments) -> per segment the GPT's beam-sampled mel codes, its latent, BigVGAN -> 24 kHz audio.

One request is one upstream `IndexTTS.infer` call (`koe_indextts.model`): a request with `seed=N`
gives upstream's samples after `torch.manual_seed(N)`; the pipeline never cuts a text under
`MAX_SEGMENT_CHARS`, upstream's own segmenting makes the pieces, spoken one after another without a
reseed. Audio is upstream's 16-bit-scale wave divided back by 32767 (the float its file writer
stores as PCM16). Streaming yields one chunk per text segment.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from koe.audio.decode import MAX_CLIP_SECONDS
from koe.engines.base import (
    Capabilities,
    EmptyText,
    InvalidOption,
    RequestError,
    SynthesisRequest,
    UnsupportedVoice,
    VoicePromptMismatch,
    VoiceReference,
)
from koe.engines.engine import BaseEngine, Checked, reference_frames
from koe.engines.pipeline import Piece, PipelineDefaults, Segment, steps_for
from koe.engines.spec import SpecError
from koe.runtime.device import resolve_device
from koe_indextts import spec
from koe_indextts.beam import Sampling
from koe_indextts.mel import log_mel, reference_audio
from koe_indextts.model import IndexTTS15, Voice
from koe_indextts.text import TextNormalizer
from koe_indextts.text_tokenizer import BpeModelError, TextError, TextTokenizer
from koe_indextts.voice import IndexTTSVoice, IndexTTSVoiceError

__all__ = ["IndexTTSEngine", "sampling_of", "segment_ids"]

MAX_SEGMENT_CHARS = 20000  # one request is one upstream call: upstream segments the text itself
PCM16_MAX = 32767.0


def sampling_of(settings: dict) -> Sampling:
    """The code search's settings from a request's checked options."""
    s = settings
    return Sampling(
        do_sample=bool(s["do_sample"]),
        top_k=int(s["top_k"]),
        top_p=float(s["top_p"]),
        temperature=float(s["temperature"]),
        num_beams=int(s["num_beams"]),
        repetition_penalty=float(s["repetition_penalty"]),
        length_penalty=float(s["length_penalty"]),
        max_mel_tokens=int(s["max_mel_tokens"]),
    )


def segment_ids(tokenizer: TextTokenizer, text: str, settings: dict, most: int) -> list[torch.Tensor]:
    """Upstream's text segments of a request as ids; clear errors for text with nothing to speak
    and for a segment longer than the GPT's `most` text positions."""
    try:
        segments = tokenizer.segments(text, int(settings["max_text_tokens_per_segment"]))
    except TextError as e:
        raise RequestError(str(e), param="input") from e
    if not segments or not any(ch.isalnum() for ids in segments for piece in tokenizer.pieces(ids) for ch in piece):
        raise EmptyText(f"the text holds nothing to speak (only punctuation or symbols): {text[:40]!r}")
    longest = max(len(ids) for ids in segments)
    if longest > most:
        raise InvalidOption(
            f"max_text_tokens_per_segment={settings['max_text_tokens_per_segment']}: a segment of {longest} text tokens is more "
            f"than this model's GPT takes ({most}); give at most {most}",
            param="max_text_tokens_per_segment",
        )
    return [torch.tensor(ids, dtype=torch.int32) for ids in segments]


class IndexTTSBase(BaseEngine):
    """What both releases' engines share: the family's names, float32 on the CPU, the capabilities
    of the loaded release, the options checked against the GPT's mel positions, the metadata."""

    family = spec.FAMILY
    title = "IndexTTS"
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.0)
    defaults: dict = {}  # the release's option defaults

    @property
    def precision(self) -> str:
        return "float32"

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities(self.model.release.variant)

    def check_options(self, request: SynthesisRequest, checked: Checked) -> Checked:
        given = self.capabilities.options.validate(request.options)
        values = {**self.defaults, **given}
        most = self.model.lm.cfg.max_mel_tokens  # the GPT's mel positions (800 in 1.5, above its default 600)
        if "max_mel_tokens" not in given:
            values["max_mel_tokens"] = min(values["max_mel_tokens"], most)
        elif values["max_mel_tokens"] > most:
            raise InvalidOption(
                f"max_mel_tokens={values['max_mel_tokens']}: this model's GPT has positions for at most {most} mel codes a segment", param="max_mel_tokens"
            )
        if checked.voice is None:
            raise UnsupportedVoice("IndexTTS speaks in a cloned voice: pass a voice prepared from a clip (--ref clip.wav)")
        return replace(checked, settings=values)

    def result_metadata(self) -> dict:
        return {"model": self.model.release.variant, "precision": self.precision, "device": str(self.device)}


class IndexTTSEngine(IndexTTSBase):
    """A loaded IndexTTS 1.5 release (`load` gives an `IndexTTS2Engine` for a release 2 folder, an
    `IndexTTS25Engine` for a release 2.5 one). Not re-entrant: one call at a time."""

    voice_type, voice_error = IndexTTSVoice, IndexTTSVoiceError
    sample_rate = spec.SAMPLE_RATE
    defaults = spec.DEFAULTS

    def __init__(self, folder: Path, model: IndexTTS15, text: TextTokenizer, device: torch.device) -> None:
        self.folder, self.model, self.text, self.device = folder, model, text, device
        self._voice_cache: tuple[IndexTTSVoice, Voice] | None = None

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> IndexTTSEngine:
        """Load a release folder (1.5; 2: an `IndexTTS2Engine`; 2.5: an `IndexTTS25Engine`) strictly, on
        the CPU, in float32 (upstream's bits)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        if precision not in (None, "fp32") or dtype not in (None, "float32", torch.float32):
            raise ValueError("IndexTTS runs in float32 (fp32) in this version of koe")
        dev = resolve_device(device)
        if dev.type != "cpu":
            raise ValueError(f"IndexTTS runs on the CPU in this version of koe (device={dev})")
        description = spec.SPEC.describe(folder)
        repo = {"2": spec.REPO_2, "2.5": spec.REPO_25}.get(description.info.size, spec.REPO_15)
        if description.missing:
            raise FileNotFoundError(f"{folder}: missing {', '.join(description.missing)} (a release folder has them: koe models pull {repo})")
        if description.info.size == "2.5":
            from koe_indextts.engine25 import IndexTTS25Engine

            return IndexTTS25Engine.load(folder, dev)
        if description.info.size == "2":
            from koe_indextts.engine2 import IndexTTS2Engine

            return IndexTTS2Engine.load(folder, dev)
        try:
            model = IndexTTS15.load(folder)
        except KeyError as e:  # a section the config has, without a setting its module needs
            raise SpecError(f"{folder / 'config.yaml'}: the setting {e.args[0]!r} is missing: a damaged file; pull the release again") from e
        try:
            text = TextTokenizer(folder / model.release.bpe_model, TextNormalizer())
        except BpeModelError as e:
            raise FileNotFoundError(str(e)) from e
        return cls(folder, model, text, dev)

    def release(self) -> None:
        self.model = None
        self._voice_cache = None

    # -- voices ------------------------------------------------------------------------------------
    def build_voice(self, reference: VoiceReference) -> IndexTTSVoice:
        """A voice prompt from a clip (its transcript, if given, is not needed): the reference log-mel.

        A clip over 50 s is refused unless `trim`, which keeps its first 50 s as upstream's
        `infer_fast` does: the whole clip resampled to 24 kHz, then cut (a clip is decoded up to
        koe's 600 s bound). A clip of zeros has no voice to clone and is refused."""
        limit = MAX_CLIP_SECONDS if reference.trim else spec.MAX_REFERENCE_S
        frames, rate = reference_frames(reference.audio, title="IndexTTS", min_s=spec.MIN_REFERENCE_S, max_s=limit, trim=reference.trim)
        if not np.any(frames):
            raise UnsupportedVoice("the voice clip is silent (every sample is zero): IndexTTS clones a voice from a clip of speech")
        clip = torch.from_numpy(np.ascontiguousarray(frames, dtype=np.float32))
        clip = clip[None] if clip.dim() == 1 else clip.t()  # (channels, frames), as torchaudio.load gives it
        mel = log_mel(reference_audio(clip, rate))  # at most 50 s at 24 kHz
        seconds = min(frames.shape[0] / rate, spec.MAX_REFERENCE_S)
        return IndexTTSVoice(mel, {"ref_seconds": round(seconds, 3), "frames": int(mel.shape[-1])})

    def check_prompt(self, voice: IndexTTSVoice) -> IndexTTSVoice:
        if voice.mel.shape[1] != 100:
            raise VoicePromptMismatch("this voice prompt is not an IndexTTS 1.5 reference mel: prepare the voice again")
        return voice

    def _conditioning(self, voice: IndexTTSVoice) -> Voice:
        if self._voice_cache is None or self._voice_cache[0] is not voice:
            self._voice_cache = (voice, self.model.voice(voice.mel))
        return self._voice_cache[1]

    # -- requests ----------------------------------------------------------------------------------
    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        s = c.settings
        cap = steps_for(segment.budget_s, spec.CODE_RATE)
        sampling = sampling_of(s)
        pieces = segment_ids(self.text, segment.text, c.settings, self.model.lm.cfg.max_text_tokens)
        voice = self._conditioning(c.voice)
        if segment.seed is not None:
            torch.manual_seed(int(segment.seed))
        codes_total, truncated = 0, False
        for ids in pieces:
            wav, codes = self.model.segment(ids, voice, sampling, c.cancel)
            ended = bool(len(codes)) and int(codes[-1]) == self.model.lm.cfg.stop_mel_token
            truncated = truncated or not ended
            codes_total += len(codes)
            yield Piece((wav[0] / PCM16_MAX).numpy(), codes_total)
            if c.cancel is not None:
                c.cancel.raise_if_cancelled()
            if codes_total >= cap:
                truncated = True
                break
        info = {"segments": len(pieces), "codes": codes_total, "seconds": round(codes_total / spec.CODE_RATE, 3)}
        yield Piece(np.zeros(0, np.float32), codes_total, last=True, truncated=truncated, info=info)
