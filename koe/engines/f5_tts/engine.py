"""The F5-TTS engine: reference + text -> text batches -> flow-matching mel -> Vocos -> audio.

One request is one upstream `infer` call: the text is split into batches by the reference's
bytes per second (`text.split_batches`), each batch is a full ODE run continuing the reference's
mel, and the batches are joined with upstream's cross-fade. A request with `seed=N` gives
upstream's samples after `seed_everything(N)` (the batches draw their start noise in order).
Streaming sends each batch as soon as it is made (less the cross-fade tail it still owes the
next batch), in `chunk_s` pieces: the same samples as one-shot synthesis.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from koe.audio.decode import MAX_CLIP_SECONDS
from koe.engines.base import CancelToken, Capabilities, EmptyText, RequestError, SynthesisRequest, VoiceReference
from koe.engines.chunker import Chunker
from koe.engines.engine import BaseEngine, Checked
from koe.engines.f5_tts import spec
from koe.engines.f5_tts import text as front
from koe.engines.f5_tts.config import F5Config, read_config
from koe.engines.f5_tts.dit import F5Model
from koe.engines.f5_tts.reference import load_reference, normalised_reference
from koe.engines.f5_tts.sampler import FlowSettings, sample_mel
from koe.engines.f5_tts.voice import F5Voice, F5VoiceError
from koe.engines.pipeline import Piece, PipelineDefaults, Segment, steps_for
from koe.nn.vocos import Vocos, VocosConfig
from koe.runtime.device import resolve_device
from koe.runtime.precision import check as check_precision
from koe.runtime.precision import float_dtype
from koe.runtime.weights import build_from_weights

__all__ = ["Batch", "CrossFade", "F5TTSEngine", "Settings"]

MAX_SEGMENT_CHARS = 20000  # one request is one upstream call: F5-TTS batches long texts itself
MAX_MEL_FRAMES = 65536  # sample_mel's own cap on a batch's frames


@dataclass(frozen=True)
class Settings:
    """A request's F5-TTS options, with upstream's defaults filled in."""

    nfe_step: int = spec.DEFAULTS["nfe_step"]
    cfg_strength: float = spec.DEFAULTS["cfg_strength"]
    sway_sampling_coef: float | None = spec.DEFAULTS["sway_sampling_coef"]
    speed: float = spec.DEFAULTS["speed"]
    fix_duration: float | None = None
    target_rms: float = spec.DEFAULTS["target_rms"]
    cross_fade_duration: float = spec.DEFAULTS["cross_fade_duration"]

    @property
    def flow(self) -> FlowSettings:
        return FlowSettings(self.nfe_step, self.cfg_strength, self.sway_sampling_coef)


@dataclass
class Batch:
    """One text batch's result: its waveform before cross-fading and its generated mel (mels, frames)."""

    index: int
    count: int
    text: str
    wave: np.ndarray
    mel: np.ndarray
    frames: int  # generated mel frames so far, this batch included
    truncated: bool
    text_s: float  # seconds in the text front end (tokens, pinyin)
    dit_s: float  # seconds in the ODE (DiT evaluations)
    vocoder_s: float


