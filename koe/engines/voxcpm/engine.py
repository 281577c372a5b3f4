"""The VoxCPM engine: text (+ a voice: continuation prompt and/or VoxCPM2's reference) -> the
autoregressive patch loop -> the AudioVAE -> audio.

One request is one upstream `generate` call (`koe.engines.voxcpm.generate` has the details): a
request with `seed=N` gives upstream's samples after `torch.manual_seed(N)`, one-shot through
upstream's one-shot decode, streamed through upstream's streaming decode (which is not the
one-shot audio: `Capabilities.stream_is_one_shot` is False).

Voices through the contract: a clip with its transcript is a continuation prompt (VoxCPM2 also
takes the same clip as its structural reference: upstream's "ultimate cloning"); a clip alone is
VoxCPM2's reference ("controllable cloning"); no voice speaks in the model's own voice, or on
VoxCPM2 in a voice described by `instruct` (upstream's `(description)text` design prompt, which
also steers a clone: upstream's own CLI allows it only with a reference-only clone, its Python API
with any voice, as koe does). `make_voice` takes upstream's three arguments directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from koe.audio.decode import MAX_CLIP_SECONDS
from koe.audio.errors import AudioError
from koe.engines.base import Capabilities, InvalidOption, RequestError, SynthesisRequest, UnsupportedVoice, VoicePromptMismatch, VoiceReference
from koe.engines.chunker import Chunker
from koe.engines.engine import BaseEngine, Checked
from koe.engines.pipeline import Piece, PipelineDefaults, Segment, steps_for
from koe.engines.voxcpm import generate as core
from koe.engines.voxcpm import lora, spec
from koe.engines.voxcpm.audio import load_prompt_audio
from koe.engines.voxcpm.audio_vae import AudioVAE, VAEConfig
from koe.engines.voxcpm.config import VoxCPMConfig, read_config
from koe.engines.voxcpm.model import VoxCPMModel
from koe.engines.voxcpm.text import TextTokenizer, normalise_text
from koe.engines.voxcpm.voice import VoxCPMVoice, VoxCPMVoiceError
from koe.runtime.device import resolve_device
from koe.runtime.precision import apply as apply_precision
from koe.runtime.precision import check as check_precision
from koe.runtime.precision import float_dtype
from koe.runtime.precision import plan as precision_plan
from koe.runtime.weights import build_from_weights

__all__ = ["VoxCPMEngine"]

MAX_SEGMENT_CHARS = 20000  # one request is one upstream call
FEATURE_CACHE = 16  # encoded clips kept (a server speaking with many library voices re-encodes the least recent)


@dataclass
class _Checked(Checked):
    control: str | None = None  # VoxCPM2's "(description)" in front of the text (the checked instruction)


def design_text(text: str, control: str | None) -> str:
    """upstream's CLI: `(control)text` when a voice description is given, then the whitespace rule."""
    control = (control or "").strip()
    return normalise_text(f"({control}){text}" if control else text)


