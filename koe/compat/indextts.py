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
`use_cuda_kernel` are accepted and ignored, as upstream ignores them on the CPU. An IndexTTS-2
folder is refused with a pointer to `IndexTTS2`. The IndexTTS family is a package of its own
(`pip install -e families/indextts`), imported when an `IndexTTS` or `IndexTTS2` is made.

IndexTTS 2 (`indextts.infer_v2.IndexTTS2`): `IndexTTS2(cfg_path, model_dir, use_fp16=False,
device=None, use_cuda_kernel=None, use_deepspeed=False, use_accel=False, use_torch_compile=False,
use_qwen_emo=True, aux_paths=None)` and `infer(spk_audio_prompt, text, output_path,
emo_audio_prompt=None, emo_alpha=1.0, emo_vector=None, use_emo_text=False, emo_text=None,
use_random=False, interval_silence=200, verbose=False, max_text_tokens_per_segment=120,
stream_return=False, more_segment_before=0, **generation_kwargs)`, returning `output_path` or
`(22050, int16 array (samples, 1))`; with `stream_return=True` a generator of each segment's wave
(float32 `(1, n)` at 16-bit scale, as upstream yields it) followed by the silence after it (the
same zeros after every segment), writing `output_path` once it is exhausted. Upstream's semantics:
an `emo_vector` (the 8 weights happy, angry, sad, afraid, disgusted, melancholic, surprised, calm)
is scaled by `emo_alpha` clamped to [0, 1] and cut to 4 decimals, and replaces an
`emo_audio_prompt`; without an emotion clip the speaker's clip is the emotion's and `emo_alpha` is
1; `use_random` picks the emotion matrices' rows with Python's `random.randint` (so `random.seed`
makes them upstream's). Like upstream the instance keeps the last speaker clip's features and the
last emotion clip's (`cache_spk_audio_prompt`, `cache_emo_audio_prompt`, `cache_spk_cond`, ...:
setting `cache_spk_cond` or `cache_emo_cond` to None empties them): w2v-BERT draws its LayerDrop
numbers from torch's generator only when it reads a clip that is not cached, so after
`torch.manual_seed(N)` every call, first or later, gives upstream's samples. A clip is cached by
the value given (`"a.wav"` and `Path("a.wav")` are different clips, as upstream's `!=` has them).

`use_emo_text=True` reads the emotion from `emo_text` (or, without one, from `text`) with the
release's Qwen emotion model, as upstream's does: `qwen_emo.inference(text)` gives upstream's dict of
the eight weights, drawn from torch's generator first, before any clip is read. With
`use_qwen_emo=True` (upstream's default) the model is loaded on its first use, not at construction
(upstream loads it there); a release folder without it fails then, naming the folder; with
`use_qwen_emo=False`, `use_emo_text=True` is upstream's RuntimeError. `aux_paths` is upstream's dict (`w2v_bert` folder,
`semantic_codec` file, `campplus` file, `bigvgan` folder); left out, they are found under
`model_dir/hf_cache/` where upstream's downloader and `koe models pull` keep them. `use_fp16`,
`use_cuda_kernel`, `use_deepspeed`, `use_accel` and `use_torch_compile` are accepted and ignored
(koe runs IndexTTS 2 on the CPU in float32). Generation keywords: `top_k`, `top_p`, `temperature`,
`num_beams`, `repetition_penalty`, `length_penalty`, `max_mel_tokens` and `do_sample` (accepted and,
as upstream, without effect: release 2 always samples); others are a TypeError. Bad input is a
clear error before any work where it can be seen then, and nothing is written: no speaker clip, a
missing, unreadable, silent or under 0.5 s clip (a clip over 15 s is cut to 15 s, as upstream cuts
it), text with nothing to speak, options out of range, an `emo_vector` that is not 8 finite
numbers, an unknown generation keyword, `use_emo_text=True` without the emotion model. Where upstream's stream yields its
list of waves as the silence (`interval_silence <= 0`), koe yields an empty `(1, 0)` tensor.

IndexTTS 2.5 (`indextts.infer_v2_5.IndexTTS2`): `IndexTTS25` here, also `koe.compat.indextts_v2_5.
IndexTTS2` (upstream's module and class names: a user switching changes only the import).
`IndexTTS25(cfg_path, model_dir, use_bf16=False, device=None, use_cuda_kernel=None,
use_deepspeed=False, use_accel=False, use_torch_compile=False, use_qwen_emo=False)` (no
`aux_paths`: 2.5 reads its auxiliary models from `model_dir/hf_cache/`, as upstream's does; the GPU
flags accepted and ignored) and `infer(spk_audio_prompt, text, output_path, lang, emo_audio_prompt=None,
emo_alpha=1.0, emo_vector=None, use_emo_text=False, emo_text=None, use_random=False,
interval_silence=200, verbose=False, max_text_tokens_per_segment=120, stream_return=False,
more_segment_before=0, duration_factor=1.0, text_normalization=True, **generation_kwargs)`, with
release 2's semantics and return values above, plus: `lang` (required, as upstream; 2.5's front end
`koe_indextts.front25` runs as upstream's does, so an unknown code is read as upstream reads it),
`duration_factor` (0.5 to 2: the length regulator's target is `int(frames * 1.72 * duration_factor)`),
`text_normalization`. The caches are upstream's 2.5 ones (no semantic frames); w2v-BERT reads a new
speaker clip twice, as upstream's does, and draws twice. `more_segment_before` is accepted and, as
in upstream's 2.5, has no effect. The text is checked before any work, then cut again where
upstream cuts it (after the clips), so Japanese text's Python draws come in upstream's order.
"""

from __future__ import annotations

import math
import os
import random
import sys
import warnings
from collections.abc import Iterator, Mapping
from numbers import Real
from pathlib import Path
from typing import Any

import soundfile as sf
import torch

__all__ = ["IndexTTS", "IndexTTS2", "IndexTTS25"]

SAMPLE_RATE = 24000
SAMPLE_RATE_2 = 22050
PCM16_MAX = 32767.0
FAST_SEGMENT_TOKENS = 100  # infer_fast's default max_text_tokens_per_segment
GENERATION = ("do_sample", "top_p", "top_k", "temperature", "length_penalty", "num_beams", "repetition_penalty", "max_mel_tokens")
AUX_KEYS = ("w2v_bert", "semantic_codec", "campplus", "bigvgan")  # upstream's aux_paths
MIN_CLIP_S = 0.5
_DEFAULT_CFG = "checkpoints/config.yaml"
_DROP_INS = {"IndexTTS-1.5": "IndexTTS", "IndexTTS-2": "IndexTTS2", "IndexTTS-2.5": "IndexTTS25 (or koe.compat.indextts_v2_5.IndexTTS2)"}


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


def _release_folder(model_dir, device, accept_license: bool, variant: str, repo: str) -> Path:
    """The model folder a drop-in's `model_dir` names (a folder, a store name or a hub id), on the CPU."""
    from koe.service.store.resolve import model_folder

    if device is not None and str(device) != "cpu":
        raise ValueError(f"device={device!r}: koe runs IndexTTS on the CPU in this version (device='cpu' or None)")
    folder = model_folder(model_dir, accept_license=accept_license)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such model folder (an {variant} release folder, a store name or a hub id such as {repo})")
    return folder


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

        engine, model, spec = _family()
        folder = _release_folder(model_dir, device, accept_license, "IndexTTS-1.5", spec.REPO_15)
        self.engine = engine.IndexTTSEngine.load(folder)
        variant = self.engine.model.release.variant
        if variant in ("IndexTTS-2", "IndexTTS-2.5"):
            raise ValueError(f"{folder} holds an {variant} release: use koe.compat.indextts.{_DROP_INS[variant]} for it")
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
        _write_pcm16(output_path, fmt, wav, SAMPLE_RATE)

    def _progress(self, value: float, desc: str) -> None:
        if self.gr_progress is not None:
            self.gr_progress(value, desc=desc)


def _write_pcm16(output_path, fmt: str, wav: torch.Tensor, rate: int) -> None:
    """`wav` (1, n) at 16-bit scale as upstream's file holds it: /32767, clamped, 16-bit PCM; atomically."""
    from koe.runtime.files import atomic_file

    samples = (wav.detach().to(torch.float32) / PCM16_MAX).clamp_(-1.0, 1.0)[0].numpy()
    path = Path(output_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as f:
        sf.write(f, samples, rate, format=fmt, subtype="PCM_16")


def _same(a: Any, b: Any) -> bool:
    """The same prompt as upstream's cache compares them (`!=`), without comparing arrays element-wise."""
    if isinstance(a, str | os.PathLike) and isinstance(b, str | os.PathLike):
        return os.fspath(a) == os.fspath(b)
    return a is b


# -- IndexTTS 2 -------------------------------------------------------------------------------------

_EMO_BIAS = (0.9375, 0.875, 1.0, 1.0, 0.9375, 0.9375, 0.6875, 0.5625)  # normalize_emo_vec's damping per emotion
_EMO_MOST = 0.8  # normalize_emo_vec's cap on the weights' sum


class _QwenEmotion:
    """Upstream's `QwenEmotion` seen from a script: `inference(text)` the emotion weights the
    release's emotion model reads in `text`, a dict in upstream's order and English names; the model
    is koe's (`koe_indextts.qwen_emotion`, float16 as upstream's), loaded on its first use."""

    def __init__(self, engine) -> None:
        self._engine = engine

    def inference(self, text_input: str) -> dict[str, float]:
        _, _, spec = _family()
        return dict(zip(spec.EMOTIONS, self._engine.emotion_from_text(text_input), strict=True))


class IndexTTS2:
    """A koe IndexTTS 2 engine behind upstream's `IndexTTS2` class (the module doc says what it takes)."""

    def __init__(
        self,
        cfg_path: str | os.PathLike = _DEFAULT_CFG,
        model_dir: str | os.PathLike = "checkpoints",
        use_fp16: bool = False,
        device: str | None = None,
        use_cuda_kernel: bool | None = None,
        use_deepspeed: bool = False,
        use_accel: bool = False,
        use_torch_compile: bool = False,
        use_qwen_emo: bool = True,
        aux_paths: Mapping[str, str | os.PathLike] | None = None,
        *,
        accept_license: bool = False,
    ) -> None:

        folder = _release_folder(model_dir, device, accept_license, "IndexTTS-2", _family()[2].REPO_2)
        self.engine = _engine2(folder, _aux_paths(folder, aux_paths))
        self._setup(folder, cfg_path, use_qwen_emo)
        self.use_fp16 = False
        self.bpe_path = str(folder / self.engine.model.release.bpe_model)

    def _setup(self, folder: Path, cfg_path, use_qwen_emo: bool) -> None:
        """Upstream's attributes and per-clip caches, under its names."""
        IndexTTS._check_cfg(cfg_path, folder)
        model = self.engine.model
        self.device, self.use_cuda_kernel, self.dtype = "cpu", False, None
        self.use_accel, self.use_torch_compile = False, False
        self.qwen_emo = _QwenEmotion(self.engine) if use_qwen_emo else None  # loaded on its first use
        self.model_dir, self.cfg_path = str(folder), str(folder / "config.yaml")
        self.stop_mel_token = model.lm.cfg.stop_mel_token
        self.model_version = model.release.version
        self.emo_num = list(model.release.emo_num)
        self.sample_rate = SAMPLE_RATE_2
        self.gr_progress = None  # upstream's Gradio progress hook: called as gr_progress(value, desc=...)
        # upstream's per-instance caches, under its names (a script may empty them as it would upstream's)
        self.cache_spk_cond = None
        self.cache_s2mel_style = None
        self.cache_s2mel_prompt = None
        self.cache_spk_audio_prompt = None
        self.cache_emo_cond = None
        self.cache_emo_audio_prompt = None
        self.cache_mel = None
        self._cache_semantic = None  # the speaker's semantic frames (S_ref), kept with the rest

    # -- inference ---------------------------------------------------------------------------------

    def infer(
        self,
        spk_audio_prompt,
        text: str,
        output_path,
        emo_audio_prompt=None,
        emo_alpha: float = 1.0,
        emo_vector=None,
        use_emo_text: bool = False,
        emo_text: str | None = None,
        use_random: bool = False,
        interval_silence: float = 200,
        verbose: bool = False,
        max_text_tokens_per_segment: int = 120,
        stream_return: bool = False,
        more_segment_before: int = 0,
        **generation_kwargs,
    ):
        """Upstream's `infer`: `output_path` after writing a 16-bit WAV there, or `(22050, int16 (n, 1))`;
        with `stream_return`, a generator of each segment's wave and the silence after it."""
        job = self._job(
            spk_audio_prompt,
            text,
            output_path,
            emo_audio_prompt,
            emo_alpha,
            emo_vector,
            use_emo_text,
            emo_text,
            use_random,
            interval_silence,
            max_text_tokens_per_segment,
            more_segment_before,
            generation_kwargs,
        )
        if verbose:
            print(
                f">> {len(job['pieces'])} segment(s) of {[len(p) for p in job['pieces']]} text tokens (at most {max_text_tokens_per_segment})", file=sys.stderr
            )
        if stream_return:
            return self._stream(job)
        wavs = [wav for wav, _ in self._run(job)]
        return self._finish(job, wavs)

    def normalize_emo_vec(self, emo_vector, apply_bias: bool = True) -> list[float]:
        """Upstream's helper for user-set emotion weights: each damped by its emotion's bias (unless
        `apply_bias` is false), then all scaled down so that they sum to at most 0.8."""
        weights = [x * b for x, b in zip(emo_vector, _EMO_BIAS)] if apply_bias else list(emo_vector)
        total = sum(weights)
        return [x * (_EMO_MOST / total) for x in weights] if total > _EMO_MOST else weights

    def _stream(self, job: dict) -> Iterator[torch.Tensor]:
        wavs, silence = [], None
        for wav, gap in self._run(job):
            wavs.append(wav)
            yield wav
            silence = gap if silence is None else silence
            yield silence
        if job["output_path"]:
            self._finish(job, wavs)

    def _finish(self, job: dict, wavs: list[torch.Tensor]):
        self._progress(0.9, "saving audio...")
        gap = _silence(job["interval_silence"])
        joined = [w for k, wav in enumerate(wavs) for w in ((wav, gap) if k < len(wavs) - 1 and gap.shape[1] else (wav,))]
        wav = torch.cat(joined, dim=1)
        if job["output_path"]:
            _write_pcm16(job["output_path"], job["format"], wav, SAMPLE_RATE_2)
            return job["output_path"]
        return SAMPLE_RATE_2, wav.type(torch.int16).numpy().T

    def _run(self, job: dict) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Upstream's order: the speaker clip (unless cached), the rows of the emotion vector's mix, the
        emotion clip (unless cached), then each segment: (its wave at 16-bit scale, the silence after it)."""
        from koe_indextts.model2 import Emotion

        model = self.engine.model
        self._progress(0, "starting inference...")
        speaker = self._speaker(job["speaker"])
        rows = None
        if job["vector"] is not None and job["use_random"]:
            rows = tuple(random.randint(0, n - 1) for n in model.release.emo_num)
        features = self._emotion(job["emotion"])
        emovec = model.emotion_vector(speaker, Emotion(features, job["alpha"], job["vector"]), rows)
        self._progress(0.1, "text processing...")
        gap, warned, pieces = _silence(job["interval_silence"]), False, self._texts(job)
        for k, ids in enumerate(pieces):
            self._progress(0.2 + 0.7 * k / len(pieces), f"speech synthesis {k + 1}/{len(pieces)}...")
            wav, codes = self._segment(ids, speaker, emovec, job)
            if not warned and not (len(codes) and int(codes[-1]) == self.stop_mel_token):
                warnings.warn(
                    f"generation stopped at max_mel_tokens ({job['sampling'].max_mel_tokens}) for a segment of {len(ids)} text tokens: "
                    "lower max_text_tokens_per_segment or raise max_mel_tokens",
                    RuntimeWarning,
                    stacklevel=3,
                )
                warned = True
            yield wav, gap

    def _texts(self, job: dict) -> list[torch.Tensor]:
        """The segments' ids, where upstream's infer makes them (after the clips)."""
        return job["pieces"]

    def _segment(self, ids: torch.Tensor, speaker, emovec: torch.Tensor, job: dict) -> tuple[torch.Tensor, torch.Tensor]:
        return self.engine.model.segment(ids, speaker, emovec, job["sampling"])

    def _speaker(self, clip):
        """The speaker clip's features, from upstream's cache or (w2v-BERT's draws included) computed."""
        from koe_indextts.model2 import Speaker
        from koe_indextts.w2vbert import SPEAKER_RATE

        if self.cache_spk_cond is None or not _same_clip(self.cache_spk_audio_prompt, clip):
            audio = _read_clip(clip, SPEAKER_RATE, "spk_audio_prompt")
            s = self.engine.model.speaker((audio, SPEAKER_RATE))
            self.cache_spk_cond, self._cache_semantic, self.cache_mel, self.cache_s2mel_style, self.cache_s2mel_prompt = (
                s.features,
                s.semantic,
                s.mel,
                s.style,
                s.prompt,
            )
            self.cache_spk_audio_prompt = clip
            return s
        return Speaker(self.cache_spk_cond, self._cache_semantic, self.cache_mel, self.cache_s2mel_style, self.cache_s2mel_prompt)

    def _emotion(self, clip) -> torch.Tensor:
        from koe_indextts.w2vbert import EMOTION_RATE

        if self.cache_emo_cond is None or not _same_clip(self.cache_emo_audio_prompt, clip):
            audio = _read_clip(clip, EMOTION_RATE, "emo_audio_prompt")
            self.cache_emo_cond = self.engine.model.emotion_features((audio, EMOTION_RATE))
            self.cache_emo_audio_prompt = clip
        return self.cache_emo_cond

    # -- the request, checked before any work --------------------------------------------------------

    def _job(
        self,
        spk_audio_prompt,
        text,
        output_path,
        emo_audio_prompt,
        emo_alpha,
        emo_vector,
        use_emo_text,
        emo_text,
        use_random,
        interval_silence,
        max_text_tokens_per_segment,
        more_segment_before,
        generation_kwargs: dict,
    ) -> dict:
        from koe.engines.base import EmptyText

        fmt = _output_format(output_path) if output_path else None
        unknown = sorted(set(generation_kwargs) - set(GENERATION))
        if unknown:
            raise TypeError(f"generation keyword(s) {', '.join(unknown)} are not supported by koe's IndexTTS 2; it takes: {', '.join(GENERATION)}")
        if use_emo_text:
            if self.qwen_emo is None:
                raise RuntimeError("use_emo_text=True needs QwenEmotion, but it was not loaded (use_qwen_emo=False): make the instance with use_qwen_emo=True")
            if emo_text is not None and not isinstance(emo_text, str):
                raise TypeError(f"emo_text must be a string (the text to read the emotion from) or None, got {type(emo_text).__name__}")
        _needed_clip(spk_audio_prompt, "spk_audio_prompt", "the path of a clip of the voice to clone")
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise EmptyText("text is empty: give at least one word to speak", param="input")
        if not _real(emo_alpha):
            raise ValueError(f"emo_alpha={emo_alpha!r}: must be a number (the emotion's strength, 0 to 1)")
        if not _real(interval_silence):
            raise ValueError(f"interval_silence={interval_silence!r}: must be a number of milliseconds")
        if isinstance(more_segment_before, bool) or not isinstance(more_segment_before, int) or more_segment_before < 0:
            raise ValueError(f"more_segment_before={more_segment_before!r}: must be a whole number >= 0 (text tokens before segments may grow)")
        vector = _emotion_weights(emo_vector)
        alpha = float(emo_alpha)
        settings = self._settings(generation_kwargs, max_text_tokens_per_segment)
        pieces = self._pieces(text, settings, more_segment_before)
        if use_emo_text:  # upstream reads it first, before any clip: its draws come before w2v-BERT's
            vector = tuple(self.qwen_emo.inference(text if emo_text is None else emo_text).values())
        if vector is not None:
            scale = max(0.0, min(1.0, alpha))
            if scale != 1.0:
                vector = tuple(int(x * scale * 10000) / 10000 for x in vector)
            emo_audio_prompt = None  # a vector replaces the emotion clip
        if emo_audio_prompt is None or (isinstance(emo_audio_prompt, str | os.PathLike) and not str(emo_audio_prompt)):
            emo_audio_prompt, alpha = spk_audio_prompt, 1.0
        else:
            _needed_clip(emo_audio_prompt, "emo_audio_prompt", "the path of a clip with the emotion")
        return {
            "speaker": spk_audio_prompt,
            "emotion": emo_audio_prompt,
            "alpha": alpha,
            "vector": vector,
            "use_random": bool(use_random),
            "interval_silence": float(interval_silence),
            "pieces": pieces,
            "sampling": _family()[0].sampling_of(settings),
            "output_path": output_path,
            "format": fmt,
        }

    def _settings(self, generation_kwargs: dict, max_text_tokens_per_segment) -> dict:
        """The generation settings, checked as koe's engine checks its options (release 2 always samples)."""
        from koe.engines.base import InvalidOption

        _, _, spec = _family()
        given = {k: v for k, v in generation_kwargs.items() if k != "do_sample"}
        given = self.engine.capabilities.options.validate({**given, "max_text_tokens_per_segment": max_text_tokens_per_segment})
        settings = {**spec.DEFAULTS_2, **given, "do_sample": True}
        most = self.engine.model.lm.cfg.max_mel_tokens
        if "max_mel_tokens" not in given:
            settings["max_mel_tokens"] = min(settings["max_mel_tokens"], most)
        elif settings["max_mel_tokens"] > most:
            raise InvalidOption(
                f"max_mel_tokens={settings['max_mel_tokens']}: this model's GPT has positions for at most {most} mel codes a segment", param="max_mel_tokens"
            )
        return settings

    def _pieces(self, text: str, settings: dict, more_segment_before: int) -> list[torch.Tensor]:
        """The text's segments as upstream cuts them (`more_segment_before`: its quick first segments)."""
        from koe_indextts.text_tokenizer import TextError

        from koe.engines.base import EmptyText, InvalidOption, RequestError

        tokenizer, limit = self.engine.text, int(settings["max_text_tokens_per_segment"])
        try:
            segments = tokenizer.segments(text, limit, more_segment_before)
        except TextError as e:
            raise RequestError(str(e), param="input") from e
        if not segments or not any(ch.isalnum() for ids in segments for piece in tokenizer.pieces(ids) for ch in piece):
            raise EmptyText(f"the text holds nothing to speak (only punctuation or symbols): {text[:40]!r}")
        most = self.engine.model.lm.cfg.max_text_tokens
        longest = max(len(ids) for ids in segments)
        if longest > most:
            raise InvalidOption(
                f"max_text_tokens_per_segment={limit}: a segment of {longest} text tokens is more than this model's GPT takes ({most})",
                param="max_text_tokens_per_segment",
            )
        return [torch.tensor(ids, dtype=torch.int32) for ids in segments]

    def _progress(self, value: float, desc: str) -> None:
        if self.gr_progress is not None:
            self.gr_progress(value, desc=desc)


class IndexTTS25(IndexTTS2):
    """A koe IndexTTS 2.5 engine behind upstream's `infer_v2_5.IndexTTS2` class (also importable under
    upstream's name as `koe.compat.indextts_v2_5.IndexTTS2`; the module doc says what it takes)."""

    def __init__(
        self,
        cfg_path: str | os.PathLike = _DEFAULT_CFG,
        model_dir: str | os.PathLike = "checkpoints",
        use_bf16: bool = False,
        device: str | None = None,
        use_cuda_kernel: bool | None = None,
        use_deepspeed: bool = False,
        use_accel: bool = False,
        use_torch_compile: bool = False,
        use_qwen_emo: bool = False,
        *,
        accept_license: bool = False,
    ) -> None:
        engine, _, spec = _family()
        folder = _release_folder(model_dir, device, accept_license, "IndexTTS-2.5", spec.REPO_25)
        self.engine = engine.IndexTTSEngine.load(folder)
        variant = self.engine.model.release.variant
        if variant != "IndexTTS-2.5":
            raise ValueError(f"{folder} holds an {variant} release: use koe.compat.indextts.{_DROP_INS.get(variant, 'IndexTTS')} for it")
        self._setup(folder, cfg_path, use_qwen_emo)
        self.use_bf16 = False

    def infer(
        self,
        spk_audio_prompt,
        text: str,
        output_path,
        lang: str,
        emo_audio_prompt=None,
        emo_alpha: float = 1.0,
        emo_vector=None,
        use_emo_text: bool = False,
        emo_text: str | None = None,
        use_random: bool = False,
        interval_silence: float = 200,
        verbose: bool = False,
        max_text_tokens_per_segment: int = 120,
        stream_return: bool = False,
        more_segment_before: int = 0,
        duration_factor: float = 1.0,
        text_normalization: bool = True,
        **generation_kwargs,
    ):
        """Upstream 2.5's `infer`: `output_path` after writing a 16-bit WAV there, or `(22050, int16 (n, 1))`;
        with `stream_return`, a generator of each segment's wave and the silence after it."""
        from koe.engines.base import InvalidOption

        if not isinstance(lang, str) or not lang.strip():
            raise ValueError(f"lang={lang!r}: give the text's language code (zh, en, ja, es, ar; zhen for Chinese mixed with English)")
        if not isinstance(text_normalization, bool):
            raise ValueError(f"text_normalization={text_normalization!r}: must be True or False")
        option = self.engine.capabilities.options.get("duration_factor")
        try:
            duration = option.check(duration_factor)
        except InvalidOption as e:
            raise InvalidOption(f"{e} (the speech's length against the model's own)", param="duration_factor") from e
        self._text_call = {"lang": lang, "normalize": text_normalization, "duration": duration}
        return super().infer(
            spk_audio_prompt,
            text,
            output_path,
            emo_audio_prompt,
            emo_alpha,
            emo_vector,
            use_emo_text,
            emo_text,
            use_random,
            interval_silence,
            verbose,
            max_text_tokens_per_segment,
            stream_return,
            more_segment_before,
            **generation_kwargs,
        )

    # -- what 2.5 does its own way ------------------------------------------------------------------
    def _pieces(self, text: str, settings: dict, more_segment_before: int) -> list[torch.Tensor]:
        """The text's segments, checked before any work (upstream's 2.5 makes them after reading the
        clips: `_texts` makes them again there, so that its Python draws for Japanese come in its order)."""
        state = random.getstate()
        try:
            pieces = self._front(text, int(settings["max_text_tokens_per_segment"]))
        finally:
            random.setstate(state)
        self._text_call |= {"text": text, "limit": int(settings["max_text_tokens_per_segment"])}
        return pieces

    def _front(self, text: str, limit: int) -> list[torch.Tensor]:
        """2.5's front end as upstream runs it (`strict=False`: an unknown language is `common`, as upstream reads it)."""
        call = self._text_call
        pieces, _ = self.engine.model.text_segments(text, call["lang"], limit, call["normalize"], strict=False)
        return pieces

    def _texts(self, job: dict) -> list[torch.Tensor]:
        call = self._text_call
        job["lang"], job["duration"] = call["lang"], call["duration"]
        return self._front(call["text"], call["limit"])

    def _segment(self, ids: torch.Tensor, speaker, emovec: torch.Tensor, job: dict) -> tuple[torch.Tensor, torch.Tensor]:
        from koe_indextts.text25 import language_id

        return self.engine.model.segment(ids, language_id(job["lang"]), speaker, emovec, job["sampling"], job["duration"])

    def _speaker(self, clip):
        """The speaker clip's features, from upstream's cache or computed: w2v-BERT runs twice on it in
        upstream's 2.5 (`spk_cond_emb`, then the unused `S_ref`), so its draws are made twice."""
        from koe_indextts.model25 import Speaker25
        from koe_indextts.w2vbert import SPEAKER_RATE

        if self.cache_spk_cond is None or not _same_clip(self.cache_spk_audio_prompt, clip):
            audio = _read_clip(clip, SPEAKER_RATE, "spk_audio_prompt")
            model = self.engine.model
            s = model.speaker((audio, SPEAKER_RATE))
            for _ in range(model.w2v_layers):  # the second run's LayerDrop draws (S_ref)
                torch.rand([])
            self.cache_spk_cond, self.cache_mel, self.cache_s2mel_style, self.cache_s2mel_prompt = s.features, s.mel, s.style, s.prompt
            self.cache_spk_audio_prompt = clip
            return s
        return Speaker25(self.cache_spk_cond, self.cache_mel, self.cache_s2mel_style, self.cache_s2mel_prompt)


def _real(x: Any) -> bool:
    return isinstance(x, Real) and not isinstance(x, bool) and math.isfinite(float(x))


def _emotion_weights(emo_vector) -> tuple[float, ...] | None:
    """Upstream's `emo_vector`, as Python floats: 8 finite numbers (or None)."""
    if emo_vector is None:
        return None
    if hasattr(emo_vector, "tolist"):  # a numpy array or a tensor
        emo_vector = emo_vector.tolist()
    if isinstance(emo_vector, str | bytes) or not hasattr(emo_vector, "__len__") or len(emo_vector) != 8 or not all(_real(x) for x in emo_vector):
        raise ValueError(f"emo_vector={emo_vector!r}: give 8 numbers, the weights of happy, angry, sad, afraid, disgusted, melancholic, surprised, calm")
    return tuple(float(x) for x in emo_vector)


def _needed_clip(clip, name: str, what: str) -> None:
    if clip is None or (isinstance(clip, str | os.PathLike) and not str(clip)):
        raise ValueError(f"{name} is needed: {what}")
    if isinstance(clip, str | os.PathLike) and not os.path.isfile(clip):
        raise FileNotFoundError(f"{name}: no such file {str(clip)!r}")


def _read_clip(clip, rate: int, name: str):
    """A clip as upstream reads it (mono at `rate`, 15 s at most), refused when unreadable, silent or short."""
    from koe_indextts.w2vbert import load_clip

    from koe.audio.errors import AudioError
    from koe.engines.base import UnsupportedVoice

    try:
        audio = load_clip(clip, rate)[0].numpy()
    except AudioError as e:
        raise UnsupportedVoice(f"{name} cannot be used: {e}") from e
    if audio.shape[0] < MIN_CLIP_S * rate:
        raise UnsupportedVoice(f"{name} is {audio.shape[0] / rate:.2f} s long; IndexTTS 2 reads a voice from at least {MIN_CLIP_S:g} s")
    return audio


def _same_clip(cached: Any, given: Any) -> bool:
    """Upstream's cache test (`!=`): paths and bytes by value (a str and a Path differ), anything else by identity."""
    if isinstance(cached, str | bytes | os.PathLike) and isinstance(given, str | bytes | os.PathLike):
        return cached == given
    return cached is given


def _silence(interval_silence: float) -> torch.Tensor:
    """The zeros between two segments (none for `interval_silence` <= 0)."""
    return torch.zeros(1, int(SAMPLE_RATE_2 * interval_silence / 1000.0) if interval_silence > 0 else 0)


def _aux_paths(folder: Path, aux_paths) -> dict[str, Path] | None:
    """Upstream's `aux_paths` checked: None where they are the folder's own (under `hf_cache/`)."""
    from koe_indextts.config import aux_paths as aux_paths_of

    if aux_paths is None:
        return None
    if not isinstance(aux_paths, Mapping):
        raise TypeError(
            f"aux_paths must be a dict of paths ({', '.join(AUX_KEYS)}), as upstream's ensure_models_available gives; got {type(aux_paths).__name__}"
        )
    lacking = [k for k in AUX_KEYS if not aux_paths.get(k)]
    if lacking:
        raise ValueError(
            f"aux_paths lacks {', '.join(lacking)}: it names the w2v_bert folder, the semantic_codec file, the campplus file and the bigvgan folder"
        )
    paths = {k: Path(aux_paths[k]) for k in AUX_KEYS}
    inside = {"w2v_bert": ("config.json", "preprocessor_config.json", "model.safetensors"), "bigvgan": ("config.json", "bigvgan_generator.pt")}
    for key, path in paths.items():
        gone = [str(f) for f in ([path / name for name in inside.get(key, ())] or [path]) if not f.is_file()]
        if gone:
            raise FileNotFoundError(f"aux_paths[{key!r}]: no {', '.join(gone)}")
    own = aux_paths_of(folder)
    if all(own[k].exists() and os.path.samefile(own[k], paths[k]) for k in AUX_KEYS):
        return None
    return paths


def _engine2(folder: Path, aux: dict[str, Path] | None):
    """An IndexTTS2Engine for a release 2 folder, its auxiliary models from `aux` (None: its `hf_cache/`)."""
    engine, _, spec = _family()
    from koe_indextts.engine2 import IndexTTS2Engine

    if aux is None:
        loaded = engine.IndexTTSEngine.load(folder)
        variant = loaded.model.release.variant
        if variant != "IndexTTS-2":
            raise ValueError(f"{folder} holds an {variant} release: use koe.compat.indextts.{_DROP_INS.get(variant, 'IndexTTS')} for it")
        return loaded
    description = spec.SPEC.describe(folder)
    if description.info.size != "2":
        variant = description.info.variant
        raise ValueError(f"{folder} holds an {variant} release: use koe.compat.indextts.{_DROP_INS.get(variant, 'IndexTTS')} for it")
    own = [f for f in description.missing if not f.startswith("hf_cache/")]
    if own:
        raise FileNotFoundError(f"{folder}: missing {', '.join(own)} (a release folder has them: koe models pull {spec.REPO_2})")
    return IndexTTS2Engine.load(folder, torch.device("cpu"), aux)
