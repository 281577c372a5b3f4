"""Drop-in for upstream IndexTTS 1.5's `indextts.infer.IndexTTS`: code written for it runs unchanged on koe.

`IndexTTS(cfg_path, model_dir, use_fp16, device, use_cuda_kernel)`, `infer(audio_prompt, text,
output_path, verbose=False, max_text_tokens_per_segment=120, **generation_kwargs)` and
`infer_fast(..., max_text_tokens_per_segment=100, segments_bucket_max_size=4, ...)`, with upstream's
return values: `output_path` after writing a 16-bit WAV there, or, when `output_path` is falsy,
`(24000, int16 array (samples, 1))` (the 16-bit-scale wave truncated, as upstream's
`wav.type(torch.int16)`). Like upstream it draws from torch's global generator, so
`torch.manual_seed(N)` before a call gives upstream's samples (on the CPU, in float32, at the same
thread count), and the file's samples are upstream's file's.

`infer_fast` is upstream's on the CPU, where it batches nothing (its bucket size is 1): the segments'
codes are searched shortest segment first (so the draws fall to other segments than in `infer`),
the vocoder decodes two segments' latents at a time as one, the clip is cut to its first 50 s after
resampling, and segments hold at most 100 text tokens by default. `segments_bucket_max_size` is
accepted and, as upstream on the CPU, has no effect.

Generation keywords: `do_sample`, `top_k`, `top_p`, `temperature`, `num_beams`,
`repetition_penalty`, `length_penalty`, `max_mel_tokens` (upstream's defaults); others (which
upstream hands to transformers' `generate`) are a TypeError. The loaded voice is cached by the
`audio_prompt` given, as upstream caches its reference mel.

Bad input is a clear error before any work and no file is written (the WAV is written whole or not
at all): no clip, a missing or unreadable one (FileNotFoundError / ValueError), a clip of zeros, one
under 0.5 s, one over 50 s in `infer` (upstream would condition on all of it; `infer_fast` keeps
50 s), text with nothing to speak (empty, only punctuation, only characters the tokenizer does not
know), options out of range (`koe.engines.base.InvalidOption`, a ValueError), an output file type
libsndfile cannot write as 16-bit PCM.

`model_dir` is a local folder, a store name or a hub id (`IndexTeam/IndexTTS-1.5`, through koe's
resolver: the store, the Hugging Face cache, a download on first use once its licence, the bilibili
Model Use License, is accepted: `accept_license=True`, koe's own keyword, or `koe models pull`).
The config is the model folder's `config.yaml`; a `cfg_path` that exists must hold the same
settings. koe runs IndexTTS on the CPU in float32: `device` may be None or "cpu"; `use_fp16` and
`use_cuda_kernel` are accepted and ignored, as upstream ignores them on the CPU. IndexTTS 2 is not
supported yet. The IndexTTS family is a package of its own (`pip install -e families/indextts`),
imported when an `IndexTTS` is made.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

import soundfile as sf
import torch

__all__ = ["IndexTTS"]

SAMPLE_RATE = 24000
PCM16_MAX = 32767.0
FAST_SEGMENT_TOKENS = 100  # infer_fast's default max_text_tokens_per_segment
GENERATION = ("do_sample", "top_p", "top_k", "temperature", "length_penalty", "num_beams", "repetition_penalty", "max_mel_tokens")
_DEFAULT_CFG = "checkpoints/config.yaml"


def _family():
    """The IndexTTS family's modules (its own package, under the bilibili Model Use License)."""
    try:
        from koe_indextts import engine, model, spec
    except ImportError as e:
        if (e.name or "").split(".")[0] != "koe_indextts":
            raise
        raise ImportError(
            "koe.compat.indextts needs koe's IndexTTS family, a package of its own under the bilibili Model Use License: "
            "pip install -e families/indextts (from koe's source tree)",
            name="koe_indextts",
        ) from e
    return engine, model, spec


def _output_format(output_path: str | os.PathLike) -> str:
    """libsndfile's major format for the file name's extension (16-bit PCM must fit it)."""
    ext = Path(output_path).suffix.lower().lstrip(".")
    fmt = {"aif": "AIFF", "aifc": "AIFF"}.get(ext, ext.upper())
    if not ext or fmt not in sf.available_formats() or not sf.check_format(fmt, "PCM_16"):
        raise ValueError(f"output_path {str(output_path)!r}: give a file name ending in .wav (or another type libsndfile writes as 16-bit PCM)")
    return fmt


