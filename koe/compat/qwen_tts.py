"""Drop-in for `qwen_tts.Qwen3TTSModel`: code written for upstream `qwen-tts` runs unchanged on koe.

Same public surface (`from_pretrained`, `generate_custom_voice`, `generate_voice_design`,
`generate_voice_clone`, `create_voice_clone_prompt`, `get_supported_speakers`,
`get_supported_languages`), same arguments, same return values, and the same audio: draws come
from torch's global generator, so `torch.manual_seed(N)` before a call gives upstream's samples.
Upstream's validation messages and quirks are kept (for example the 0.6B CustomVoice model drops
instructions silently). `last_codes` holds the codec frames of the last call (koe's addition).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
from koe.engines.qwen3_tts.prompt import PromptItem
from koe.engines.qwen3_tts.voice import VoicePrompt  # koe's saved Qwen3-TTS prompt: VoicePrompt.load(folder) reads one back


@dataclass
class VoiceClonePromptItem:
    """Upstream's per-sample voice-clone prompt (same fields)."""

    ref_code: torch.Tensor | None
    ref_spk_embedding: torch.Tensor
    x_vector_only_mode: bool
    icl_mode: bool
    ref_text: str | None = None


def _as_list(x: Any) -> list:
    return x if isinstance(x, list) else [x]


