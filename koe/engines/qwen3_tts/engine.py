"""The Qwen3-TTS engine: what the rest of koe sees (load, capabilities, generate)."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from koe.engines.qwen3_tts.config import GenerationDefaults, Qwen3TTSConfig
from koe.engines.base import AudioChunk, CancelToken
from koe.engines.qwen3_tts.generate import DecodeOutcome, DecodeSettings, decode_frames
from koe.engines.qwen3_tts.guard import FRAME_RATE, MAX_SEGMENT_CHARS, SEGMENT_PAUSE_S, frame_budget
from koe.engines.qwen3_tts.streaming import CodecStream
from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
from koe.engines.qwen3_tts.prompt import ClonePrompt, PromptItem, build_talker_inputs
from koe.engines.qwen3_tts.voice import VoicePrompt, VoicePromptError, model_stamp, reference_audio, to_codec_rate
from koe.runtime.device import resolve_device, resolve_dtype
from koe.runtime.sampling import SamplingConfig
from koe.text.segment import segment_text

log = logging.getLogger(__name__)

SAMPLING_KEYS = (
    "do_sample", "top_k", "top_p", "temperature", "repetition_penalty",
    "subtalker_dosample", "subtalker_top_k", "subtalker_top_p", "subtalker_temperature", "max_new_tokens",
)  # fmt: skip


class RequestError(ValueError):
    """A request koe cannot serve as asked (unknown speaker, empty text, ...); the message says what is valid."""


@dataclass(frozen=True)
class Capabilities:
    clone: bool
    clone_without_transcript: bool
    preset_speakers: tuple[str, ...]
    instruct: bool
    voice_design: bool
    streaming: bool
    batch: bool
    languages: tuple[str, ...]
    sample_rate: int


@dataclass
class SpeechResult:
    """One text's speech: float32 mono samples, the codec frames that made them, and metadata."""

    audio: np.ndarray
    sample_rate: int
    codes: torch.Tensor  # (frames, 16) int64
    metadata: dict = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate


