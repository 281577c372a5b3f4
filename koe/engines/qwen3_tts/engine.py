"""The Qwen3-TTS engine: what the rest of koe sees (load, capabilities, generate)."""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from koe.engines.qwen3_tts.config import GenerationDefaults, Qwen3TTSConfig
from koe.engines.qwen3_tts.generate import DecodeSettings, decode_frames
from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
from koe.engines.qwen3_tts.prompt import ClonePrompt, PromptItem, build_talker_inputs
from koe.engines.qwen3_tts.voice import VoicePrompt, VoicePromptError, model_stamp, reference_audio, to_codec_rate
from koe.runtime.device import resolve_device, resolve_dtype
from koe.runtime.sampling import SamplingConfig

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
    def load(cls, folder: str | Path, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None) -> Qwen3TTSEngine:
        """Load a model folder in the released layout (strict: a missing file or tensor is an error naming it)."""
        from koe.engines.qwen3_tts.codec import SpeechTokenizer
        from koe.text import QwenTokenizer

        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        dev = resolve_device(device)
        dt = resolve_dtype(dtype, dev)
        cfg = Qwen3TTSConfig.from_folder(folder)
        defaults = GenerationDefaults.from_folder(folder)
        tokenizer = QwenTokenizer.from_folder(folder)
        if not (folder / "speech_tokenizer").is_dir():
            raise FileNotFoundError(f"{folder}: missing speech_tokenizer/ (the 12 Hz codec's config and weights)")
        network = Qwen3TTSNetwork.from_folder(folder, cfg, device=dev, dtype=dt)
        codec = SpeechTokenizer.from_folder(folder / "speech_tokenizer", device=dev, dtype=dt)
        return cls(folder, cfg, defaults, network, tokenizer, codec, dev, dt)

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
    def generate_codes(self, items: list[PromptItem], settings: DecodeSettings, *, non_streaming_mode: bool, generator: torch.Generator | None) -> list[torch.Tensor]:
        """Run the decode core to the end; each item's frames (T_i, 16) up to its end of speech."""
        inputs = build_talker_inputs(self.network.talker, self.cfg, items, non_streaming_mode)
        frames, alive = [], []
        for frame in decode_frames(self.network.talker, inputs, settings, generator):
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
        refs = [it.clone.ref_code if it.clone is not None and it.clone.icl else None for it in items]
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
        generator: torch.Generator | None = None,
        **sampling,
    ) -> SpeechResult | list[SpeechResult]:
        """Speak one text (-> SpeechResult) or a batch (-> list). `seed=N` equals upstream after `torch.manual_seed(N)`."""
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        if not texts:
            raise RequestError("no text given")
        n = len(texts)
        languages = _broadcast(language if language is not None else "auto", n, "language")
        speakers = _broadcast(speaker, n, "speaker")
        instructs = _broadcast(instruct, n, "instruct")
        if self.cfg.model_type == "voice_design" and not any(instructs):
            log.info("VoiceDesign without a description: the model picks a voice")
        settings = self.decode_settings(**sampling)
        voices = _broadcast(voice, n, "voice")
        items = self.prompt_items(texts, languages, speakers, instructs, voices)
        if seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(int(seed))
        nsm = self.default_non_streaming() if non_streaming_mode is None else bool(non_streaming_mode)
        started = time.perf_counter()
        codes = self.generate_codes(items, settings, non_streaming_mode=nsm, generator=generator)
        decoded_at = time.perf_counter()
        wavs = self.decode_waveforms(codes, items)
        finished = time.perf_counter()
        results = []
        for i, (c, wav) in enumerate(zip(codes, wavs, strict=True)):
            meta = {
                "model": self.cfg.model_type, "size": self.cfg.model_size, "seed": seed,
                "frames": int(c.shape[0]), "precision": str(self.dtype).removeprefix("torch."), "device": str(self.device),
                "truncated": int(c.shape[0]) >= settings.max_new_tokens - 1,
                "timings": {"generate_s": decoded_at - started, "codec_s": finished - decoded_at},
            }  # fmt: skip
            results.append(SpeechResult(_to_numpy(wav), self.sample_rate, c.cpu(), meta))
        return results[0] if single else results


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
