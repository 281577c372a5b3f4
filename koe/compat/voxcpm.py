"""Drop-in for `voxcpm.VoxCPM`: code written for upstream `voxcpm` runs unchanged on koe.

Same constructor (`voxcpm_model_path`, `zipenhancer_model_path`, `enable_denoiser`, `optimize`,
`device`, `lora_config`, `lora_weights_path`: LoRA adapters as upstream adds them, see
`koe.engines.voxcpm.lora`), `from_pretrained(hf_model_id, ...)`, and
`generate(...)` / `generate_streaming(...)` with upstream's arguments and return values (a float32
numpy waveform; a generator of float32 chunks). Like upstream it draws from torch's global
generator, so `torch.manual_seed(N)` before a call gives upstream's samples. `tts_model.sample_rate`
is the output rate, as upstream's README writes files with it.

Not supported yet, and said so rather than ignored: the ZipEnhancer denoiser (`denoise=True`
fails; a model built with the denoiser enabled warns once), upstream's text normaliser
(`normalize=True` fails). `optimize` (torch.compile on CUDA) is accepted and has no
effect; upstream's warm-up call is skipped (it only draws random numbers before a user seeds).
`from_pretrained` takes a local folder, a store name or a hub id (koe's resolver: the store, the
Hugging Face cache, a download on first use).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Generator
from dataclasses import replace

import numpy as np

from koe.engines.base import RequestError
from koe.engines.voxcpm import generate as core
from koe.engines.voxcpm.engine import VoxCPMEngine
from koe.engines.voxcpm.text import normalise_text

__all__ = ["VoxCPM"]

_DENOISER = "iic/speech_zipenhancer_ans_multiloss_16k_base"


class _TTSModel:
    """What code reaches for on upstream's `tts_model`: the output `sample_rate`."""

    def __init__(self, engine: VoxCPMEngine) -> None:
        self.sample_rate = engine.sample_rate
        self.patch_size = engine.cfg.patch_size
        self.device = str(engine.device)


class VoxCPM:
    """A koe VoxCPM engine behind upstream's `VoxCPM` class."""

    def __init__(
        self,
        voxcpm_model_path: str,
        zipenhancer_model_path: str | None = _DENOISER,
        enable_denoiser: bool = True,
        optimize: bool = True,
        device: str | None = None,
        lora_config=None,
        lora_weights_path: str | None = None,
    ) -> None:
        print(f"voxcpm_model_path: {voxcpm_model_path}, zipenhancer_model_path: {zipenhancer_model_path}, enable_denoiser: {enable_denoiser}", file=sys.stderr)
        self.engine = VoxCPMEngine.load(
            voxcpm_model_path, device=None if device in (None, "auto") else device, lora_weights=lora_weights_path, lora_config=lora_config
        )
        self.tts_model = _TTSModel(self.engine)
        self.denoiser_requested = bool(enable_denoiser and zipenhancer_model_path is not None)
        if self.denoiser_requested:
            warnings.warn(
                "the ZipEnhancer denoiser is not supported by koe yet: generate(denoise=True) will fail; "
                "pass enable_denoiser=False (or load_denoiser=False) to silence this",
                stacklevel=2,
            )
        self.denoiser = None
        self.text_normalizer = None

    @classmethod
    def from_pretrained(
        cls,
        hf_model_id: str = "openbmb/VoxCPM2",
        load_denoiser: bool = True,
        zipenhancer_model_id: str = _DENOISER,
        cache_dir: str | None = None,
        local_files_only: bool = False,
        optimize: bool = True,
        device: str | None = None,
        lora_config=None,
        lora_weights_path: str | None = None,
        **kwargs,
    ) -> VoxCPM:
        """A local folder, or a hub id or store name through koe's resolver
        (`koe.service.store.resolve.model_folder`): the store, the Hugging Face cache (`cache_dir`), a
        download into the store unless `local_files_only` (or `models.download` is off)."""
        from koe.service.store.resolve import model_folder

        if not hf_model_id:
            raise ValueError("You must provide hf_model_id")
        path = str(model_folder(hf_model_id, cache_dir=cache_dir, local_files_only=local_files_only))
        return cls(path, zipenhancer_model_id if load_denoiser else None, load_denoiser, optimize, device, lora_config, lora_weights_path, **kwargs)

    def generate(self, *args, **kwargs) -> np.ndarray:
        gen = self._generate(*args, streaming=False, **kwargs)
        try:
            return next(gen)
        finally:
            gen.close()

    def generate_streaming(self, *args, **kwargs) -> Generator[np.ndarray, None, None]:
        return self._generate(*args, streaming=True, **kwargs)

    def _generate(
        self,
        text: str,
        prompt_wav_path: str | None = None,
        prompt_text: str | None = None,
        reference_wav_path: str | None = None,
        cfg_value: float = 2.0,
        inference_timesteps: int = 10,
        min_len: int = 2,
        max_len: int = 4096,
        normalize: bool = False,
        denoise: bool = False,
        retry_badcase: bool = True,
        retry_badcase_max_times: int = 3,
        retry_badcase_ratio_threshold: float = 6.0,
        streaming: bool = False,
    ) -> Generator[np.ndarray, None, None]:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("target text must be a non-empty string")
        for name, path in (("prompt_wav_path", prompt_wav_path), ("reference_wav_path", reference_wav_path)):
            if path is not None and not os.path.exists(path):
                raise FileNotFoundError(f"{name} does not exist: {path}")
        if (prompt_wav_path is None) != (prompt_text is None):
            raise ValueError("prompt_wav_path and prompt_text must both be provided or both be None")
        if reference_wav_path is not None and not self.engine.cfg.v2:
            raise ValueError("reference_wav_path is only supported with VoxCPM2 models")
        if normalize:
            raise NotImplementedError("normalize=True: upstream's text normaliser (wetext) is not supported by koe yet")
        if denoise:
            raise NotImplementedError("denoise=True: upstream's ZipEnhancer denoiser is not supported by koe yet")
        if retry_badcase and streaming:
            warnings.warn("Retry on bad cases is not supported in streaming mode, setting retry_badcase=False.", stacklevel=3)
            retry_badcase = False
        settings = core.GenerationSettings(
            cfg_value, inference_timesteps, min_len, max_len, retry_badcase, retry_badcase_max_times, retry_badcase_ratio_threshold
        )
        if retry_badcase_max_times < 1 and not streaming:
            raise ValueError("retry_badcase_max_times must be >= 1")
        voice = None
        if prompt_wav_path is not None or reference_wav_path is not None:
            try:
                voice = self.engine.make_voice(prompt_wav_path, prompt_text, reference_wav_path)
            except RequestError as e:
                raise ValueError(str(e)) from e
        seq = self.engine.sequence(normalise_text(text), voice)
        engine = self.engine
        if streaming:
            yield from core.stream(engine.model, engine.vae, seq, replace(settings, retry_badcase=False))
            return
        yield core.one_shot(engine.model, engine.vae, seq, settings).samples