class VoxCPMEngine(BaseEngine):
    """A loaded VoxCPM model (LM + DiT + AudioVAE). Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = spec.SPEC.title
    voice_type, voice_error = VoxCPMVoice, VoxCPMVoiceError
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.25, first_chunk_s=0.32, chunk_s=0.96)

    def __init__(
        self, folder: Path, cfg: VoxCPMConfig, tokenizer: TextTokenizer, model: VoxCPMModel, vae: AudioVAE, device: torch.device, variant: str
    ) -> None:
        self.folder, self.cfg, self.tokenizer, self.model, self.vae, self.device = folder, cfg, tokenizer, model, vae, device
        self.variant = variant
        self._features: dict[tuple[int, str], tuple[np.ndarray, torch.Tensor]] = {}

    @classmethod
    def load(
        cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None, lora_weights: str | Path | None = None, lora_config=None
    ) -> VoxCPMEngine:
        """Load a release folder (strict: a missing file or tensor is an error naming it).

        float32 by default on every device: upstream's bits on the CPU with a float32 config. The
        releases' configs say bfloat16, which upstream keeps on a CPU; `precision="bf16"` runs
        the LM and DiT in bfloat16 as upstream then does (opt-in here; the AudioVAE stays float32,
        as upstream keeps it); "int8" (CPU) quantizes the two LMs' linear layers onto koe's
        kernels (`koe.runtime.precision`; the rest stays float32); the result's metadata names the
        precision. fp32 on a CPU with koe's exact kernel runs the LMs' products and norms there,
        with torch's bits.

        LoRA adapters (upstream's layout, `koe.engines.voxcpm.lora`) come from `lora_weights` (a
        folder holding `lora_weights.safetensors`, or the file; upstream's `lora_weights_path`) or
        from the model folder itself when it holds them (what `koe train lora` writes), shaped by
        `lora_config` (a `LoRAConfig`, upstream's object or a dict of its fields), else by the
        folder's `lora_config.json`, else upstream's default (the LMs and the DiT, rank 8).
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        check_precision(precision, spec.PRECISIONS, "VoxCPM")  # before any file is read
        lm_dtype = float_dtype(dtype, (torch.float32, torch.bfloat16), "VoxCPM")
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{folder}: missing config.json (a VoxCPM release folder has it)")
        cfg = read_config(folder / "config.json")
        weights = next((folder / n for n in spec.WEIGHTS if (folder / n).is_file()), None)
        vae_file = next((folder / n for n in spec.VAE_WEIGHTS if (folder / n).is_file()), None)
        if weights is None:
            raise FileNotFoundError(f"{folder}: no model weights (model.safetensors or pytorch_model.bin)")
        if vae_file is None:
            raise FileNotFoundError(f"{folder}: no AudioVAE weights (audiovae.safetensors or audiovae.pth)")
        dev = resolve_device(device)
        numeric = precision_plan(precision, dev, lm_dtype, spec.PRECISIONS, "VoxCPM")
        tokenizer = TextTokenizer.load(folder)
        if tokenizer.vocab_size > cfg.lm.vocab_size:
            raise ValueError(f"{folder}: the tokenizer has {tokenizer.vocab_size} ids, the model's embedding {cfg.lm.vocab_size} rows")
        model = build_from_weights(lambda: VoxCPMModel(cfg), [weights], dtype=numeric.load_dtype, device=dev, rename=VoxCPMModel.checkpoint_name)
        vae = build_from_weights(
            lambda: AudioVAE(VAEConfig.from_json(cfg.audio_vae, cfg.vae_version)), [vae_file], device=dev, rename=VoxCPMModel.checkpoint_name
        )
        if lora_weights is None and (folder / lora.WEIGHTS_FILE).is_file():  # adapters beside the base (a `koe train lora` folder)
            lora_weights = folder
        if lora_weights is not None or lora_config is not None:
            _add_adapters(model, None if lora_weights is None else Path(lora_weights), lora_config, cfg.architecture, precision)
        kernel = apply_precision(numeric, model, [model.base_lm.backbone(), model.residual_lm.backbone()])
        model = model.to(numeric.dtype).eval()  # the weights are in that dtype already; this sets the rotary tables' dtype
        engine = cls(
            folder,
            cfg,
            tokenizer,
            model,
            vae.to(torch.float32).eval(),
            dev,
            spec.variant_of({"architecture": cfg.architecture, "audio_vae_config": cfg.audio_vae}),
        )
        engine._precision, engine.kernel = numeric.reported, kernel
        return engine

    def release(self) -> None:
        """Drop the weights and caches (`close`: the engine is unusable after)."""
        self.model = self.vae = None
        self._features.clear()

    # -- what the model offers -------------------------------------------------------------
    @property
    def sample_rate(self) -> int:
        return self.vae.config.out_sample_rate

    @property
    def encode_rate(self) -> int:
        return self.vae.config.sample_rate

    _precision: str | None = None  # what `load` made it: "float32" (exact), "bfloat16", "int8"
    kernel: str | None = None  # what runs the LMs' products (`koe.runtime.precision.apply`); None: torch's own

    @property
    def precision(self) -> str:
        return self._precision or str(next(self.model.parameters()).dtype).removeprefix("torch.")

    @property
    def capabilities(self) -> Capabilities:
        step = core.patch_seconds(self.model, self.vae)
        return spec.capabilities(self.variant, self.sample_rate, step)

    # -- voices ------------------------------------------------------------------------------
    def _clip(self, audio, trim: bool = False) -> np.ndarray:
        method = "librosa" if self.cfg.v2 else "torchaudio"
        try:
            clip = load_prompt_audio(
                audio, self.encode_rate, method, min_seconds=spec.MIN_REFERENCE_S, max_seconds=MAX_CLIP_SECONDS if trim else spec.MAX_REFERENCE_S
            )
        except AudioError as e:
            raise UnsupportedVoice(f"the voice clip cannot be used: {e}") from e
        if trim:
            clip = clip[: int(spec.MAX_REFERENCE_S * self.encode_rate)]
        return clip

    def make_voice(self, prompt_wav=None, prompt_text: str | None = None, reference_wav=None, *, trim: bool = False) -> VoxCPMVoice:
        """A voice from upstream's arguments: a continuation prompt (`prompt_wav` with its
        `prompt_text`), VoxCPM2's structural reference (`reference_wav`), or both. Clips are paths,
        bytes or (samples, sample_rate)."""
        if (prompt_wav is None) != (prompt_text is None):
            raise UnsupportedVoice("a prompt clip and its transcript go together: give both (or use a reference clip alone on VoxCPM2)")
        if prompt_wav is None and reference_wav is None:
            raise UnsupportedVoice("give a prompt clip with its transcript, or (VoxCPM2) a reference clip")
        if reference_wav is not None and not self.cfg.v2:
            raise UnsupportedVoice(f"{self.variant} clones from a clip and its transcript: a reference clip alone needs VoxCPM2")
        if prompt_text is not None and not str(prompt_text).strip():
            raise UnsupportedVoice("the prompt's transcript is empty: give the words spoken in the clip")
        prompt = self._clip(prompt_wav, trim) if prompt_wav is not None else None
        reference = self._clip(reference_wav, trim) if reference_wav is not None else None
        info = {k: round(len(a) / self.encode_rate, 3) for k, a in (("prompt_seconds", prompt), ("reference_seconds", reference)) if a is not None}
        return VoxCPMVoice(self.cfg.architecture, self.encode_rate, prompt, prompt_text, reference, info)

    def build_voice(self, reference: VoiceReference) -> VoxCPMVoice:
        """A voice from a clip (`prepare_voice(clip, text)` or a `VoiceReference`).

        With a transcript: a continuation prompt (VoxCPM2: the clip is its reference too). Without
        one: VoxCPM2's reference clone; VoxCPM 1.5 needs the transcript. Upstream's own three
        arguments: `make_voice`."""
        audio, text, trim = reference.audio, reference.text, reference.trim
        if text is None:
            if not self.cfg.v2:
                raise UnsupportedVoice(f"{self.variant} clones from a clip and its transcript: pass the words spoken in the clip")
            return self.make_voice(reference_wav=audio, trim=trim)
        clip = self._clip(audio, trim)
        voice = self.make_voice((clip, self.encode_rate), text)
        if self.cfg.v2:
            voice.reference = clip
            voice.info["reference_seconds"] = voice.info["prompt_seconds"]
        return voice

    def check_prompt(self, voice: VoxCPMVoice) -> VoxCPMVoice:
        """A VoxCPM prompt fits this model when it was made for its architecture at its encode rate."""
        if voice.architecture != self.cfg.architecture or voice.sample_rate != self.encode_rate:
            raise VoicePromptMismatch(
                f"this voice was prepared for a {voice.architecture} model at {voice.sample_rate} Hz; this model is "
                f"{self.cfg.architecture} at {self.encode_rate} Hz: prepare the voice again with it"
            )
        return voice

    def features(self, voice: VoxCPMVoice) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The voice's latent patches (prompt, reference), encoded once per voice (upstream's `build_prompt_cache`)."""
        out = []
        for kind, clip, left in (("prompt", voice.prompt, True), ("reference", voice.reference, False)):
            if clip is None:
                out.append(None)
                continue
            key = (id(voice), kind)
            hit = self._features.get(key)
            if hit is None or hit[0] is not clip:
                hit = (clip, core.encode_clip(self.vae, clip, self.cfg.patch_size, left, self.device))
                while len(self._features) >= FEATURE_CACHE:
                    self._features.pop(next(iter(self._features)))  # the oldest voice's
                self._features[key] = hit
            out.append(hit[1])
        return out[0], out[1]

    # -- requests ------------------------------------------------------------------------------
    def settings(self, options: dict | None) -> core.GenerationSettings:
        values = self.capabilities.options.validate(options)
        if values.get("normalize"):
            raise InvalidOption(
                "normalize=true: upstream's text normaliser (wetext) is not supported by koe yet; write numbers and symbols out in words", param="normalize"
            )
        if values.get("denoise"):
            raise InvalidOption("denoise=true: upstream's ZipEnhancer denoiser is not supported by koe yet; denoise the clip beforehand", param="denoise")
        known = {k: v for k, v in {**spec.DEFAULTS, **values}.items() if k not in ("normalize", "denoise")}
        return core.GenerationSettings(**known)

    def check_instruct(self, instruct: str | None) -> str | None:
        """VoxCPM2's voice description (or style), stripped; VoxCPM 1.5 refuses one rather than ignore it."""
        control = instruct.strip() if instruct and instruct.strip() else None
        if control is not None and not self.cfg.v2:
            raise RequestError(f"{self.variant} takes no voice description or style instruction (VoxCPM2 does)", param="instructions")
        return control

    def check_options(self, request: SynthesisRequest, checked: Checked) -> _Checked:
        return _Checked(**{**vars(checked), "settings": self.settings(request.options)}, control=checked.instruct)

    def sequence(self, text: str, voice: VoxCPMVoice | None, control: str | None = None) -> core.Sequence:
        """The model's input for `text` (whitespace-normalised as upstream) in `voice`."""
        text = design_text(text, control)
        if not text.strip():
            raise RequestError("text is empty: give at least one word to speak", param="input")
        prompt_feat = ref_feat = None
        if voice is not None:
            prompt_feat, ref_feat = self.features(voice)
        return core.build_sequence(self.model, self.tokenizer, text, voice.prompt_text if voice is not None else None, prompt_feat, ref_feat)

    def speak_segment(self, segment: Segment, c: _Checked) -> Iterator[Piece]:
        seq = self.sequence(segment.text, c.voice, c.control)
        limit = steps_for(segment.budget_s, 1 / core.patch_seconds(self.model, self.vae)) if c.user_cap else None
        generator = torch.Generator(device=self.device).manual_seed(int(segment.seed)) if segment.seed is not None else None
        info = {
            "decode": "streaming" if segment.streamed else "one-shot",
            "mode": c.voice.mode if c.voice is not None else ("design" if c.control else "own voice"),
        }
        step_s = core.patch_seconds(self.model, self.vae)
        if not segment.streamed:
            out = core.one_shot(self.model, self.vae, seq, c.settings, limit=limit, generator=generator, cancel=c.cancel)
            yield Piece(
                out.samples,
                out.patches,
                last=True,
                truncated=not out.stopped,
                info={**info, "seconds": out.patches * step_s, "runs": out.runs, "patch_limit": limit},
            )
            return
        loops: list = []
        chunker = Chunker.of(segment.first_chunk_s, segment.chunk_s, self.sample_rate)
        held: list[np.ndarray] = []
        count = 0
        for samples in core.stream(self.model, self.vae, seq, c.settings, limit=limit, generator=generator, cancel=c.cancel, loop_out=loops):
            held.append(samples)
            count += 1
            if chunker.add(len(samples)):
                yield Piece(np.concatenate(held), count)
                held = []
        loop = loops[0]
        tail = np.concatenate(held) if held else np.zeros(0, np.float32)
        yield Piece(tail, loop.count, last=True, truncated=not loop.stopped, info={**info, "seconds": loop.count * step_s, "patch_limit": limit})

    def result_metadata(self) -> dict:
        meta = {"model": self.variant, "architecture": self.cfg.architecture, "precision": self.precision, "device": str(self.device)}
        return meta if self.kernel is None else {**meta, "kernel": self.kernel}


def _add_adapters(model: VoxCPMModel, source: Path | None, config, architecture: str, precision: str | None) -> None:
    """LoRA adapters on `model` as upstream's `lora_config` / `lora_weights_path` add them
    (unmerged: the same sums), their weights from `source` (a folder or a file; None: new ones,
    B zero, which speak as the base does)."""
    if precision not in (None, "fp32"):
        raise ValueError(f"LoRA adapters run in float32 only, not with precision {precision!r}")
    weights = source / lora.WEIGHTS_FILE if source is not None and source.is_dir() else source
    if weights is not None and not weights.is_file():
        raise FileNotFoundError(f"LoRA weights not found: {weights}")
    if config is None and source is not None and source.is_dir() and (source / lora.CONFIG_FILE).is_file():
        cfg = lora.read_lora_config(source)
    else:
        cfg = lora.as_config(config)
    with torch.random.fork_rng(devices=[]):  # a new adapter draws its A from torch's generator
        lora.add_lora(model, cfg, architecture)
    if weights is not None:
        lora.load_adapters(model, lora.read_adapters(weights), weights)
