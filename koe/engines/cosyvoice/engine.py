"""The CosyVoice engine: text (+ a cloned voice, an instruction, or a saved speaker) -> upstream's
front end (normalised, split into pieces) -> the LM's speech tokens -> flow -> HiFT -> 24 kHz audio.

One request is one upstream `inference_*` call (`koe.engines.cosyvoice.model`): a request with
`seed=N` gives upstream's samples after `torch.manual_seed(N)` (the draws come from torch's global
generator, as upstream's do); the pipeline never segments a text under `MAX_SEGMENT_CHARS`, and
upstream's own splitting makes the pieces, each spoken after the last without a reseed.

Which upstream call a request is:
- a cloned voice with its transcript: `inference_zero_shot`; without one: `inference_cross_lingual`;
- an instruction with a cloned voice: `inference_instruct2` (the transcript is not used);
- a saved speaker (`spk2info.pt`): what upstream saved for it (`inference_zero_shot` with its
  `zero_shot_spk_id`, or an SFT release's `inference_sft`);
- CosyVoice 3 needs a system prompt ending in `<|endofprompt|>`: where the request has none, koe puts
  upstream's own, "You are a helpful assistant.<|endofprompt|>", in front of the transcript
  (zero-shot), each text piece (cross-lingual) or the instruction (instruct), as upstream's examples
  write it; CosyVoice 2's instruction gets the `<|endofprompt|>` it ends with.

Streaming (`stream=True`) runs upstream's streamed mode: the flow's chunk-causal attention and the
hop that grows from 25 tokens to 50 and 100, starting at 25 for every request and carried from one
text piece to the next (upstream's grows across requests on one model object; the drop-in keeps
that), so streamed audio is not the one-shot audio (`Capabilities.stream_is_one_shot` is False). Text that arrives in pieces goes to the LM as it
comes (`synthesize_text`: upstream's streamed-text decoding). Voice conversion (`convert`): the
source's speech tokens spoken in the voice by the flow and the vocoder.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from koe.engines.base import (
    AudioChunk,
    Capabilities,
    ConversionRequest,
    EmptyText,
    InvalidOption,
    RequestError,
    SynthesisRequest,
    UnsupportedVoice,
    VoicePromptMismatch,
    VoiceReference,
)
from koe.engines.cosyvoice import spec
from koe.engines.cosyvoice.features import ClipError
from koe.engines.cosyvoice.llm import StreamedTextError
from koe.engines.cosyvoice.model import CosyVoiceModel
from koe.engines.cosyvoice.token2wav import TOKEN_HOP
from koe.engines.cosyvoice.voice import CosyVoiceVoice, CosyVoiceVoiceError
from koe.engines.engine import BaseEngine, Checked, reference_frames
from koe.engines.pipeline import Piece, PipelineDefaults, Segment, steps_for
from koe.runtime.device import resolve_device
from koe.runtime.precision import check as check_precision

__all__ = ["SYSTEM_PROMPT", "CosyVoiceEngine"]

MAX_SEGMENT_CHARS = 20000  # one request is one upstream call: upstream splits the text itself
SYSTEM_PROMPT = "You are a helpful assistant."
ENDOFPROMPT = "<|endofprompt|>"


@dataclass
class _Run:
    """One request's speech tokens so far, against its cap (the runaway guard's, or `max_tokens` when lower)."""

    cap: int
    tokens: int = 0
    truncated: bool = False

    @classmethod
    def of(cls, cap: int, c: Checked) -> _Run:
        wanted = c.settings.get("max_tokens")
        return cls(cap if wanted is None else min(cap, int(wanted)))


class CosyVoiceEngine(BaseEngine):
    """A loaded CosyVoice 2 or 3 release. Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = "CosyVoice"
    voice_type, voice_error = CosyVoiceVoice, CosyVoiceVoiceError
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.0, first_chunk_s=1.0, chunk_s=2.0)
    sample_rate = spec.SAMPLE_RATE

    def __init__(self, folder: Path, model: CosyVoiceModel, device: torch.device) -> None:
        self.folder, self.model, self.device = folder, model, device
        self.kernel = getattr(model.lm, "kernel", None)

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> CosyVoiceEngine:
        """Load a release folder strictly (a missing file or tensor is an error naming it), on the
        CPU, in float32 (upstream's bits) or with `precision` one of the LM's opt-in modes (bf16,
        int8, int4: the LM only; the flow, vocoder and front end stay float32)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        mode = check_precision(precision, spec.PRECISIONS, "CosyVoice")
        if mode is None and dtype is not None and dtype not in ("float32", torch.float32):
            raise ValueError(f"CosyVoice loads in float32 (dtype={dtype!r}); ask for a faster LM with precision= (bf16, int8, int4)")
        dev = resolve_device(device)
        if dev.type != "cpu":
            raise ValueError(f"CosyVoice runs on the CPU in this version of koe (device={dev})")
        version = spec.version_of(folder)
        if version is None:
            raise FileNotFoundError(f"{folder}: not a CosyVoice 2/3 folder (exactly one of cosyvoice2.yaml, cosyvoice3.yaml)")
        missing = [f for f in spec.required_files(version) if not (folder / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{folder}: missing {', '.join(missing)} (a CosyVoice release folder has them: koe models pull {spec.REPOS[version]})")
        return cls(folder, CosyVoiceModel.load(folder, precision=None if mode == "fp32" else mode), dev)

    def release(self) -> None:
        self.model = None

    # -- what the model offers -------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.model.version

    @property
    def precision(self) -> str:
        return str(getattr(self.model.lm, "precision", "float32"))

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities(self.version, tuple(self.model.speakers))

    # -- voices ------------------------------------------------------------------------------------
    def build_voice(self, reference: VoiceReference) -> CosyVoiceVoice:
        """A voice prompt from a clip (and its transcript, for zero-shot cloning; without one the
        voice clones cross-lingually), its features as upstream's front end makes them."""
        frames, rate = reference_frames(reference.audio, title="CosyVoice", min_s=spec.MIN_REFERENCE_S, max_s=spec.MAX_REFERENCE_S, trim=reference.trim)
        try:
            prompt = self.model.inputs.prompt(frames, rate, trim=False)
        except ClipError as e:
            raise UnsupportedVoice(f"the voice clip cannot be used: {e}") from e
        text = None if reference.text is None or not str(reference.text).strip() else str(reference.text)
        info = {"ref_seconds": round(frames.shape[0] / rate, 3), "tokens": int(prompt.speech_token.shape[1])}
        return CosyVoiceVoice(prompt, text, self.version, info)

    def check_prompt(self, voice: CosyVoiceVoice) -> CosyVoiceVoice:
        if voice.version != self.version:
            raise VoicePromptMismatch(
                f"this voice prompt was made by a CosyVoice {voice.version} model; this is CosyVoice {self.version} "
                "(their speech tokenizers and mels differ): prepare the voice again with it"
            )
        if int(voice.prompt.speech_token.max()) >= self.model.config.lm.speech_token_size:
            raise VoicePromptMismatch("this voice prompt holds speech tokens past this model's vocabulary: prepare the voice again with it")
        return voice

    # -- requests ----------------------------------------------------------------------------------
    def check_options(self, request: SynthesisRequest, checked: Checked) -> Checked:
        values = {**spec.DEFAULTS, **self.capabilities.options.validate(request.options)}
        if request.streamed and values["speed"] != 1.0:
            raise InvalidOption(
                f"speed={values['speed']:g} changes one-shot speech only (upstream stretches the whole mel): stream at speed 1, or ask for one-shot audio",
                param="speed",
            )
        if checked.voice is None:
            raise UnsupportedVoice(self._no_voice())
        return Checked(checked.voice, checked.language, checked.instruct, values, checked.cancel, checked.user_cap)

    def _no_voice(self) -> str:
        speakers = list(self.model.speakers)
        saved = f", or choose one of its saved speakers {speakers}" if speakers else ""
        return f"CosyVoice speaks in a cloned voice: pass a voice prepared from a clip (--ref clip.wav, with --ref-text for zero-shot){saved}"

    def _instruction(self, instruct: str) -> str:
        if ENDOFPROMPT in instruct:
            return instruct
        return f"{SYSTEM_PROMPT} {instruct}{ENDOFPROMPT}" if self.version == 3 else f"{instruct}{ENDOFPROMPT}"

    def inputs_for(self, piece: str | Iterable[str], c: Checked) -> dict:
        """Upstream's model inputs for one text piece (or streamed text) of a checked request."""
        front, voice, frontend = self.model.inputs, c.voice, c.settings["text_frontend"]
        streamed = not isinstance(piece, str)
        if isinstance(voice, str):
            saved = self.model.speakers[self._speaker_name(voice)]
            if "llm_embedding" not in saved and "embedding" in saved:  # an SFT release's speaker
                saved = {"llm_embedding": saved["embedding"], "flow_embedding": saved["embedding"]}
            ids, ids_len = front.text_token(piece)
            inputs = {**saved, "text": ids, "text_len": ids_len}
            if c.instruct:
                inputs["prompt_text"], inputs["prompt_text_len"] = front.text_token(self._instruction(c.instruct))
                inputs.pop("llm_prompt_speech_token", None), inputs.pop("llm_prompt_speech_token_len", None)
            return inputs
        prompt = front.trimmed(voice.prompt)
        if c.instruct:
            return front.instruct(piece, self._instruction(c.instruct), prompt)
        if voice.text is not None:
            text = voice.text
            if self.version == 3 and ENDOFPROMPT not in text and (streamed or ENDOFPROMPT not in piece):
                text = SYSTEM_PROMPT + ENDOFPROMPT + text
            return front.zero_shot(piece, self.model.text.normalize(text, split=False, text_frontend=frontend), prompt)
        if self.version == 3 and not streamed and ENDOFPROMPT not in piece:
            piece = SYSTEM_PROMPT + ENDOFPROMPT + piece
        if self.version == 3 and streamed:
            raise UnsupportedVoice("CosyVoice 3 takes streamed text with a voice that has its transcript (or an instruction): its system prompt goes there")
        return front.cross_lingual(piece, prompt)

    def _speaker_name(self, name: str) -> str:
        for known in self.model.speakers:
            if known.lower() == name.lower():
                return known
        raise UnsupportedVoice(f"unknown speaker {name!r}; supported: {list(self.model.speakers)}")

    def _tokens(self, inputs: dict, run: _Run, cancel) -> Iterator[int]:
        """The LM's tokens (or the source's) while the run's cap allows (`run.truncated` set when it cuts)."""
        made = self.model.tokens(inputs)
        try:
            for token in made:
                if run.tokens >= run.cap:
                    run.truncated = True
                    return
                if cancel is not None:
                    cancel.raise_if_cancelled()
                run.tokens += 1
                yield token
        except StreamedTextError as e:
            raise RequestError(f"CosyVoice's LM could not take the streamed text: {e}") from e
        finally:
            made.close()

    def _speak(self, calls: Iterable[dict], c: Checked, run: _Run, streamed: bool) -> Iterator[np.ndarray]:
        """The samples of each chunk of upstream's calls (their input dicts), one call after another."""
        hop = TOKEN_HOP
        for inputs in calls:
            tokens = self._tokens(inputs, run, c.cancel)
            if streamed:
                schedule = self.model.schedule(inputs, hop)  # a call's stream starts at the hop the one before grew to, as upstream's
                for wave in self.model.stream(tokens, inputs, schedule):
                    yield wave[0].numpy()
                hop = schedule.hop
            else:
                yield self.model.offline(list(tokens), inputs, float(c.settings["speed"]))[0].numpy()
            if run.truncated:
                return

    def _pieces(self, text: str, c: Checked) -> list[str]:
        pieces = self.model.pieces(text, c.settings["text_frontend"])
        if not pieces:
            raise EmptyText("the text holds nothing to speak (only punctuation or symbols)")
        return pieces

    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        pieces = self._pieces(segment.text, c)
        run = _Run.of(steps_for(segment.budget_s, spec.TOKEN_RATE), c)
        if segment.seed is not None:
            torch.manual_seed(int(segment.seed))
        for wave in self._speak((self.inputs_for(p, c) for p in pieces), c, run, segment.streamed):
            yield Piece(wave, run.tokens)
        info = {"mode": self._mode(c), "pieces": len(pieces), "tokens": run.tokens, "seconds": run.tokens / spec.TOKEN_RATE}
        yield Piece(np.zeros(0, np.float32), run.tokens, last=True, truncated=run.truncated, info=info)

    def _mode(self, c: Checked) -> str:
        if isinstance(c.voice, str):
            return "saved speaker"
        if c.instruct:
            return "instruct"
        return "zero-shot" if c.voice.text is not None else "cross-lingual"

    # -- streamed text -------------------------------------------------------------------------------
    def synthesize_text(self, pieces: Iterable[str], request: SynthesisRequest) -> Iterator[AudioChunk]:
        """Text arriving in pieces, fed to the LM as it comes (upstream's streamed-text decoding:
        the text's ids interleaved with speech tokens), not normalised (as upstream leaves a
        generator's text); audio streamed when `request.stream`, else one chunk at the end."""
        c = self.check_request(replace(request, text="streamed text"))
        run = _Run.of(steps_for(request.max_segment_s if request.max_segment_s is not None else spec.MAX_SPEECH_S, spec.TOKEN_RATE), c)
        if request.seed is not None:
            torch.manual_seed(int(request.seed))
        waves = self._speak([self.inputs_for(iter(pieces), c)], c, run, request.streamed)
        return self._chunks(waves, request, run, {"mode": self._mode(c), "text_stream": True})

    # -- voice conversion ------------------------------------------------------------------------------
    def convert(self, request: ConversionRequest) -> Iterator[AudioChunk]:
        """The source speech in the voice: the source's speech tokens through the flow (prompted by
        the voice's features, untrimmed as upstream's conversion keeps them) and the vocoder."""
        voice = self.check_voice(request.voice)
        if not isinstance(voice, CosyVoiceVoice):
            raise UnsupportedVoice("CosyVoice converts into a voice cloned from a clip, not a saved speaker")
        values = {**spec.DEFAULTS, **self.capabilities.options.validate(request.options)}
        samples, rate = request.source
        seconds = len(samples) / rate
        if seconds > spec.MAX_REFERENCE_S:
            raise RequestError(
                f"the source speech is {seconds:.1f} s long; CosyVoice's speech tokenizer takes at most {spec.MAX_REFERENCE_S:g} s", param="source"
            )
        try:
            inputs = self.model.inputs.convert(samples, rate, voice.prompt)
        except ClipError as e:
            raise RequestError(f"the source speech cannot be used: {e}", param="source") from e
        if inputs["source_speech_token"].shape[1] == 0:
            raise RequestError("the source speech is too short to convert (no speech tokens)", param="source")
        if request.seed is not None:
            torch.manual_seed(int(request.seed))
        c = Checked(voice, None, None, values, request.cancel, False)
        run = _Run.of(inputs["source_speech_token"].shape[1], c)
        waves = self._speak([inputs], c, run, request.streamed)
        return self._chunks(waves, request, run, {"mode": "conversion", "source_seconds": round(seconds, 3)})

    def _chunks(self, waves: Iterator[np.ndarray], request, run: _Run, info: dict) -> Iterator[AudioChunk]:
        """Audio chunks of `waves`, the final one (no samples) carrying the metadata."""
        offset = 0
        for wave in waves:
            if request.cancel is not None:
                request.cancel.raise_if_cancelled()
            if len(wave):
                yield AudioChunk(wave, self.sample_rate, offset, False, {})
                offset += len(wave)
        meta = {**self.result_metadata(), **info, "seed": request.seed, "frames": run.tokens, "truncated": run.truncated}
        yield AudioChunk(np.zeros(0, np.float32), self.sample_rate, offset, True, meta)

    def result_metadata(self) -> dict:
        return {"model": spec.VARIANTS[self.version], "precision": self.precision, "device": str(self.device)}
