"""The Qwen3-TTS engine: the tensor-level core under koe's generic pipeline.

Under the contract (`koe.engines.base.Engine`, through `koe.engines.engine.BaseEngine`): `synthesize`
runs `koe.engines.pipeline.run` over `speak_segment` (one segment: prompt -> decode core -> codec -> audio,
whole or in pieces); `decode_batch` decodes short texts as one batch. The native API (`native.Qwen3TTS`,
what `koe.load` returns) and the drop-in `koe.compat.qwen_tts` hold an engine and use its tensor-level
methods (`decode_settings`, `prompt_items`, `generate_codes`, `decode_waveforms`, `decode_batch`).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from koe.engines import pipeline
from koe.engines.base import (
    AudioChunk,
    CancelToken,
    Capabilities,
    EmptyText,
    InvalidOption,
    RequestError,
    SpeechResult,
    SynthesisRequest,
    UnsupportedLanguage,
    UnsupportedVoice,
    VoicePromptMismatch,
    VoiceReference,
)
from koe.engines.chunker import Chunker
from koe.engines.engine import BaseEngine, Checked
from koe.engines.pipeline import Piece, PipelineDefaults, RowFeed, Segment, steps_for, truncation_warning
from koe.engines.qwen3_tts import spec
from koe.engines.qwen3_tts.codec.fast import FastCodec, fast_codec_for
from koe.engines.qwen3_tts.config import GenerationDefaults, Qwen3TTSConfig
from koe.engines.qwen3_tts.continuous_batching import RowDecoder
from koe.engines.qwen3_tts.generate import DecodeOutcome, DecodeSettings, decode_frames
from koe.engines.qwen3_tts.limits import FRAME_RATE, MAX_SEGMENT_CHARS, SEGMENT_PAUSE_S
from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
from koe.engines.qwen3_tts.prompt import ClonePrompt, PromptItem, build_talker_inputs
from koe.engines.qwen3_tts.streaming import CodecStream
from koe.engines.qwen3_tts.talker import backbone
from koe.engines.qwen3_tts.voice import VoicePrompt, VoicePromptError, model_stamp, pad_reference, reference_audio, to_codec_rate
from koe.runtime.device import resolve_device, resolve_dtype
from koe.runtime.precision import apply as apply_precision
from koe.runtime.precision import plan as precision_plan
from koe.runtime.sampling import SamplingConfig
from koe.text.checks import text_problem
from koe.text.segment import segment_text

log = logging.getLogger(__name__)

SAMPLING_KEYS = tuple(spec.GENERATION_DEFAULTS)
__all__ = ["Qwen3TTSEngine", "RequestError", "SpeechResult"]


class Qwen3TTSEngine(BaseEngine):
    """A loaded Qwen3-TTS model (see module doc). Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = spec.SPEC.title
    voice_type, voice_error = VoicePrompt, VoicePromptError
    pipeline_defaults = PipelineDefaults(MAX_SEGMENT_CHARS, SEGMENT_PAUSE_S, first_chunk_s=4 / FRAME_RATE, chunk_s=12 / FRAME_RATE)

    def __init__(
        self,
        folder: Path,
        cfg: Qwen3TTSConfig,
        defaults: GenerationDefaults,
        network: Qwen3TTSNetwork,
        tokenizer,
        codec,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.folder = folder
        self.cfg = cfg
        self.defaults = defaults
        self.network = network
        self.tokenizer = tokenizer
        self.codec = codec
        self.device = device
        self.dtype = dtype
        self._graphed = None  # the CUDA decoder (static caches, captured graphs), made on first use

    @classmethod
    def load(
        cls, folder: str | Path, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None, *, precision: str | None = None
    ) -> Qwen3TTSEngine:
        """Load a model folder in the released layout (strict: a missing file or tensor is an error naming it).

        `precision` picks an opt-in mode that changes float bits: "bf16" (weights and compute in
        bfloat16), "int8" or "int4" (int8 or 4-bit weights in the talker's and code predictor's
        linear layers, on koe's CPU kernels, see `koe.runtime.quant`); None or "fp32" keeps `dtype`
        (float32 on the CPU: upstream's bits).
        """
        from koe.engines.qwen3_tts.codec import SpeechTokenizer
        from koe.engines.qwen3_tts.text.tokenizer import QwenTokenizer

        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        dev = resolve_device(device)
        numeric = precision_plan(precision, dev, resolve_dtype(dtype, dev) if precision is None else torch.float32, model="Qwen3-TTS")
        dt = numeric.dtype
        cfg = Qwen3TTSConfig.from_folder(folder)
        defaults = GenerationDefaults.from_folder(folder)
        tokenizer = QwenTokenizer.from_folder(folder)
        if not (folder / "speech_tokenizer").is_dir():
            raise FileNotFoundError(f"{folder}: missing speech_tokenizer/ (the 12 Hz codec's config and weights)")
        network = Qwen3TTSNetwork.from_folder(folder, cfg, device=dev, dtype=numeric.load_dtype)
        codec = SpeechTokenizer.from_folder(folder / "speech_tokenizer", device=dev, dtype=dt)
        kernel = apply_precision(numeric, network, [backbone(network.talker)])  # exact products and norms, or int8 / int4 and the C step
        engine = cls(folder, cfg, defaults, network, tokenizer, codec, dev, dt)
        engine._precision = numeric.mode
        engine.kernel = kernel
        engine.fast_codec = fast_codec_for(codec, numeric.mode, os.environ.get("KOE_FAST_CODEC")) if dev.type == "cpu" else None
        return engine

    _precision: str | None = None  # the opt-in mode `load` was given, if any
    kernel: str | None = (
        None  # what runs the products: int8 / int4 "koe-avx512vnni", "koe-avx2", "koe-portable", int8's "fbgemm" fallback; exact float32 on the CPU "koe-exact-bf16" / "-fp32" (torch's bits, koe.runtime.exact), None where torch's own
    )
    fast_codec: FastCodec | None = None  # int8 / int4 (or KOE_FAST_CODEC): the fast codec (codec/fast.py); None: the exact one

    @property
    def audio_codec(self):
        """The codec that turns this engine's codes into audio: the fast codec where on, else the exact one."""
        return self.fast_codec or self.codec

    @property
    def precision(self) -> str:
        """The numeric mode this engine runs in ("float32" = exact; "bfloat16", "int8", "int4" are opt-in)."""
        return self._precision if self._precision in ("int8", "int4") else str(self.dtype).removeprefix("torch.")

    cuda_graphs: bool = True  # on CUDA, decode with captured graphs (koe/engines/qwen3_tts/cuda_decode.py)

    def frames_core(self):
        """The frames generator `(talker, inputs, settings, generator, ...)`: this engine's CUDA-graph
        decoder on CUDA (unless `cuda_graphs` is off), else the eager core."""
        if self.device.type == "cuda" and self.cuda_graphs:
            if self._graphed is None:
                from koe.engines.qwen3_tts.cuda_decode import GraphedDecoder

                self._graphed = GraphedDecoder(self.network.talker)
            graphed = self._graphed
            return lambda talker, *args, **kwargs: graphed.decode_frames(*args, **kwargs)
        return decode_frames

    def release(self) -> None:
        """Drop the weights, the codec, the CUDA decoder and its graphs (`close`: the engine is unusable after)."""
        if self._graphed is not None:
            self._graphed.release()
            self._graphed = None
        self.network = self.codec = self.fast_codec = None

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
        tc = self.cfg.talker
        languages = ["auto", *sorted(lang for lang in tc.languages if lang != "auto")]
        caps = spec.capabilities(self.cfg.model_type, self.cfg.model_size, self.speakers, languages, self.sample_rate, asdict(self.defaults))
        # rows join a running batch of streams where the talker steps in C (int8 / int4 on koe's kernels, `rows.RowDecoder`)
        return replace(caps, joins_rows=RowDecoder.supports(self.network.talker))

    # -- requests ------------------------------------------------------------------------------
    def decode_settings(self, **options) -> DecodeSettings:
        """Sampling settings: the request's options over `generation_config.json` over upstream's defaults."""
        unknown = set(options) - set(SAMPLING_KEYS)
        if unknown:
            raise InvalidOption(f"unknown sampling option(s): {sorted(unknown)}; valid: {list(SAMPLING_KEYS)}", param=sorted(unknown)[0])
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
            raise InvalidOption(str(e)) from e

    def _check_language(self, language: str) -> str:
        if language is None or str(language).lower() not in self.cfg.talker.languages:
            raise UnsupportedLanguage(f"unsupported language {language!r}; supported: {self.languages}")
        return str(language)

    def _check_speaker(self, speaker: str | None) -> str | None:
        if speaker in (None, ""):
            if self.cfg.model_type == "custom_voice":
                raise UnsupportedVoice(f"this CustomVoice model needs a speaker; choose one of {self.speakers}")
            return None
        if self.cfg.model_type != "custom_voice":
            raise UnsupportedVoice(f"this {self.cfg.model_type} model has no preset speakers (speaker={speaker!r}); use a CustomVoice model")
        if speaker.lower() not in self.cfg.talker.speaker_ids:
            raise UnsupportedVoice(f"unknown speaker {speaker!r}; supported: {self.speakers}")
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
                raise EmptyText("text is empty: give at least one word to speak")
            for value, name, param in ((text, "text", "input"), (instruct, "instruct", "instructions")):
                if isinstance(value, str) and (problem := text_problem(value, name)) is not None:
                    raise RequestError(problem.message, param=param)  # the tokenizer cannot take it
            language = self._check_language(language)
            clone = self._clone_prompt(voice)
            if clone is not None and speaker:
                raise UnsupportedVoice(f"speaker={speaker!r} cannot be combined with a cloned voice; pass one or the other")
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
                raise UnsupportedVoice("a Base model speaks only in a cloned voice: pass voice=engine.prepare_voice(clip, ref_text=...)")
            return None
        if self.cfg.model_type != "base":
            raise UnsupportedVoice(f"this {self.cfg.model_type} model cannot clone a voice; use a Qwen3-TTS Base model for cloning")
        try:
            voice.model.check(self.stamp)
        except VoicePromptError as e:
            raise VoicePromptMismatch(str(e)) from e
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

    def prepare_voice(self, reference, ref_text: str | None = None, x_vector_only: bool = False, *, trim: bool = False, **prompt_options) -> VoicePrompt:
        """A reusable cloning prompt from a reference clip (path, bytes, or (samples, sample_rate)).

        ICL mode (default) needs the clip's transcript; `x_vector_only=True` uses the speaker
        embedding alone (no transcript needed; the voice is matched less closely). A
        `VoiceReference` (the contract's form) means ICL with its text, x-vector without.
        `ref_pad_seconds` (Base models' prompt option, opt-in, ICL only, at most 2): silence appended
        to the clip before it is encoded, so its last phoneme does not bleed into the speech (0.5 as
        faster-qwen3-tts); it changes the output, so 0 (upstream's way) is the default. The prompt records it.
        """
        self._check_clones()
        if not isinstance(reference, VoiceReference):  # the native form: no transcript is x-vector mode only when asked
            if not x_vector_only and not (ref_text and ref_text.strip()):
                raise UnsupportedVoice(_NEEDS_TRANSCRIPT.format(i=0))
            reference = VoiceReference(reference, None if x_vector_only else ref_text, trim=trim)
        return super().prepare_voice(reference, trim=trim, **prompt_options)

    def build_voice(self, reference: VoiceReference, ref_pad_seconds: float = 0.0) -> VoicePrompt:
        return self.prepare_voices([reference.audio], [reference.text], [reference.text is None], trim=reference.trim, ref_pad_seconds=ref_pad_seconds)[0]

    def _check_clones(self) -> None:
        if self.cfg.model_type != "base":
            raise UnsupportedVoice(
                f"this {self.cfg.model_type} model cannot clone a voice; use a Qwen3-TTS Base model (e.g. Qwen3-TTS-12Hz-0.6B-Base) for cloning"
            )

    def _ref_pad(self, value) -> float:
        if self.cfg.model_type != "base":
            raise InvalidOption(
                f"{spec.REF_PAD.name} pads a reference clip: it applies to voice cloning (Base models), not to this {self.cfg.model_type} model",
                param=spec.REF_PAD.name,
            )
        return spec.REF_PAD.check(value)

    def check_saved(self, voice: VoicePrompt, folder: str | Path) -> VoicePrompt:
        """A loaded prompt whose reference codes fit this model's codebook (else it is damaged)."""
        codebook = self.cfg.talker.code_predictor.vocab_size
        if voice.ref_code is not None and int(voice.ref_code.max()) >= codebook:
            raise VoicePromptMismatch(f"{folder}: a damaged voice prompt: ref_code holds codes over {codebook - 1}; prepare the voice again", param="voice")
        return voice

    @torch.inference_mode()
    def prepare_voices(
        self, refs: list, ref_texts: list[str | None], x_vector_only: list[bool], *, trim: bool = False, ref_pad_seconds: float = 0.0
    ) -> list[VoicePrompt]:
        """Batch form of `prepare_voice`; references with one sample rate are encoded together, as upstream does."""
        self._check_clones()
        pad = self._ref_pad(ref_pad_seconds)
        for i, (text, xvec) in enumerate(zip(ref_texts, x_vector_only, strict=True)):
            if not xvec and not (text and text.strip()):
                raise UnsupportedVoice(_NEEDS_TRANSCRIPT.format(i=i))
        audios = [reference_audio(r, trim=trim) for r in refs]
        clip_seconds = [len(a) / sr for a, sr in audios]
        # as faster-qwen3-tts: an ICL reference is padded, codes and speaker embedding alike; the x-vector alone is not
        audios = [(a if xvec else pad_reference(a, sr, pad), sr) for (a, sr), xvec in zip(audios, x_vector_only, strict=True)]
        codes: list = [None] * len(audios)
        if not all(x_vector_only):
            rates = {sr for _, sr in audios}
            if len(rates) == 1:
                codes = self.codec.encode_list([torch.from_numpy(to_codec_rate(a, sr)) for a, sr in audios])
            else:
                codes = [self.codec.encode_list([torch.from_numpy(to_codec_rate(a, sr))])[0] for a, sr in audios]
        from koe.engines.qwen3_tts.speaker import extract_speaker_embedding

        prompts = []
        for (audio, sr), seconds, code, text, xvec in zip(audios, clip_seconds, codes, ref_texts, x_vector_only, strict=True):
            embedding = extract_speaker_embedding(self.network.speaker_encoder, to_codec_rate(audio, sr))
            info = {"ref_seconds": round(seconds, 3), "ref_sample_rate": sr, **({"ref_pad_seconds": pad} if pad > 0 and not xvec else {})}
            prompts.append(
                VoicePrompt(
                    speaker_embedding=embedding.float().cpu(),
                    ref_code=None if xvec else code.cpu(),
                    ref_text=None if xvec else text,
                    x_vector_only=bool(xvec),
                    model=self.stamp,
                    info=info,
                )
            )
        return prompts

    @torch.inference_mode()
    def generate_codes(
        self,
        items: list[PromptItem],
        settings: DecodeSettings,
        *,
        non_streaming_mode: bool,
        generator: torch.Generator | None,
        budgets: list[int] | None = None,
        cancel: CancelToken | None = None,
        outcome: DecodeOutcome | None = None,
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
        wavs = self.audio_codec.decode(full)
        out = []
        for wav, r, f in zip(wavs, refs, full, strict=True):
            if r is not None:
                wav = wav[int(r.shape[0] / max(f.shape[0], 1) * wav.shape[0]) :]
            out.append(wav)
        return out

    def default_non_streaming(self) -> bool:
        """Upstream's wrapper feeds the whole text up front for CustomVoice/VoiceDesign, streams it for Base."""
        return self.cfg.model_type != "base"

    def non_streaming(self, options: dict) -> bool:
        """`non_streaming_mode`, popped from `options`: not given, the model's default; None, false (upstream
        tests the flag's truth); else it must be a bool (`InvalidOption`)."""
        if "non_streaming_mode" not in options:
            return self.default_non_streaming()
        nsm = options.pop("non_streaming_mode")
        if nsm is not None and not isinstance(nsm, bool):
            raise InvalidOption(f"non_streaming_mode={nsm!r}: must be true or false, or null (false)", param="non_streaming_mode")
        return bool(nsm)

    def _request(self, texts, language, speaker, instruct, voice, sampling) -> tuple[list[PromptItem], DecodeSettings]:
        n = len(texts)
        languages = _broadcast(language if language is not None else "auto", n, "language")
        settings = self.decode_settings(**sampling)
        items = self.prompt_items(texts, languages, _broadcast(speaker, n, "speaker"), _broadcast(instruct, n, "instruct"), _broadcast(voice, n, "voice"))
        return items, settings

    def _budget(self, seconds: float, settings: DecodeSettings) -> int:
        """Frames a segment may take: the runaway guard's seconds (or the caller's cap), within max_new_tokens."""
        return min(steps_for(seconds, FRAME_RATE), settings.max_new_tokens - 1)

    def decode_batch(self, texts, language, speaker, instruct, voice, seed, nsm, generator, max_segment_s, cancel, sampling) -> list[SpeechResult]:
        """Short texts (one segment each) as one batched decode, as upstream's wrapper decodes a batch:
        one `SpeechResult` each (codes included). `language`, `speaker`, `instruct`, `voice`: one value
        for all or one per text; `nsm`: `non_streaming_mode`; `max_segment_s`: the caller's cap, else the
        runaway guard's."""
        items, settings = self._request(texts, language, speaker, instruct, voice, sampling)
        budgets = [self._budget(pipeline.guard_seconds(t) if max_segment_s is None else max_segment_s, settings) for t in texts]
        outcome = DecodeOutcome()
        started = time.perf_counter()
        codes = self.generate_codes(items, settings, non_streaming_mode=nsm, generator=generator, budgets=budgets, cancel=cancel, outcome=outcome)
        decoded_at = time.perf_counter()
        wavs = self.decode_waveforms(codes, items)
        finished = time.perf_counter()
        results = []
        for i, (c, wav, prompt) in enumerate(zip(codes, wavs, _broadcast(voice, len(texts), "voice"), strict=True)):
            frames, truncated = int(c.shape[0]), not bool(outcome.eos[i])
            segment = {"text": texts[i], "seed": seed, "frames": frames, "truncated": truncated, **self._segment_info(frames, budgets[i])}
            meta = {
                **self.result_metadata(),
                "seed": seed,
                "frames": frames,
                "truncated": truncated,
                "frame_budget": budgets[i],
                "warnings": [truncation_warning(frames / FRAME_RATE, 0, 1)] if truncated else [],
                "segments": [segment],
                "timings": {"generate_s": decoded_at - started, "codec_s": finished - decoded_at},
                "decode_path": outcome.decode_path,
                **_voice_metadata(prompt),
            }
            results.append(SpeechResult(to_numpy(wav), self.sample_rate, meta, codes=c.cpu()))  # codes: (frames, 16) int64
        return results

    # -- the contract: the generic pipeline (`BaseEngine.synthesize`), batched ----------------------
    def synthesize_streams(self, requests: list[SynthesisRequest], admit=None) -> Iterator[tuple[int, AudioChunk | RequestError]]:
        """Streamed requests that share voice, language and options, from one batched decode (the
        first one's seed): `(request index, chunk)` pairs (see `koe.engines.pipeline.run_batch`).
        In int8 / int4 on koe's kernels rows join and leave while it runs (`admit`, `capabilities.joins_rows`)."""
        return pipeline.run_batch(self, requests, admit)

    def synthesize_batch(self, requests: list[SynthesisRequest]) -> list[list[AudioChunk]]:
        """One-shot requests that share voice, language and options (the first one's seed), as one batch."""
        first = requests[0]
        if any(len(segment_text(r.text, r.max_segment_chars or MAX_SEGMENT_CHARS)) > 1 for r in requests):
            return [list(self.synthesize(replace(r, seed=first.seed))) for r in requests]  # long texts: each through the pipeline
        c = self.check_request(first)
        options = {k: v for k, v in first.options.items() if k != "non_streaming_mode" and v is not None}
        results = self.decode_batch(
            [r.text for r in requests],
            c.language,
            c.speaker,
            c.instruct,
            c.voice,
            first.seed,
            c.non_streaming,
            seeded(first.seed, c.generator),
            first.max_segment_s,
            first.cancel,
            options,
        )
        return [[AudioChunk(r.audio, r.sample_rate, 0, True, {**r.metadata, "codes": r.codes})] for r in results]

    def check_language(self, language: str | None) -> str:
        """The language as the talker names it ("auto" where none is given)."""
        return self._check_language("auto" if language is None else language)

    def check_instruct(self, instruct: str | None) -> str | None:
        """As given: `prompt_items` drops it (with a warning) where this model ignores instructions."""
        return instruct

    def check_options(self, request: SynthesisRequest, checked: Checked) -> _Checked:
        """The sampling options, `non_streaming_mode`, `ref_pad_seconds` against the voice's padding, and
        the prompt (text, speaker, clone, instruction) as upstream's wrapper checks it."""
        options = dict(request.options or {})
        non_streaming = self.non_streaming(options)
        pad = options.pop(spec.REF_PAD.name, None)
        voice = checked.voice
        speaker, prompt = (voice, None) if isinstance(voice, str) else (None, voice)
        if pad is not None:
            _check_padding(prompt, self._ref_pad(pad))
        unknown = sorted(k for k in options if k not in SAMPLING_KEYS)
        if unknown:  # named against all of this model's options (ref_pad_seconds too, on Base models)
            raise InvalidOption(f"unknown sampling option(s): {unknown}; valid options: {self.capabilities.options.names}", param=unknown[0])
        settings = self.decode_settings(**{k: v for k, v in options.items() if v is not None})
        (item,) = self.prompt_items([request.text], [checked.language], [speaker], [request.instruct], [prompt])
        instruct = request.instruct if item.instruct_ids is not None else None  # dropped (with a warning) where ignored
        return _Checked(
            prompt, checked.language, instruct, settings, request.cancel, checked.user_cap, speaker, non_streaming, getattr(request, "generator", None)
        )  # the native API's request may carry a generator

    def speak_segment(self, segment: Segment, c: _Checked) -> Iterator[Piece]:
        """One segment: whole (the exact one-shot path) or in pieces as the talker makes frames."""
        if segment.streamed:
            for _, piece in self.speak_segments([segment], c, c.cancel):
                yield piece
            return
        items = self.prompt_items([segment.text], [c.language], [c.speaker], [c.instruct], [c.voice])
        budget = self._budget(segment.budget_s, c.settings)
        generator = seeded(segment.seed, c.generator)
        outcome = DecodeOutcome()
        started = time.perf_counter()
        (codes,) = self.generate_codes(
            items, c.settings, non_streaming_mode=c.non_streaming, generator=generator, budgets=[budget], cancel=c.cancel, outcome=outcome
        )
        decoded_at = time.perf_counter()
        (wav,) = self.decode_waveforms([codes], items)
        timings = {"generate_s": decoded_at - started, "codec_s": time.perf_counter() - decoded_at}
        n = int(codes.shape[0])
        yield Piece(
            to_numpy(wav),
            n,
            last=True,
            truncated=not bool(outcome.eos[0]),
            info=self._segment_info(n, budget),
            metadata={"codes": codes.cpu(), "decode_path": outcome.decode_path, "timings": timings, **_voice_metadata(c.voice)},
        )

    def speak_segments(self, segments: list[Segment], c: _Checked, cancel: CancelToken | None, feed: RowFeed | None = None) -> Iterator[tuple[int, Piece]]:
        """Streamed segments as one batched decode (one: `speak_segment`; several: `pipeline.run_batch`),
        each row with its own chunk sizes, frame budget and codec stream. A row that ends (end of
        speech, or its budget) gets its last piece at once; the others go on. With a `feed` and
        where rows can join (`capabilities.joins_rows`), segments the feed gives later join at the next frame
        and a row whose listener went away is dropped; jobs are numbered in the order they came."""
        if feed is not None and self.capabilities.joins_rows:
            yield from self._speak_rows(segments, c, cancel, feed)
            return
        n = len(segments)
        items = self.prompt_items([s.text for s in segments], [c.language] * n, [c.speaker] * n, [c.instruct] * n, [c.voice] * n)
        outcome = DecodeOutcome()
        with torch.inference_mode():
            inputs = build_talker_inputs(self.network.talker, self.cfg, items, c.non_streaming)
        rows = [self._row_stream(s, item, c) for s, item in zip(segments, items, strict=True)]
        frames = self.frames_core()(
            self.network.talker,
            inputs,
            c.settings,
            seeded(segments[0].seed, c.generator),
            row_limits=torch.tensor([r.budget for r in rows], device=self.device),
            cancel=cancel,
            outcome=outcome,
        )
        meta = {**({"batch_size": n} if n > 1 else {}), **_voice_metadata(c.voice)}  # and the decode path, known once it ran
        open_rows = set(range(n))
        try:
            with torch.inference_mode():
                for frame in frames:
                    alive = frame.alive.tolist()
                    for row in sorted(open_rows):
                        if not alive[row]:
                            open_rows.discard(row)
                            yield row, rows[row].last(bool(outcome.eos[row]), {**meta, "decode_path": outcome.decode_path})
                        elif (piece := rows[row].push(frame.codes[row])) is not None:
                            yield row, piece
                for row in sorted(open_rows):
                    yield row, rows[row].last(bool(outcome.eos[row]), {**meta, "decode_path": outcome.decode_path})
        finally:
            frames.close()

    def _speak_rows(self, segments: list[Segment], c: _Checked, cancel: CancelToken | None, feed: RowFeed) -> Iterator[tuple[int, Piece]]:
        """`speak_segments` on a `RowDecoder`: rows join and leave between frames."""
        decoder = RowDecoder(self.network.talker, c.settings, seeded(segments[0].seed, c.generator))
        rows: dict[int, _RowStream] = {}
        numbers = itertools.count()  # jobs in the order they came
        meta = {"decode_path": {"decode_path": "rows"}, **_voice_metadata(c.voice)}

        def start(new: list[Segment]) -> None:
            for segment in new:
                (item,) = self.prompt_items([segment.text], [c.language], [c.speaker], [c.instruct], [c.voice])
                with torch.inference_mode():
                    inputs = build_talker_inputs(self.network.talker, self.cfg, [item], c.non_streaming)
                job = next(numbers)
                rows[job] = self._row_stream(segment, item, c)
                decoder.add(job, inputs, rows[job].budget)

        start(segments)
        with torch.inference_mode():
            while True:
                if cancel is not None:
                    cancel.raise_if_cancelled()  # every listener gone
                if not len(decoder):
                    break
                step = decoder.step()
                shared = len(step)
                for frame in step:
                    row = rows[frame.key]
                    row.shared = max(row.shared, shared)
                    if frame.codes is None:
                        del rows[frame.key]
                        yield frame.key, row.last(frame.eos, {**meta, "batch_size": row.shared})
                    elif (piece := row.push(frame.codes)) is not None:
                        yield frame.key, piece
                for job in [j for j in rows if feed.gone(j)]:
                    decoder.remove(job)
                    del rows[job]
                start(feed.more())

    def _row_stream(self, segment: Segment, item: PromptItem, c: _Checked) -> _RowStream:
        chunker = Chunker.of(segment.first_chunk_s, segment.chunk_s, FRAME_RATE)
        return _RowStream(CodecStream(self.audio_codec, prefix=_icl_reference(item)), chunker, self._budget(segment.budget_s, c.settings))

    def _segment_info(self, frames: int, budget: int) -> dict:
        return segment_info(frames, budget)

    def result_metadata(self) -> dict:
        meta = {
            "model": self.cfg.model_type,
            "size": self.cfg.model_size,
            "precision": self.precision,
            "device": str(self.device),
            "codec": "exact" if self.fast_codec is None else self.fast_codec.name,
        }
        return meta if self.kernel is None else {**meta, "kernel": self.kernel}


_NEEDS_TRANSCRIPT = (
    "reference {i}: in-context cloning needs the transcript of the reference clip (ref_text). Without one, use x-vector mode "
    "(x_vector_only=True / --x-vector-only): the speaker embedding alone, which copies the voice less closely"
)


@dataclass
class _Checked(Checked):
    """A request after `check_request`: `voice` is its clone prompt, `speaker` its preset; `settings` the sampling."""

    speaker: str | None = None
    non_streaming: bool = False
    generator: torch.Generator | None = None  # the native API's, drawn from where no seed is given


def seeded(seed: int | None, generator: torch.Generator | None) -> torch.Generator | None:
    """A fresh CPU generator seeded with `seed`, else the caller's (None: torch's global one)."""
    return torch.Generator(device="cpu").manual_seed(int(seed)) if seed is not None else generator


def to_numpy(wav) -> np.ndarray:
    if isinstance(wav, torch.Tensor):
        wav = wav.detach().to(torch.float32).cpu().numpy()
    return np.asarray(wav, dtype=np.float32)


def segment_info(frames: int, budget: int) -> dict:
    """What a segment's record says besides the pipeline's: its frame budget and its seconds of audio."""
    return {"frame_budget": budget, "seconds": frames / FRAME_RATE}


class _RowStream:
    """One streamed row's output side: its codec stream, chunk schedule (in frames) and frame budget;
    `push` a frame's codes, get a piece when one is due (the codec decodes the frames held)."""

    def __init__(self, codec: CodecStream, chunker: Chunker, budget: int) -> None:
        self.codec, self.chunker, self.budget = codec, chunker, budget
        self.frames = 0
        self.shared = 1  # the most rows it shared a step with

    def push(self, codes: torch.Tensor) -> Piece | None:
        held = self.codec.pending
        self.codec.push(codes)
        self.frames += 1
        if not self.chunker.add(self.codec.pending - held):
            return None
        pending = self.codec.pending_codes()
        return Piece(to_numpy(self.codec.drain()), self.frames, metadata={"codes": pending})

    def last(self, eos: bool, metadata: dict) -> Piece:
        """Its last piece (what is pending), `truncated` unless it ended by drawing end-of-speech."""
        pending = self.codec.pending_codes()
        info = segment_info(self.frames, self.budget)
        return Piece(to_numpy(self.codec.drain()), self.frames, last=True, truncated=not eos, info=info, metadata={"codes": pending, **metadata})


def _voice_metadata(voice) -> dict:
    """What a result says about its cloned voice: the reference padding (a bit-changing option, named like `precision`)."""
    return {spec.REF_PAD.name: voice.ref_pad_seconds} if isinstance(voice, VoicePrompt) else {}


def _check_padding(prompt: VoicePrompt | None, pad: float) -> None:
    """A request's `ref_pad_seconds` must be the padding its ICL voice prompt was prepared with (no re-encoding here)."""
    if isinstance(prompt, VoicePrompt) and prompt.icl and not math.isclose(prompt.ref_pad_seconds, pad, abs_tol=1e-9):
        raise VoicePromptMismatch(
            f"{spec.REF_PAD.name}={pad:g} asks for a reference padded with {pad:g} s of silence, but this voice prompt was prepared "
            f"with {prompt.ref_pad_seconds:g} s; prepare the voice with ref_pad_seconds={pad:g} (prepare_voice(..., ref_pad_seconds={pad:g}))",
            param=spec.REF_PAD.name,
        )


def _icl_reference(item: PromptItem) -> torch.Tensor | None:
    return item.clone.ref_code if item.clone is not None and item.clone.icl else None


def _broadcast(value, n: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) == 1 and n > 1:
            return list(value) * n
        if len(value) != n:
            raise RequestError(f"batch size mismatch: {n} texts but {len(value)} values for {name}")
        return list(value)
    return [value] * n
