"""The Fish Speech S2 engine: text (with speaker tags for dialogue) + a cloned voice or none ->
upstream's conversation prompt -> per batch of the text the dual-AR transformer's frames -> the
codec -> 44.1 kHz audio.

One request is one call of upstream's server engine (`TTSInferenceEngine.inference` with a
`ServeTTSRequest`): the reference clip's codes (mono, resampled to 44.1 kHz by torchaudio's
`Resample` transform, encoded), then, after `torch.manual_seed(seed)`, `generate_long`'s batches
one after another, each batch's codes fed back into the next batch's prompt and decoded on their
own. The pipeline never cuts a text under `MAX_SEGMENT_CHARS`: upstream's own batching makes the
pieces (a text without speaker tags is one batch). A streamed request yields one chunk per batch,
or with the option `stream_frames` a chunk every `chunk_s` (koe's own streaming decoder, within
float32 rounding of the one-shot's samples).

Precisions: fp32 (upstream's float32 bits), bf16 (upstream's server in bfloat16, bit for bit: the
transformer in bfloat16, the float32 codec decoding under bfloat16 autocast), int8 / int4 (opt-in:
both transformers' layers quantized on koe's kernels, named in the result's metadata).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from koe.engines.base import Capabilities, InvalidOption, SynthesisRequest, UnsupportedVoice, VoicePromptMismatch, VoiceReference
from koe.engines.chunker import Chunker
from koe.engines.engine import BaseEngine, Checked, reference_frames
from koe.engines.pipeline import Piece, PipelineDefaults, Segment, steps_for
from koe.runtime.device import resolve_device
from koe.runtime.precision import check as check_precision
from koe.runtime.precision import float_dtype
from koe_fish_speech import spec
from koe_fish_speech.codec import FishCodec, read_codec
from koe_fish_speech.generate import Sampling, generate_frames
from koe_fish_speech.model import DualARLM, load_lm_in
from koe_fish_speech.prompt import SpeechPrompt, check_length, check_speakers, text_batches
from koe_fish_speech.reference import reference_codes
from koe_fish_speech.stream import StreamDecoder
from koe_fish_speech.tokenizer import FishTokenizer
from koe_fish_speech.voice import FishSpeechVoice, FishSpeechVoiceError

__all__ = ["FishSpeechEngine", "MAX_SEGMENT_CHARS"]

MAX_SEGMENT_CHARS = 20000  # one request is one upstream call: upstream batches the text itself


class FishSpeechEngine(BaseEngine):
    """A loaded Fish Speech S2 release, on the CPU (fp32, bf16, int8 or int4). Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = "Fish Speech"
    voice_type, voice_error = FishSpeechVoice, FishSpeechVoiceError
    sample_rate = spec.SAMPLE_RATE
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.0)

    def __init__(self, folder: Path, lm: DualARLM, codec: FishCodec, tokenizer: FishTokenizer, device: torch.device) -> None:
        self.folder, self.lm, self.codec, self.tokenizer, self.device = folder, lm, codec, tokenizer, device

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> FishSpeechEngine:
        """Load a release folder strictly, on the CPU: float32 by default (upstream's bits), or in
        `precision` (`koe.runtime.precision`'s names): "bf16" is upstream's server engine in
        bfloat16 (`ModelManager(half=False)`: the transformer in bfloat16, the codec in float32
        decoding under bfloat16 autocast), upstream's bits too; "int8" / "int4" quantize both
        transformers' layers on koe's kernels (other bits, opt-in; the rest float32).
        `dtype` bfloat16 (or its names) is precision "bf16"."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        mode = check_precision(precision, spec.PRECISIONS, "Fish Speech")
        asked = float_dtype(dtype, (torch.float32, torch.bfloat16), "Fish Speech")
        if mode is None:
            mode = "bf16" if asked == torch.bfloat16 else "fp32"
        elif asked != (torch.bfloat16 if mode == "bf16" else torch.float32) and dtype is not None:
            raise ValueError(f"dtype={dtype!r} and precision={precision!r} disagree: give one of them")
        dev = resolve_device(device)
        if dev.type != "cpu":
            raise ValueError(f"Fish Speech runs on the CPU in this version of koe (device={dev})")
        description = spec.SPEC.describe(folder)
        if description.missing:
            raise FileNotFoundError(f"{folder}: missing {', '.join(description.missing)} (a release folder has them: koe models pull {spec.REPO})")
        tokenizer = FishTokenizer.load(folder)
        lm = load_lm_in(folder, mode)
        codec = read_codec(folder / spec.CODEC_FILE, torch.float32)
        if mode == "bf16":
            codec.decode_autocast = torch.bfloat16
        if lm.config.num_codebooks != codec.config.num_codebooks:
            raise ValueError(
                f"{folder}: the transformer speaks {lm.config.num_codebooks} codebooks but codec.pth has {codec.config.num_codebooks}: "
                "the files come from different releases"
            )
        return cls(folder, lm, codec, tokenizer, dev)

    @property
    def precision(self) -> str:
        """What results name: "float32", "bfloat16", "int8" or "int4"."""
        return getattr(self.lm, "precision", "float32")

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities()

    def release(self) -> None:
        self.lm = self.codec = None

    def result_metadata(self) -> dict:
        meta = {"model": spec.VARIANT, "precision": self.precision, "device": str(self.device)}
        kernel = getattr(self.lm, "kernel", None)
        return {**meta, "kernel": kernel} if kernel else meta

    # -- voices ------------------------------------------------------------------------------------
    def build_voice(self, reference: VoiceReference) -> FishSpeechVoice:
        """A voice prompt from a clip and its transcript (S2 reads the transcript before the clip's
        codes): the clip mono, at 44.1 kHz, encoded by the codec as upstream's server does."""
        text = reference.text
        if not isinstance(text, str) or not text.strip():
            raise UnsupportedVoice("Fish Speech clones from a clip with its transcript: give the words spoken in the clip (--ref-text)")
        self.tokenizer.check_text(text, "the reference transcript")
        frames, rate = reference_frames(reference.audio, title="Fish Speech", min_s=spec.MIN_REFERENCE_S, max_s=spec.MAX_REFERENCE_S, trim=reference.trim)
        if not np.any(frames):
            raise UnsupportedVoice("the voice clip is silent (every sample is zero): Fish Speech clones a voice from a clip of speech")
        samples = np.ascontiguousarray(frames.T if frames.ndim == 2 else frames, dtype=np.float32)
        codes = reference_codes(self.codec, samples, rate, resampler="transform")
        return FishSpeechVoice.of(codes, text, {"ref_seconds": round(frames.shape[0] / rate, 3), "frames": int(codes.shape[-1])})

    def check_prompt(self, voice: FishSpeechVoice) -> FishSpeechVoice:
        n = self.lm.config.num_codebooks
        if any(c.codes.shape[0] != n for c in voice.clips):
            raise VoicePromptMismatch(f"this voice prompt's codes are not of this model's {n} codebooks: prepare the voice again")
        return voice

    # -- requests ----------------------------------------------------------------------------------
    def check_options(self, request: SynthesisRequest, checked: Checked) -> Checked:
        values = {**spec.DEFAULTS, **self.capabilities.options.validate(request.options)}
        room = self.lm.config.max_seq_len
        if values["max_new_tokens"] > room:
            raise InvalidOption(f"max_new_tokens={values['max_new_tokens']}: this model has {room} positions in all", param="max_new_tokens")
        return replace(checked, settings=values)

    def frames(self, text: str, voice: FishSpeechVoice | None, settings: dict, cap: int | None = None, stop=None) -> Iterator[torch.Tensor | None]:
        """Every kept frame's codes `(num_codebooks,)` as upstream's `generate_long` makes them (draws
        from torch's global generator: seed it first), and None after each batch's last; at most
        `cap` frames in all (the last batch cut there); `stop()`, asked before each frame, ends the
        frames of a cancelled request. A batch's frames go back into the next batch's prompt once
        its None has been taken."""
        s = settings
        batches = text_batches(text, int(s["chunk_length"]))
        clips = voice.clips if voice is not None else ()
        check_speakers(text, [c.text for c in clips])
        prompt = SpeechPrompt(self.tokenizer, self.lm.config.num_codebooks, clips)
        sampling = Sampling(temperature=float(s["temperature"]), top_p=float(s["top_p"]), top_k=int(s["top_k"]))
        total = 0
        for batch in batches:
            tokens = prompt.next_prompt(batch)
            check_length(tokens, self.lm.config.max_seq_len)
            kept = []
            for frame in generate_frames(
                self.lm,
                tokens,
                semantic_begin_id=self.tokenizer.semantic_begin_id,
                semantic_end_id=self.tokenizer.semantic_end_id,
                im_end_id=self.tokenizer.im_end_id,
                max_new_tokens=int(s["max_new_tokens"]),
                sampling=sampling,
                stop=stop,
            ):
                kept.append(frame.codes.to(torch.long))
                yield kept[-1]
                if cap is not None and total + len(kept) >= cap:
                    break
            total += len(kept)
            yield None
            if cap is not None and total >= cap:
                return
            prompt.add_codes(_stacked(kept, self.lm.config.num_codebooks))

    def batch_codes(self, text: str, voice: FishSpeechVoice | None, settings: dict, cap: int | None = None, stop=None) -> Iterator[torch.Tensor]:
        """Each batch's codes `(num_codebooks, frames)`, as upstream's `generate_long` yields them (see `frames`)."""
        kept: list[torch.Tensor] = []
        for frame in self.frames(text, voice, settings, cap, stop):
            if frame is None:
                yield _stacked(kept, self.lm.config.num_codebooks)
                kept = []
            else:
                kept.append(frame)

    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        cap = steps_for(segment.budget_s, spec.FRAME_RATE)
        stop = (lambda: c.cancel.cancelled) if c.cancel is not None else None
        if segment.seed is not None:
            torch.manual_seed(int(segment.seed))
        by_frames = bool(c.settings["stream_frames"]) and segment.streamed
        pieces = self._frame_pieces(segment, c, cap, stop) if by_frames else self._batch_pieces(segment, c, cap, stop)
        total, spoken = 0, 0
        for samples, frames, batch_ended in pieces:
            total += frames
            spoken += batch_ended
            yield Piece(samples, total, metadata={"stream": "frames"} if by_frames else {})
        if c.cancel is not None:
            c.cancel.raise_if_cancelled()
        info = {"batches": spoken, "frames": total, "seconds": round(total / spec.FRAME_RATE, 3), **({"stream": "frames"} if by_frames else {})}
        yield Piece(np.zeros(0, np.float32), total, last=True, truncated=total >= cap, info=info)

    def _batch_pieces(self, segment: Segment, c: Checked, cap: int, stop) -> Iterator[tuple[np.ndarray, int, bool]]:
        """(samples, frames, batch ended) of each batch, decoded whole, as upstream's server decodes it."""
        for codes in self.batch_codes(segment.text, c.voice, c.settings, cap, stop):
            if c.cancel is not None:
                c.cancel.raise_if_cancelled()
            audio = self.codec.decode(codes).float().numpy() if codes.shape[1] else np.zeros(0, np.float32)
            yield audio, codes.shape[1], True

    def _frame_pieces(self, segment: Segment, c: Checked, cap: int, stop) -> Iterator[tuple[np.ndarray, int, bool]]:
        """The `stream_frames` mode: each batch's frames decoded as they come (`StreamDecoder`), a piece
        after `first_chunk_s` of audio, then every `chunk_s`, and at each batch's end."""
        chunker = Chunker.of(segment.first_chunk_s, segment.chunk_s, spec.FRAME_RATE)
        decoder, held = StreamDecoder(self.codec), []
        for frame in self.frames(segment.text, c.voice, c.settings, cap, stop):
            if c.cancel is not None:
                c.cancel.raise_if_cancelled()
            if frame is not None:
                held.append(frame)
                if chunker.add(1):
                    yield decoder.push(torch.stack(held, dim=1)), len(held), False
                    held = []
                continue
            out = decoder.push(torch.stack(held, dim=1)) if held else np.zeros(0, np.float32)
            yield np.concatenate([out, decoder.flush()]), len(held), True
            decoder, held = StreamDecoder(self.codec), []


def _stacked(frames: list[torch.Tensor], rows: int) -> torch.Tensor:
    """Frames' codes `(rows,)` each, as `(rows, frames)` (empty: no frames)."""
    return torch.stack(frames, dim=1) if frames else torch.zeros((rows, 0), dtype=torch.long)