class IndexTTS:
    """A koe IndexTTS 1.5 engine behind upstream's `IndexTTS` class."""

    def __init__(
        self,
        cfg_path: str | os.PathLike = _DEFAULT_CFG,
        model_dir: str | os.PathLike = "checkpoints",
        use_fp16: bool = True,
        device: str | None = None,
        use_cuda_kernel: bool | None = None,
        *,
        accept_license: bool = False,
    ) -> None:
        from koe.service.store.resolve import model_folder

        engine, model, spec = _family()
        if device is not None and str(device) != "cpu":
            raise ValueError(f"device={device!r}: koe runs IndexTTS on the CPU in this version (device='cpu' or None)")
        folder = model_folder(model_dir, accept_license=accept_license)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such model folder (an IndexTTS-1.5 release folder, a store name or a hub id such as {spec.REPO_15})")
        self.engine = engine.IndexTTSEngine.load(folder)
        self._check_cfg(cfg_path, folder)
        self._model = model
        release = self.engine.model.release
        self.device, self.use_fp16, self.use_cuda_kernel, self.dtype = "cpu", False, False, None
        self.model_dir, self.cfg_path = str(folder), str(folder / "config.yaml")
        self.bpe_path = str(folder / release.bpe_model)
        self.stop_mel_token = self.engine.model.lm.cfg.stop_mel_token
        self.model_version = release.version
        self.sample_rate = SAMPLE_RATE
        self.cache_audio_prompt = None
        self.gr_progress = None  # upstream's Gradio progress hook: called as gr_progress(value, desc=...)
        self._voice: tuple[Any, bool, Any] | None = None  # (audio_prompt, cut to 50 s, prompt)

    @staticmethod
    def _check_cfg(cfg_path: str | os.PathLike, folder: Path) -> None:
        """A `cfg_path` other than the folder's `config.yaml` must hold the same settings (koe reads the folder's)."""
        import yaml
        from koe_indextts.config import read_yaml

        path = Path(cfg_path)
        if not path.is_file():
            if str(cfg_path) in (_DEFAULT_CFG, ""):
                return  # upstream's default, left as it is: the folder's config.yaml
            raise FileNotFoundError(f"cfg_path {str(cfg_path)!r}: no such file (koe reads the model folder's config.yaml; cfg_path may be left out)")
        if path.resolve() == (folder / "config.yaml").resolve():
            return
        try:
            given = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise ValueError(f"cfg_path {str(cfg_path)!r}: not valid YAML ({e})") from e
        if given != read_yaml(folder):
            raise ValueError(f"cfg_path {str(cfg_path)!r} differs from {folder / 'config.yaml'}: koe reads the model folder's config.yaml")

    # -- inference ---------------------------------------------------------------------------------

    def infer(self, audio_prompt, text: str, output_path, verbose: bool = False, max_text_tokens_per_segment: int = 120, **generation_kwargs):
        """Upstream's `infer`: each text segment in turn (search, latent, vocoder)."""
        return self._infer(audio_prompt, text, output_path, verbose, max_text_tokens_per_segment, generation_kwargs, fast=False)

    def infer_fast(
        self,
        audio_prompt,
        text: str,
        output_path,
        verbose: bool = False,
        max_text_tokens_per_segment: int = FAST_SEGMENT_TOKENS,
        segments_bucket_max_size: int = 4,
        **generation_kwargs,
    ):
        """Upstream's `infer_fast` as it runs on the CPU (the module doc says how it differs from `infer`)."""
        if isinstance(segments_bucket_max_size, bool) or not isinstance(segments_bucket_max_size, int) or segments_bucket_max_size < 1:
            raise ValueError(f"segments_bucket_max_size={segments_bucket_max_size!r}: must be a whole number >= 1 (it has no effect on the CPU)")
        return self._infer(audio_prompt, text, output_path, verbose, max_text_tokens_per_segment, generation_kwargs, fast=True)

    def _infer(self, audio_prompt, text, output_path, verbose, max_text_tokens_per_segment, generation_kwargs: dict, fast: bool):
        from koe.engines.base import EmptyText, SynthesisRequest

        fmt = _output_format(output_path) if output_path else None
        unknown = sorted(set(generation_kwargs) - set(GENERATION))
        if unknown:
            raise TypeError(f"generation keyword(s) {', '.join(unknown)} are not supported by koe's IndexTTS; it takes: {', '.join(GENERATION)}")
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise EmptyText("text is empty: give at least one word to speak", param="input")
        self._progress(0, "starting inference...")
        voice = self._prompt(audio_prompt, fast)
        options = {**generation_kwargs, "max_text_tokens_per_segment": max_text_tokens_per_segment}
        checked = self.engine.check_request(SynthesisRequest(text=text, voice=voice, options=options))
        self._progress(0.1, "text processing...")
        pieces = _family()[0].segment_ids(self.engine.text, text, checked.settings, self.engine.model.lm.cfg.max_text_tokens)
        if verbose:
            print(f">> {len(pieces)} segment(s) of {[len(p) for p in pieces]} text tokens (at most {max_text_tokens_per_segment})", file=sys.stderr)
        conditioning = self.engine._conditioning(voice)
        sampling = _family()[0].sampling_of(checked.settings)
        with torch.inference_mode():
            wavs = self._fast(pieces, conditioning, sampling) if fast else self._one_by_one(pieces, conditioning, sampling)
        wav = torch.cat(wavs, dim=1)
        self._progress(0.9, "saving audio...")
        if output_path:
            self._write(output_path, fmt, wav)
            return output_path
        return SAMPLE_RATE, wav.type(torch.int16).numpy().T

    def _one_by_one(self, pieces, conditioning, sampling) -> list[torch.Tensor]:
        wavs, warned = [], False
        for k, ids in enumerate(pieces):
            self._progress(0.2 + 0.4 * k / len(pieces), f"gpt inference {k + 1}/{len(pieces)}...")
            wav, codes = self.engine.model.segment(ids, conditioning, sampling)
            warned = warned or self._warn_cut(codes, ids, sampling)
            wavs.append(wav)
        return wavs

    def _fast(self, pieces, conditioning, sampling) -> list[torch.Tensor]:
        """Upstream's CPU `infer_fast`: every search first, shortest segment first (a stable sort;
        one segment: as it is), then the latents, then the vocoder on pairs of segments' latents."""
        from koe_indextts.beam import search
        from koe_indextts.bigvgan import to_pcm_scale

        model = self.engine.model
        order = sorted(range(len(pieces)), key=lambda k: len(pieces[k])) if len(pieces) > 1 else [0]
        codes, warned = {}, False
        for n, k in enumerate(order):
            self._progress(0.2 + 0.3 * (n + 1) / len(order), f"gpt speech inference {n + 1}/{len(order)}...")
            codes[k] = search(model.lm, conditioning.latents, pieces[k], sampling)
            warned = warned or self._warn_cut(codes[k], pieces[k], sampling)
        self._progress(0.5, "gpt latents inference...")
        latents = []
        for k in range(len(pieces)):
            kept = self._model.shrink_silence(codes[k], model.lm.cfg.stop_mel_token)
            latents.append(model.lm.latent(conditioning.latents, pieces[k], kept))
        self._progress(0.7, "bigvgan decoding...")
        wavs = []
        for j in range(0, len(latents), 2):
            wav = model.vocoder.decode(torch.cat(latents[j : j + 2], dim=1), conditioning.speaker).squeeze(1)
            wavs.append(to_pcm_scale(wav))
        return wavs

    def _warn_cut(self, codes: torch.Tensor, ids: torch.Tensor, sampling) -> bool:
        if len(codes) and int(codes[-1]) == self.stop_mel_token:
            return False
        warnings.warn(
            f"generation stopped at max_mel_tokens ({sampling.max_mel_tokens}) for a segment of {len(ids)} text tokens: "
            "lower max_text_tokens_per_segment or raise max_mel_tokens",
            RuntimeWarning,
            stacklevel=4,
        )
        return True

    # -- the parts ---------------------------------------------------------------------------------

    def _prompt(self, audio_prompt, cut: bool):
        """The voice of `audio_prompt`, kept for the next call with the same prompt (as upstream keeps its mel)."""
        if audio_prompt is None or (isinstance(audio_prompt, str | os.PathLike) and not str(audio_prompt)):
            raise ValueError("audio_prompt is needed: the path of a clip of the voice to clone (0.5 to 50 s)")
        if isinstance(audio_prompt, str | os.PathLike) and not os.path.isfile(audio_prompt):
            raise FileNotFoundError(f"audio_prompt: no such file {str(audio_prompt)!r}")
        if self._voice is not None and self._voice[1] == cut and _same(self._voice[0], audio_prompt):
            return self._voice[2]
        voice = self.engine.prepare_voice(audio_prompt, trim=cut)
        self._voice = (audio_prompt, cut, voice)
        self.cache_audio_prompt = audio_prompt
        return voice

    def _write(self, output_path, fmt: str, wav: torch.Tensor) -> None:
        """`wav` (1, n) at 16-bit scale as upstream's file holds it: /32767, clamped, 16-bit PCM; atomically."""
        from koe.runtime.files import atomic_file

        samples = (wav.detach().to(torch.float32) / PCM16_MAX).clamp_(-1.0, 1.0)[0].numpy()
        path = Path(output_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as f:
            sf.write(f, samples, SAMPLE_RATE, format=fmt, subtype="PCM_16")

    def _progress(self, value: float, desc: str) -> None:
        if self.gr_progress is not None:
            self.gr_progress(value, desc=desc)


def _same(a: Any, b: Any) -> bool:
    """The same prompt as upstream's cache compares them (`!=`), without comparing arrays element-wise."""
    if isinstance(a, str | os.PathLike) and isinstance(b, str | os.PathLike):
        return os.fspath(a) == os.fspath(b)
    return a is b