class F5TTSEngine(BaseEngine):
    """A loaded F5-TTS model (DiT + Vocos). Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = spec.SPEC.title
    voice_type, voice_error = F5Voice, F5VoiceError
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.25, first_chunk_s=0.5, chunk_s=1.0)

    def __init__(self, folder: Path, cfg: F5Config, vocab: front.Vocab, model: F5Model, vocoder: Vocos, device: torch.device) -> None:
        self.folder = folder
        self.cfg = cfg
        self.vocab = vocab
        self.model = model
        self.vocoder = vocoder
        self.device = device
        self._reference_cache: dict = {}

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> F5TTSEngine:
        """Load a model folder (strict: a missing file or tensor is an error naming it).

        float32 by default on every device (upstream's bits on the CPU). `precision="bf16"` or a
        `dtype` of bfloat16/float16 runs the DiT in that dtype (opt-in, changes bits; the vocoder
        stays float32, as upstream keeps it); the result's metadata names it.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        dit_dtype = _dit_dtype(dtype, precision)
        if not (folder / "config.yaml").is_file():
            raise FileNotFoundError(
                f"{folder}: an F5-TTS checkpoint without config.yaml: the architecture is not in the release's files. "
                f"Write it with `koe models import {folder} --arch F5TTS_v1_Base` (or F5TTS_Base; add `--vocoder DIR` for the "
                f"Vocos folder), or get it complete with `koe models pull SWivid/F5-TTS --arch F5TTS_v1_Base`"
            )
        checkpoints = spec.checkpoint_files(folder)
        if not checkpoints:
            raise FileNotFoundError(f"{folder}: no checkpoint (model_<step>.safetensors or .pt)")
        if not (folder / "vocab.txt").is_file():
            raise FileNotFoundError(f"{folder}: missing vocab.txt (the release's token list)")
        vocos_dir = folder / "vocos"
        for name in ("config.yaml", "pytorch_model.bin"):
            if not (vocos_dir / name).is_file():
                raise FileNotFoundError(f"{folder}: missing vocos/{name} (the Vocos vocoder, {spec.VOCODER_REPO})")
        return cls.from_files(
            read_config(folder / "config.yaml"), checkpoints[:1], folder / "vocab.txt", vocos_dir, device=device, folder=folder, dtype=dit_dtype
        )

    @classmethod
    def from_files(
        cls,
        cfg: F5Config,
        checkpoints: list[Path],
        vocab_file: Path,
        vocoder_dir: Path,
        *,
        device=None,
        folder: Path | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> F5TTSEngine:
        """Build from separate files: a DiT checkpoint (EMA weights), its vocab.txt, a Vocos folder."""
        dev = resolve_device(device)
        vocab = front.Vocab.load(vocab_file)
        vocoder_dir = Path(vocoder_dir)
        model = build_from_weights(lambda: F5Model(cfg, vocab.size), [Path(p) for p in checkpoints], device=dev, rename=F5Model.checkpoint_name)
        model = model.to(dtype)  # buffers too (the text position table), as upstream's model.to(dtype)
        vocoder = build_from_weights(
            lambda: Vocos(VocosConfig.from_yaml(vocoder_dir / "config.yaml")), [vocoder_dir / "pytorch_model.bin"], device=dev, rename=Vocos.checkpoint_name
        )
        return cls(folder or Path(checkpoints[0]).parent, cfg, vocab, model.eval(), vocoder.eval(), dev)

    def release(self) -> None:
        """Drop the weights and caches (`close`: the engine is unusable after)."""
        self.model = self.vocoder = None
        self._reference_cache.clear()

    # -- what the model offers -------------------------------------------------------------
    sample_rate = spec.SAMPLE_RATE

    @property
    def precision(self) -> str:
        """The DiT's dtype ("float32" = exact; "bfloat16", "float16" are opt-in)."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities(self.cfg.name)

    # -- voices ------------------------------------------------------------------------------
    def build_voice(self, reference: VoiceReference) -> F5Voice:
        """A reusable voice from a reference clip (path, bytes or (samples, sample_rate)) and its transcript
        (`prepare_voice(clip, ref_text)`; upstream keeps ~12 s of the clip, so a longer one is cut, not refused)."""
        clip = load_reference(reference.audio, reference.text, max_seconds=MAX_CLIP_SECONDS)
        return F5Voice(clip.samples, clip.sample_rate, clip.text, info={"ref_seconds": round(len(clip.samples) / clip.sample_rate, 3), **clip.info})

    # -- requests ------------------------------------------------------------------------------
    def settings(self, options: dict | None) -> Settings:
        values = self.capabilities.options.validate(options)
        return Settings(**{**spec.DEFAULTS, **values})

    def check_options(self, request: SynthesisRequest, checked: Checked) -> Checked:
        return replace(checked, settings=self.settings(request.options))

    def _reference(self, voice: F5Voice, target_rms: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(24 kHz samples (1, n), their rms, log-mel (1, frames, mels)) for a voice at a loudness target."""
        key = (id(voice), target_rms)
        hit = self._reference_cache.get(key)
        if hit is not None and hit[0] is voice:
            return hit[1]
        from koe.audio.mel import vocos_log_mel

        audio, rms = normalised_reference(voice, target_rms)
        mel = self.cfg.mel
        ref_mel = vocos_log_mel(audio, mel.sample_rate, mel.n_fft, mel.hop_length, mel.win_length, mel.n_mels).permute(0, 2, 1)
        value = (audio.to(self.device), rms, ref_mel.to(self.device, next(self.model.parameters()).dtype))
        self._reference_cache = {key: (voice, value)}
        return value

    def batches(
        self,
        text: str,
        voice: F5Voice,
        settings: Settings,
        *,
        generator: torch.Generator | None = None,
        budget: int | None = None,
        cancel: CancelToken | None = None,
    ) -> Iterator[Batch]:
        """Upstream's `infer_process` for one text, batch by batch: each batch's waveform (float32,
        before cross-fading) and generated mel. `budget` caps the generated mel frames in all."""
        s = settings
        audio, rms, ref_mel = self._reference(voice, s.target_rms)
        texts = front.split_batches(text, front.max_batch_bytes(voice.ref_text, voice.seconds, s.speed))
        if not texts:
            raise EmptyText("text is empty: give at least one word to speak")
        n_ref = audio.shape[-1]
        ref_frames = front.reference_frames(n_ref, self.cfg.mel.hop_length)
        durations = front.share_fix_duration(s.fix_duration, texts, n_ref, s.cross_fade_duration)
        if budget is None:  # every batch's length is known now: refuse before any audio is made
            for gen_text, fix in zip(texts, durations, strict=True):
                self._check_frames(max(front.batch_frames(ref_frames, voice.ref_text, gen_text, s.speed, fix), ref_mel.shape[1] + 1), s)
        made = 0
        for i, (gen_text, fix) in enumerate(zip(texts, durations, strict=True)):
            started = time.perf_counter()
            frames = front.batch_frames(ref_frames, voice.ref_text, gen_text, s.speed, fix)
            ids = torch.tensor([self.vocab.ids(front.to_tokens(front.batch_text(voice.ref_text, gen_text)))], dtype=torch.long, device=self.device)
            text_s = time.perf_counter() - started
            truncated = False
            if budget is not None:
                left = budget - made
                if max(frames, ids.shape[1] + 1, ref_mel.shape[1] + 1) - ref_frames > left:
                    frames, truncated = ref_frames + left, True
            self._check_frames(max(frames, ids.shape[1] + 1, ref_mel.shape[1] + 1), s)
            t0 = time.perf_counter()
            mel = sample_mel(self.model.transformer, ref_mel, ids, frames, s.flow, on_step=self._cancel_check(cancel), generator=generator)
            t1 = time.perf_counter()
            generated = mel[:, ref_frames:, :].to(torch.float32)
            wave = self._vocode(generated, rms, s.target_rms)
            made += generated.shape[1]
            truncated = truncated or (budget is not None and made >= budget and i < len(texts) - 1)  # later batches dropped
            yield Batch(i, len(texts), gen_text, wave, generated[0].permute(1, 0).cpu().numpy(), made, truncated, text_s, t1 - t0, time.perf_counter() - t1)
            if truncated:
                return

    def _check_frames(self, frames: int, s: Settings) -> None:
        """`RequestError` when a batch of `frames` mel frames (reference included, as `sample_mel`
        makes it) is longer than the DiT's text position table, where upstream fails with a shape error."""
        table = self.model.transformer.text_embed.freqs_cis
        limit = table.shape[0] if table is not None else MAX_MEL_FRAMES
        if min(frames, MAX_MEL_FRAMES) <= limit:
            return
        rate = spec.MEL_FRAME_RATE
        if s.fix_duration is not None:
            param, fix = "fix_duration", "give a shorter fix_duration"
        elif s.speed != 1:
            param, fix = "speed", "raise speed"
        else:
            param, fix = "input", "split the text into shorter sentences"
        raise RequestError(
            f"F5-TTS makes at most {limit / rate:.1f} s per text batch (reference included); this one would be {frames / rate:.1f} s: {fix}", param=param
        )

    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        s = c.settings
        # F5-TTS's lengths are computed from the text, never open-ended: no runaway guard, only the
        # request's own cap (max_segment_s), so a request gets upstream's full duration
        budget = steps_for(segment.budget_s, spec.MEL_FRAME_RATE) if c.user_cap else None
        generator = None
        if segment.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(int(segment.seed))
        fade = CrossFade(int(s.cross_fade_duration * self.sample_rate))
        chunker = Chunker.of(segment.first_chunk_s, segment.chunk_s, self.sample_rate) if segment.streamed else None
        made, count, truncated, timings = 0, 0, False, {"text_s": 0.0, "dit_s": 0.0, "vocoder_s": 0.0}
        for batch in self.batches(segment.text, c.voice, s, generator=generator, budget=budget, cancel=c.cancel):
            made, count, truncated = batch.frames, batch.count, batch.truncated
            timings["text_s"] += batch.text_s
            timings["dit_s"] += batch.dit_s
            timings["vocoder_s"] += batch.vocoder_s
            ready = fade.push(batch.wave, last=batch.index == batch.count - 1 or truncated)
            if chunker is not None:
                for piece in chunker.split(ready):
                    if c.cancel is not None:
                        c.cancel.raise_if_cancelled()
                    yield Piece(piece, made)
        tail = fade.flush()
        info = {"seconds": made / spec.MEL_FRAME_RATE, "batches": count, "frame_budget": budget}
        samples = tail if segment.streamed else np.concatenate([fade.emitted_whole(), tail])
        yield Piece(samples, made, last=True, truncated=truncated, info=info, metadata={"timings": timings})

    @staticmethod
    def _cancel_check(cancel: CancelToken | None):
        return None if cancel is None else (lambda _step: cancel.raise_if_cancelled())

    @torch.inference_mode()
    def _vocode(self, mel: torch.Tensor, rms: torch.Tensor, target_rms: float) -> np.ndarray:
        wave = self.vocoder(mel.to(torch.float32).permute(0, 2, 1))
        if rms < target_rms:
            wave = wave * rms / target_rms
        return wave.squeeze().cpu().numpy().reshape(-1)

    def result_metadata(self) -> dict:
        return {"model": self.cfg.name, "arch": self.cfg.arch_family, "precision": self.precision, "device": str(self.device)}


class CrossFade:
    """Joins text batches as upstream does (linear fade over `samples`, computed in float64) while
    handing out, after each batch, what no later batch can change."""

    def __init__(self, samples: int) -> None:
        self.samples = samples
        self.held = np.zeros(0, np.float64)  # the end of the output so far, which the next batch may overlap
        self.emitted = 0
        self.kept: list[np.ndarray] = []  # for one-shot: everything emitted

    def push(self, wave: np.ndarray, last: bool) -> np.ndarray:
        """Add a batch's samples; returns the samples that are now final (float32)."""
        wave = np.asarray(wave)
        total = self.emitted + len(self.held)
        n = min(self.samples, total, len(wave)) if total and self.samples > 0 else 0
        if n > 0:
            overlap = self.held[-n:] * np.linspace(1, 0, n) + wave[:n] * np.linspace(0, 1, n)
            joined = np.concatenate([self.held[:-n], overlap, wave[n:]])
        else:
            joined = np.concatenate([self.held, wave.astype(np.float64)])
        keep = 0 if last else min(max(self.samples, 0), len(joined))
        ready, self.held = joined[: len(joined) - keep].astype(np.float32), joined[len(joined) - keep :]
        self.emitted += len(ready)
        self.kept.append(ready)
        return ready

    def flush(self) -> np.ndarray:
        tail, self.held = self.held.astype(np.float32), np.zeros(0, np.float64)
        return tail

    @staticmethod
    def join64(waves: list[np.ndarray], samples: int) -> np.ndarray:
        """Upstream's own join of several batches, dtype included: cross-faded parts are float64
        (np.linspace), so the result is float64 unless nothing was faded."""
        if samples <= 0:
            return np.concatenate(waves)
        out = waves[0]
        for wave in waves[1:]:
            n = min(samples, len(out), len(wave))
            if n <= 0:
                out = np.concatenate([out, wave])
                continue
            overlap = out[-n:] * np.linspace(1, 0, n) + wave[:n] * np.linspace(0, 1, n)
            out = np.concatenate([out[:-n], overlap, wave[n:]])
        return out

    def emitted_whole(self) -> np.ndarray:
        return np.concatenate(self.kept) if self.kept else np.zeros(0, np.float32)


def _dit_dtype(dtype, precision: str | None) -> torch.dtype:
    """The DiT's dtype from `load`'s arguments: the precision where one is given (`koe.runtime.precision`;
    F5-TTS offers fp32 and bf16), else `dtype` (float32 unless one asks for bfloat16/float16)."""
    mode = check_precision(precision, spec.PRECISIONS, "F5-TTS")
    if mode is not None:
        return torch.bfloat16 if mode == "bf16" else torch.float32
    return float_dtype(dtype, (torch.float32, torch.bfloat16, torch.float16), "F5-TTS")