class Qwen3TTSModel:
    """A koe engine behind upstream's wrapper API."""

    def __init__(self, engine: Qwen3TTSEngine) -> None:
        self.engine = engine
        self.model = engine
        self.device = engine.device
        self.generate_defaults = dict(engine.defaults.__dict__)
        self.last_codes: list[torch.Tensor] = []

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str, **kwargs) -> Qwen3TTSModel:
        """Load a model folder, or a hub id ("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice") or store name
        through koe's resolver (`koe.service.store.resolve.model_folder`): the store, the Hugging Face
        cache (upstream's `cache_dir=` is read), a download unless `local_files_only=True`.
        Accepts upstream's `device_map` and `dtype`/`torch_dtype`; other transformers loading
        options (e.g. `attn_implementation`) are accepted and ignored."""
        from koe.service.store.resolve import model_folder

        device = kwargs.get("device_map") or kwargs.get("device")
        if isinstance(device, dict):
            device = next(iter(device.values()), None)
        dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
        folder = model_folder(pretrained_model_name_or_path, cache_dir=kwargs.get("cache_dir"), local_files_only=bool(kwargs.get("local_files_only")))
        return cls(Qwen3TTSEngine.load(folder, device=device, dtype=dtype))

    # -- upstream's helpers ------------------------------------------------------------------
    def get_supported_speakers(self) -> list[str] | None:
        return sorted(self.engine.cfg.talker.speaker_ids)

    def get_supported_languages(self) -> list[str] | None:
        return sorted(self.engine.cfg.talker.languages)

    def _check_type(self, wanted: str, method: str) -> None:
        cfg = self.engine.cfg
        if cfg.model_type != wanted:
            raise ValueError(
                f"model with \ntokenizer_type: {cfg.tokenizer_type}\ntts_model_size: {cfg.model_size}\n"
                f"tts_model_type: {cfg.model_type}\ndoes not support {method}, Please check Model Card or Readme for more details."
            )

    def _validate(self, languages: list, speakers: list | None = None) -> None:
        supported = set(self.get_supported_languages())
        bad = [lang for lang in languages if lang is None or str(lang).lower() not in supported]
        if bad:
            raise ValueError(f"Unsupported languages: {bad}. Supported: {sorted(supported)}")
        if speakers is not None:
            known = set(self.get_supported_speakers())
            bad = [s for s in speakers if s not in (None, "") and str(s).lower() not in known]
            if bad:
                raise ValueError(f"Unsupported speakers: {bad}. Supported: {sorted(known)}")

    def _batch(self, texts: list, **values: Any) -> dict[str, list]:
        out = {}
        for name, value in values.items():
            out[name] = value if len(value) != 1 or len(texts) == 1 else value * len(texts)
        lengths = {name: len(v) for name, v in out.items()}
        if any(n != len(texts) for n in lengths.values()):
            detail = ", ".join(f"{k}={v}" for k, v in lengths.items())
            raise ValueError(f"Batch size mismatch: text={len(texts)}, {detail}")
        return out

    def _languages(self, language, n: int) -> list:
        if isinstance(language, list):
            return language
        return [language if language is not None else "Auto"] * n

    def _run(self, items: list[PromptItem], non_streaming_mode: bool, kwargs: dict) -> tuple[list[np.ndarray], int]:
        options = {k: v for k, v in kwargs.items() if k in self.generate_defaults}
        settings = self.engine.decode_settings(**options)
        codes = self.engine.generate_codes(items, settings, non_streaming_mode=non_streaming_mode, generator=None)
        self.last_codes = [c.cpu() for c in codes]
        wavs = self.engine.decode_waveforms(codes, items)
        return [w.detach().float().cpu().numpy() for w in wavs], self.engine.sample_rate

    def _ids(self, text: str) -> torch.Tensor:
        return self.engine._ids(text)

    def _items(self, texts, languages, speakers, instructs) -> list[PromptItem]:
        items = []
        for text, language, speaker, instruct in zip(texts, languages, speakers, instructs):
            instruct_ids = self._ids(f"<|im_start|>user\n{instruct}<|im_end|>\n") if instruct not in (None, "") else None
            ids = self._ids(f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n")
            items.append(PromptItem(ids, language, speaker if speaker not in (None, "") else None, instruct_ids))
        return items

    # -- generation ------------------------------------------------------------------------------
    @torch.no_grad()
    def generate_custom_voice(self, text, speaker, language=None, instruct=None, non_streaming_mode: bool = True, **kwargs):
        """Speak with a preset speaker (CustomVoice models); returns (wavs, sample_rate)."""
        self._check_type("custom_voice", "generate_custom_voice")
        texts = _as_list(text)
        if self.engine.cfg.drops_instruct:
            instruct = None
        instructs = instruct if isinstance(instruct, list) else [instruct if instruct is not None else ""] * len(texts)
        b = self._batch(texts, language=self._languages(language, len(texts)), speaker=_as_list(speaker), instruct=instructs)
        self._validate(b["language"], b["speaker"])
        return self._run(self._items(texts, b["language"], b["speaker"], b["instruct"]), non_streaming_mode, kwargs)

    @torch.no_grad()
    def generate_voice_design(self, text, instruct, language=None, non_streaming_mode: bool = True, **kwargs):
        """Speak in a voice described by `instruct` (VoiceDesign models); returns (wavs, sample_rate)."""
        self._check_type("voice_design", "generate_voice_design")
        texts = _as_list(text)
        b = self._batch(texts, language=self._languages(language, len(texts)), instruct=_as_list(instruct))
        self._validate(b["language"])
        return self._run(self._items(texts, b["language"], [None] * len(texts), b["instruct"]), non_streaming_mode, kwargs)

    # -- voice cloning (Base models) -------------------------------------------------------------
    @torch.inference_mode()
    def create_voice_clone_prompt(self, ref_audio, ref_text=None, x_vector_only_mode=False) -> list[VoiceClonePromptItem]:
        """Upstream's prompt items (ref_code, ref_spk_embedding, modes, ref_text) from reference audio."""
        self._check_type("base", "create_voice_clone_prompt")
        refs = _as_list(ref_audio)
        texts = ref_text if isinstance(ref_text, list) else [ref_text] * len(refs)
        modes = x_vector_only_mode if isinstance(x_vector_only_mode, list) else [x_vector_only_mode] * len(refs)
        if len(texts) != len(refs) or len(modes) != len(refs):
            raise ValueError(f"Batch size mismatch: ref_audio={len(refs)}, ref_text={len(texts)}, x_vector_only_mode={len(modes)}")
        for i, (text, xvec) in enumerate(zip(texts, modes)):
            if not xvec and (text is None or text == ""):
                raise ValueError(f"ref_text is required when x_vector_only_mode=False (ICL mode). Bad index={i}")
        prompts = self.engine.prepare_voices(refs, texts, [bool(m) for m in modes])
        return [
            VoiceClonePromptItem(p.ref_code, p.speaker_embedding.to(self.engine.dtype), p.x_vector_only, not p.x_vector_only, t) for p, t in zip(prompts, texts)
        ]

    def _to_voice_prompts(self, items: list[VoiceClonePromptItem]):
        return [VoicePrompt(it.ref_spk_embedding, it.ref_code if it.icl_mode else None, it.ref_text, not it.icl_mode, self.engine.stamp) for it in items]

    @torch.no_grad()
    def generate_voice_clone(
        self, text, language=None, ref_audio=None, ref_text=None, x_vector_only_mode=False, voice_clone_prompt=None, non_streaming_mode: bool = False, **kwargs
    ):
        """Speak in a cloned voice (Base models); returns (wavs, sample_rate)."""
        self._check_type("base", "generate_voice_clone")
        texts = _as_list(text)
        languages = self._batch(texts, language=self._languages(language, len(texts)))["language"]
        self._validate(languages)
        if voice_clone_prompt is None:
            if ref_audio is None:
                raise ValueError("Either `voice_clone_prompt` or `ref_audio` must be provided.")
            items = self.create_voice_clone_prompt(ref_audio=ref_audio, ref_text=ref_text, x_vector_only_mode=x_vector_only_mode)
        elif isinstance(voice_clone_prompt, dict):
            p = voice_clone_prompt
            items = [
                VoiceClonePromptItem(c, e, x, i, None) for c, e, x, i in zip(p["ref_code"], p["ref_spk_embedding"], p["x_vector_only_mode"], p["icl_mode"])
            ]
            if any(it.icl_mode for it in items):
                raise ValueError("an ICL voice_clone_prompt dict carries no ref_text; pass the list of VoiceClonePromptItem instead")
        else:
            items = list(voice_clone_prompt)
        if len(items) == 1 and len(texts) > 1:
            items = items * len(texts)
        if len(items) != len(texts):
            raise ValueError(f"Batch size mismatch: prompt={len(items)}, text={len(texts)}")
        voices = self._to_voice_prompts(items)
        clones = [self.engine._clone_prompt(v) for v in voices]
        prompt_items = [
            PromptItem(self._ids(f"<|im_start|>assistant\n{t}<|im_end|>\n<|im_start|>assistant\n"), lang, None, None, c)
            for t, lang, c in zip(texts, languages, clones)
        ]
        options = {k: v for k, v in kwargs.items() if k in self.generate_defaults}
        settings = self.engine.decode_settings(**options)
        codes = self.engine.generate_codes(prompt_items, settings, non_streaming_mode=non_streaming_mode, generator=None)
        self.last_codes = [c.cpu() for c in codes]
        wavs = self.engine.decode_waveforms(codes, prompt_items)
        return [w.detach().float().cpu().numpy() for w in wavs], self.engine.sample_rate