class Qwen3TTSEngine:
    family = "qwen3_tts"

    def __init__(self, folder: Path, cfg: Qwen3TTSConfig, defaults: GenerationDefaults, network: Qwen3TTSNetwork, tokenizer, codec, device: torch.device, dtype: torch.dtype) -> None:
        self.folder = folder
        self.cfg = cfg
        self.defaults = defaults
        self.network = network
        self.tokenizer = tokenizer
        self.codec = codec
        self.device = device
        self.dtype = dtype

    @classmethod
    def load(
        cls, folder: str | Path, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None, *, precision: str | None = None
    ) -> Qwen3TTSEngine:
        """Load a model folder in the released layout (strict: a missing file or tensor is an error naming it).

        `precision` picks an opt-in mode that changes float bits: "bf16" (weights and compute in
        bfloat16) or "int8" (int8 linear layers in the talker and code predictor, see
        `koe.runtime.quant`); None or "fp32" keeps `dtype` (float32 on the CPU: upstream's bits).
        """
        from koe.engines.qwen3_tts.codec import SpeechTokenizer
        from koe.text import QwenTokenizer

        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        dev = resolve_device(device)
        mode = _precision_mode(precision)
        dt = torch.bfloat16 if mode == "bf16" else torch.float32 if mode in ("fp32", "int8") else resolve_dtype(dtype, dev)
        cfg = Qwen3TTSConfig.from_folder(folder)
        defaults = GenerationDefaults.from_folder(folder)
        tokenizer = QwenTokenizer.from_folder(folder)
        if not (folder / "speech_tokenizer").is_dir():
            raise FileNotFoundError(f"{folder}: missing speech_tokenizer/ (the 12 Hz codec's config and weights)")
        network = Qwen3TTSNetwork.from_folder(folder, cfg, device=dev, dtype=dt)
        codec = SpeechTokenizer.from_folder(folder / "speech_tokenizer", device=dev, dtype=dt)
        if mode == "int8":
            if dev.type != "cpu":
                raise ValueError("precision='int8' is a CPU mode (fbgemm kernels); on a GPU use bf16")
            from koe.runtime.quant import quantize_linears

            quantize_linears(network.talker, skip=("text_projection",))  # decoder layers, codec head, code predictor
        engine = cls(folder, cfg, defaults, network, tokenizer, codec, dev, dt)
        engine._precision = mode
        return engine

    _precision: str | None = None  # the opt-in mode `load` was given, if any

    @property
    def precision(self) -> str:
        """The numeric mode this engine runs in ("float32" = exact; "bfloat16", "int8" are opt-in)."""
        return "int8" if self._precision == "int8" else str(self.dtype).removeprefix("torch.")

    cuda_graphs: bool = True  # on CUDA, decode with captured graphs (koe/engines/qwen3_tts/graphed.py)

    def frames_core(self):
        """The frames generator: CUDA graphs on CUDA (unless `cuda_graphs` is off), else the eager core."""
        if self.device.type == "cuda" and self.cuda_graphs:
            from koe.engines.qwen3_tts.graphed import graphed_decode_frames

            return graphed_decode_frames
        return decode_frames

    # -- what the model offers -------------------------------------------------------------
    @property
    def sample_rate(self) -> int:
        return int(self.codec.sample_rate)

    @property
    def speakers(self) -> list[str]:
        return sorted(self.cfg.talker.speaker_ids)

    @property
    def languages(self) -> list[str]:
        return sorted(self.cfg.talker.languages)

    @property
    def capabilities(self) -> Capabilities:
        kind = self.cfg.model_type
        return Capabilities(
            clone=kind == "base",
            clone_without_transcript=kind == "base",
            preset_speakers=tuple(self.speakers),
            instruct=kind == "voice_design" or (kind == "custom_voice" and not self.cfg.drops_instruct),
            voice_design=kind == "voice_design",
            streaming=True,
            batch=True,
            languages=tuple(self.languages),
            sample_rate=self.sample_rate,
        )

    # -- requests ------------------------------------------------------------------------------
    def decode_settings(self, **options) -> DecodeSettings:
        """Sampling settings: the request's options over `generation_config.json` over upstream's defaults."""
        unknown = set(options) - set(SAMPLING_KEYS)
        if unknown:
            raise RequestError(f"unknown sampling option(s): {sorted(unknown)}; valid: {list(SAMPLING_KEYS)}")
        d = replace(self.defaults, **{k: v for k, v in options.items() if v is not None})
        tc = self.cfg.talker
        try:
            return DecodeSettings(
                talker=SamplingConfig(d.do_sample, float(d.temperature), int(d.top_k), float(d.top_p), float(d.repetition_penalty), min_new_tokens=2),
                predictor=SamplingConfig(d.subtalker_dosample, float(d.subtalker_temperature), int(d.subtalker_top_k), float(d.subtalker_top_p)),
                max_new_tokens=int(d.max_new_tokens),
                eos_id=tc.codec_eos_id,
                suppress_ids=tuple(i for i in range(tc.vocab_size - 1024, tc.vocab_size) if i != tc.codec_eos_id),
            )
        except ValueError as e:
            raise RequestError(str(e)) from e

    def _check_language(self, language: str) -> str:
        if language is None or str(language).lower() not in self.cfg.talker.languages:
            raise RequestError(f"unsupported language {language!r}; supported: {self.languages}")
        return str(language)

    def _check_speaker(self, speaker: str | None) -> str | None:
        if speaker in (None, ""):
            if self.cfg.model_type == "custom_voice":
                raise RequestError(f"this CustomVoice model needs a speaker; choose one of {self.speakers}")
            return None
        if self.cfg.model_type != "custom_voice":
            raise RequestError(f"this {self.cfg.model_type} model has no preset speakers (speaker={speaker!r}); use a CustomVoice model")
        if speaker.lower() not in self.cfg.talker.speaker_ids:
            raise RequestError(f"unknown speaker {speaker!r}; supported: {self.speakers}")
        return speaker

    def _ids(self, text: str) -> torch.Tensor:
        return torch.tensor([self.tokenizer.encode(text)], dtype=torch.long, device=self.device)

    def prompt_items(
        self, texts: list[str], languages: list[str], speakers: list[str | None], instructs: list[str | None], voices: list[VoicePrompt | None] | None = None
    ) -> list[PromptItem]:
        """Validate a batch and tokenize it into prompt items as upstream's wrapper does."""
        kind = self.cfg.model_type
        voices = voices or [None] * len(texts)
        items = []
        for text, language, speaker, instruct, voice in zip(texts, languages, speakers, instructs, voices, strict=True):
            if not isinstance(text, str) or not text.strip():
                raise RequestError("text is empty: give at least one word to speak")
            language = self._check_language(language)
            clone = self._clone_prompt(voice)
            if clone is not None and speaker:
                raise RequestError(f"speaker={speaker!r} cannot be combined with a cloned voice; pass one or the other")
            speaker = None if clone is not None else self._check_speaker(speaker)
            if instruct and kind == "custom_voice" and self.cfg.drops_instruct:
                warnings.warn("this 0.6B CustomVoice model ignores instructions (as upstream does); the instruction was dropped", stacklevel=3)
                instruct = None
            if instruct and kind == "base":
                warnings.warn("Base (voice cloning) models take no instruction; it was ignored", stacklevel=3)
                instruct = None
            instruct_ids = self._ids(f"<|im_start|>user\n{instruct}<|im_end|>\n") if instruct else None
            items.append(PromptItem(self._ids(f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"), language, speaker, instruct_ids, clone))
        return items

    def _clone_prompt(self, voice: VoicePrompt | None) -> ClonePrompt | None:
        if voice is None:
            if self.cfg.model_type == "base":
                raise RequestError("a Base model speaks only in a cloned voice: pass voice=engine.prepare_voice(clip, ref_text=...)")
            return None
        if self.cfg.model_type != "base":
            raise RequestError(f"this {self.cfg.model_type} model cannot clone a voice; use a Qwen3-TTS Base model for cloning")
        try:
            voice.model.check(self.stamp)
        except VoicePromptError as e:
            raise RequestError(str(e)) from e
        if voice.model.fingerprint != self.stamp.fingerprint:
            warnings.warn("this voice prompt was made with other weights of the same model size; prepare it again for best results", stacklevel=4)
        embedding = voice.speaker_embedding.to(self.device).to(self.dtype)
        if voice.x_vector_only:
            return ClonePrompt(embedding, None, None, icl=False)
        ref_ids = self._ids(f"<|im_start|>assistant\n{voice.ref_text}<|im_end|>\n")
        return ClonePrompt(embedding, voice.ref_code, ref_ids, icl=True)

    # -- voice prompts -------------------------------------------------------------------------
    @property
    def stamp(self):
        if not hasattr(self, "_stamp"):
            self._stamp = model_stamp(self.cfg, self.folder)
        return self._stamp

    def prepare_voice(self, ref_audio, ref_text: str | None = None, x_vector_only: bool = False, *, trim: bool = False) -> VoicePrompt:
        """A reusable cloning prompt from a reference clip (path, bytes, or (samples, sample_rate)).

        ICL mode (default) needs the clip's transcript; `x_vector_only=True` uses the speaker
        embedding alone (no transcript needed; the voice is matched less closely).
        """
        return self.prepare_voices([ref_audio], [ref_text], [x_vector_only], trim=trim)[0]

    @torch.inference_mode()
    def prepare_voices(self, refs: list, ref_texts: list[str | None], x_vector_only: list[bool], *, trim: bool = False) -> list[VoicePrompt]:
        """Batch form of `prepare_voice`; references with one sample rate are encoded together, as upstream does."""
        if self.cfg.model_type != "base":
            raise RequestError(
                f"this {self.cfg.model_type} model cannot clone a voice; use a Qwen3-TTS Base model "
                "(e.g. Qwen3-TTS-12Hz-0.6B-Base) for cloning"
            )
        for i, (text, xvec) in enumerate(zip(ref_texts, x_vector_only, strict=True)):
            if not xvec and not (text and text.strip()):
                raise RequestError(
                    f"reference {i}: in-context cloning needs the transcript of the reference clip (ref_text). "
                    "Without one, use x-vector mode (x_vector_only=True / --x-vector-only): the speaker embedding alone, which copies the voice less closely"
                )
        audios = [reference_audio(r, trim=trim) for r in refs]
        codes: list = [None] * len(audios)
        if not all(x_vector_only):
            rates = {sr for _, sr in audios}
            if len(rates) == 1:
                codes = self.codec.encode_list([torch.from_numpy(to_codec_rate(a, sr)) for a, sr in audios])
            else:
                codes = [self.codec.encode_list([torch.from_numpy(to_codec_rate(a, sr))])[0] for a, sr in audios]
        from koe.engines.qwen3_tts.speaker import extract_speaker_embedding

        prompts = []
        for (audio, sr), code, text, xvec in zip(audios, codes, ref_texts, x_vector_only, strict=True):
            embedding = extract_speaker_embedding(self.network.speaker_encoder, to_codec_rate(audio, sr))
            prompts.append(VoicePrompt(
                speaker_embedding=embedding.float().cpu(), ref_code=None if xvec else code.cpu(), ref_text=None if xvec else text,
                x_vector_only=bool(xvec), model=self.stamp, info={"ref_seconds": round(len(audio) / sr, 3), "ref_sample_rate": sr},
            ))  # fmt: skip
        return prompts

    @torch.inference_mode()
    def generate_codes(
        self, items: list[PromptItem], settings: DecodeSettings, *, non_streaming_mode: bool, generator: torch.Generator | None,
        budgets: list[int] | None = None, cancel: CancelToken | None = None, outcome: DecodeOutcome | None = None,
    ) -> list[torch.Tensor]:
        """Run the decode core to the end; each item's frames (T_i, 16) up to its end of speech."""
        inputs = build_talker_inputs(self.network.talker, self.cfg, items, non_streaming_mode)
        limits = None if budgets is None else torch.tensor(budgets, device=self.device)
        frames, alive = [], []
        for frame in self.frames_core()(self.network.talker, inputs, settings, generator, row_limits=limits, cancel=cancel, outcome=outcome):
            frames.append(frame.codes)
            alive.append(frame.alive)
        if not frames:
            return [torch.zeros((0, self.cfg.talker.num_code_groups), dtype=torch.long) for _ in items]
        codes = torch.stack(frames, dim=1)  # (B, T, G)
        lengths = torch.stack(alive, dim=1).sum(dim=1)
        return [codes[i, : int(lengths[i])] for i in range(len(items))]

    def decode_waveforms(self, codes: list[torch.Tensor], items: list[PromptItem]) -> list:
        """Codes -> waveforms. For ICL clones the reference frames are decoded in front and the
        reference part cut off in proportion, as upstream does."""
        refs = [_icl_reference(it) for it in items]
        full = [c if r is None else torch.cat([r.to(c.device), c], dim=0) for c, r in zip(codes, refs, strict=True)]
        wavs = self.codec.decode(full)
        out = []
        for wav, r, f in zip(wavs, refs, full, strict=True):
            if r is not None:
                wav = wav[int(r.shape[0] / max(f.shape[0], 1) * wav.shape[0]) :]
            out.append(wav)
        return out

    def default_non_streaming(self) -> bool:
        """Upstream's wrapper feeds the whole text up front for CustomVoice/VoiceDesign, streams it for Base."""
        return self.cfg.model_type != "base"

    def _request(self, texts, language, speaker, instruct, voice, sampling) -> tuple[list[PromptItem], DecodeSettings]:
        n = len(texts)
        languages = _broadcast(language if language is not None else "auto", n, "language")
        settings = self.decode_settings(**sampling)
        items = self.prompt_items(texts, languages, _broadcast(speaker, n, "speaker"), _broadcast(instruct, n, "instruct"), _broadcast(voice, n, "voice"))
        return items, settings

    def _budget(self, text: str, settings: DecodeSettings, max_frames: int | None) -> int:
        """Frames a segment may take: the runaway guard (or the caller's `max_frames`), within max_new_tokens."""
        budget = frame_budget(text) if max_frames is None else int(max_frames)
        return min(budget, settings.max_new_tokens - 1)

    def generate(
        self,
        text: str | list[str],
        *,
        language: str | list[str] | None = None,
        speaker: str | list[str] | None = None,
        instruct: str | list[str] | None = None,
        voice: VoicePrompt | list[VoicePrompt] | None = None,
        seed: int | None = None,
        non_streaming_mode: bool | None = None,
        max_segment_chars: int = MAX_SEGMENT_CHARS,
        pause_s: float = SEGMENT_PAUSE_S,
        max_frames: int | None = None,
        cancel: CancelToken | None = None,
        generator: torch.Generator | None = None,
        **sampling,
    ) -> SpeechResult | list[SpeechResult]:
        """Speak one text (-> SpeechResult) or a batch (-> list).

        `seed=N` equals upstream run right after `torch.manual_seed(N)`. A text longer than
        `max_segment_chars` is spoken in segments (segment i uses seed + i) joined by `pause_s` of
        silence. Each segment is capped by the runaway guard (`frame_budget`, or `max_frames`);
        hitting it ends the segment and marks the result `truncated`, with a warning.
        """
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        if not texts:
            raise RequestError("no text given")
        if seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(int(seed))
        nsm = self.default_non_streaming() if non_streaming_mode is None else bool(non_streaming_mode)
        segmented = [segment_text(t, max_segment_chars) if isinstance(t, str) else [t] for t in texts]
        if all(len(s) <= 1 for s in segmented):
            results = self._generate_batch(texts, language, speaker, instruct, voice, seed, nsm, generator, max_frames, cancel, sampling)
        else:
            one = lambda v, i: v[i] if isinstance(v, (list, tuple)) else v  # noqa: E731
            results = [
                self._generate_segments(segs, one(language, i), one(speaker, i), one(instruct, i), one(voice, i), seed, nsm, generator, max_frames, cancel, pause_s, sampling)
                for i, segs in enumerate(segmented)
            ]
        for r in results:
            if r.metadata["truncated"]:
                warnings.warn(r.metadata["warnings"][0], stacklevel=2)
        return results[0] if single else results

    def _generate_batch(self, texts, language, speaker, instruct, voice, seed, nsm, generator, max_frames, cancel, sampling) -> list[SpeechResult]:
        items, settings = self._request(texts, language, speaker, instruct, voice, sampling)
        budgets = [self._budget(t, settings, max_frames) for t in texts]
        outcome = DecodeOutcome()
        started = time.perf_counter()
        codes = self.generate_codes(items, settings, non_streaming_mode=nsm, generator=generator, budgets=budgets, cancel=cancel, outcome=outcome)
        decoded_at = time.perf_counter()
        wavs = self.decode_waveforms(codes, items)
        finished = time.perf_counter()
        results = []
        for i, (c, wav) in enumerate(zip(codes, wavs, strict=True)):
            truncated = not bool(outcome.eos[i])
            meta = self._metadata(seed, int(c.shape[0]), truncated, budgets[i])
            meta["timings"] = {"generate_s": decoded_at - started, "codec_s": finished - decoded_at}
            meta["decode_path"] = outcome.decode_path
            results.append(SpeechResult(_to_numpy(wav), self.sample_rate, c.cpu(), meta))
        return results

    def _generate_segments(self, segments, language, speaker, instruct, voice, seed, nsm, generator, max_frames, cancel, pause_s, sampling) -> SpeechResult:
        pause = np.zeros(int(round(pause_s * self.sample_rate)), dtype=np.float32)
        audio, codes, metas = [], [], []
        for i, segment in enumerate(segments):
            gen = generator if seed is None else torch.Generator(device="cpu").manual_seed(int(seed) + i)
            (r,) = self._generate_batch([segment], language, speaker, instruct, voice, None if seed is None else seed + i, nsm, gen, max_frames, cancel, sampling)
            audio += [pause, r.audio] if audio else [r.audio]
            codes.append(r.codes)
            metas.append(r.metadata)
        meta = self._metadata(seed, sum(m["frames"] for m in metas), any(m["truncated"] for m in metas), sum(m["frame_budget"] for m in metas))
        meta["segments"] = [{"text": t, "frames": m["frames"], "truncated": m["truncated"], "seed": m["seed"]} for t, m in zip(segments, metas)]
        meta["warnings"] = [w for m in metas for w in m["warnings"]]
        return SpeechResult(np.concatenate(audio), self.sample_rate, torch.cat(codes), meta)

    def _metadata(self, seed, frames: int, truncated: bool, budget: int) -> dict:
        warning = (
            f"speech was cut off after {frames} frames ({frames / FRAME_RATE:.1f} s): the model did not end the utterance "
            "within max_new_tokens or its frame budget (the runaway guard)"
        )
        return {
            "model": self.cfg.model_type, "size": self.cfg.model_size, "seed": seed, "frames": frames,
            "precision": self.precision, "device": str(self.device),
            "truncated": truncated, "frame_budget": budget, "warnings": [warning] if truncated else [],
        }  # fmt: skip

    def stream(
        self,
        text: str,
        *,
        language: str | None = None,
        speaker: str | None = None,
        instruct: str | None = None,
        voice: VoicePrompt | None = None,
        seed: int | None = None,
        non_streaming_mode: bool | None = None,
        first_chunk_frames: int = 4,
        chunk_frames: int = 12,
        max_segment_chars: int = MAX_SEGMENT_CHARS,
        pause_s: float = SEGMENT_PAUSE_S,
        max_frames: int | None = None,
        cancel: CancelToken | None = None,
        generator: torch.Generator | None = None,
        **sampling,
    ) -> Iterator[AudioChunk]:
        """Speak `text` as audio chunks while the talker is still producing frames.

        The first chunk comes after `first_chunk_frames` frames (4 = 0.32 s of audio), then one every
        `chunk_frames`. Frames come from the same decode core as `generate`, so the codes are the
        same; samples equal the one-shot result up to float32 rounding. Long texts stream on across
        segments. Closing the iterator or setting `cancel` stops decoding within one frame.
        """
        if not isinstance(text, str):
            raise RequestError("stream() speaks one text at a time; use generate() for a batch")
        if first_chunk_frames < 1 or chunk_frames < 1:
            raise RequestError(f"first_chunk_frames and chunk_frames must be >= 1 (got {first_chunk_frames}, {chunk_frames})")
        segments = segment_text(text, max_segment_chars)
        if not segments:
            raise RequestError("text is empty: give at least one word to speak")
        nsm = self.default_non_streaming() if non_streaming_mode is None else bool(non_streaming_mode)
        started = time.perf_counter()
        offset, frames_total = 0, 0
        pause = np.zeros(int(round(pause_s * self.sample_rate)), dtype=np.float32)
        for s, segment in enumerate(segments):
            gen = torch.Generator(device="cpu").manual_seed(int(seed) + s) if seed is not None else generator
            items, settings = self._request([segment], language, speaker, instruct, voice, sampling)
            budget = self._budget(segment, settings, max_frames)
            with torch.inference_mode():
                inputs = build_talker_inputs(self.network.talker, self.cfg, items, nsm)
            codec = CodecStream(self.codec, prefix=_icl_reference(items[0]))
            outcome = DecodeOutcome()
            due = first_chunk_frames if s == 0 else chunk_frames
            head = pause if s > 0 else None
            frames = self.frames_core()(self.network.talker, inputs, settings, gen, row_limits=torch.tensor([budget], device=self.device), cancel=cancel, outcome=outcome)
            try:
                with torch.inference_mode():
                    for frame in frames:
                        codec.push(frame.codes[0])
                        frames_total += 1
                        if codec.pending >= due:
                            codes = codec.pending_codes()
                            samples = _with_head(head, _to_numpy(codec.drain()))
                            head, due = None, chunk_frames
                            yield self._chunk(samples, offset, False, frames_total, started, codes=codes)
                            offset += len(samples)
                    tail_codes = codec.pending_codes()
                    tail = _with_head(head, _to_numpy(codec.drain()))
            finally:
                frames.close()
            last = s == len(segments) - 1
            meta_extra = {"segment": s, "truncated": not bool(outcome.eos[0]), "codes": tail_codes, "decode_path": outcome.decode_path}
            if meta_extra["truncated"]:
                msg = f"segment {s} was cut off after {budget} frames: the model did not end the utterance within max_new_tokens or its frame budget"
                meta_extra["warnings"] = [msg]
                warnings.warn(msg, stacklevel=2)
            if len(tail) or last:
                yield self._chunk(tail, offset, last, frames_total, started, **meta_extra)
                offset += len(tail)

    def _chunk(self, samples: np.ndarray, offset: int, final: bool, frames: int, started: float, **extra) -> AudioChunk:
        meta = {"frames": frames, "elapsed_s": time.perf_counter() - started, **extra}
        return AudioChunk(samples=samples, sample_rate=self.sample_rate, offset=offset, final=final, metadata=meta)


def _icl_reference(item: PromptItem) -> torch.Tensor | None:
    return item.clone.ref_code if item.clone is not None and item.clone.icl else None


def _with_head(head: np.ndarray | None, samples: np.ndarray) -> np.ndarray:
    return samples if head is None else np.concatenate([head, samples])


def _precision_mode(precision: str | None) -> str | None:
    if precision is None:
        return None
    mode = {"fp32": "fp32", "float32": "fp32", "bf16": "bf16", "bfloat16": "bf16", "int8": "int8"}.get(str(precision).lower())
    if mode is None:
        raise ValueError(f"unknown precision {precision!r}; use fp32 (exact), bf16 or int8")
    return mode


def _broadcast(value, n: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) == 1 and n > 1:
            return list(value) * n
        if len(value) != n:
            raise RequestError(f"batch size mismatch: {n} texts but {len(value)} values for {name}")
        return list(value)
    return [value] * n


def _to_numpy(wav) -> np.ndarray:
    if isinstance(wav, torch.Tensor):
        wav = wav.detach().to(torch.float32).cpu().numpy()
    return np.asarray(wav, dtype=np.float32)
