"""A fine-tuning run on a VoxCPM model folder (`trainer.run`), then its export: a model folder
that koe and upstream both load.

`out` becomes the model folder: the base's `config.json`, AudioVAE and tokenizer files, and the
trained `model.safetensors`. `out/training/` keeps the run's checkpoints in upstream's layout
(`step_<update>/`, `latest/`; each one a model folder too). Running again into the same `out` goes
on from `latest/` (the same settings and data), or, for a finished run, exports it again.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from koe.engines.base import TrainingError
from koe.engines.dataset import Clip, DatasetError, load_clips
from koe.engines.finetuning import Finetuned, check_same_run, clips_key, refuse_settings
from koe.engines.spec import RANDOM_WEIGHTS_FILE
from koe.engines.voxcpm import spec
from koe.engines.voxcpm.audio_vae import AudioVAE, VAEConfig
from koe.engines.voxcpm.config import read_config
from koe.engines.voxcpm.finetune.data import read_samples
from koe.engines.voxcpm.finetune.draws import replay_construction
from koe.engines.voxcpm.finetune.objective import encode_clip
from koe.engines.voxcpm.finetune.trainer import BASE_FILES, LoRASettings, StepReport, TrainSettings, run
from koe.engines.voxcpm.lora import CONFIG_FILE, WEIGHTS_FILE, add_lora
from koe.engines.voxcpm.model import VoxCPMModel
from koe.engines.voxcpm.text import TextTokenizer
from koe.runtime.weights import build_from_weights

__all__ = ["Finetuned", "TrainSettings", "export", "finetune", "train"]


def finetune(
    model: str | os.PathLike,
    data: str | os.PathLike | list[Clip],
    out: str | os.PathLike,
    settings: TrainSettings | None = None,
    *,
    on_step: Callable[[StepReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    device: str | torch.device = "cpu",
) -> Finetuned:
    """Fine-tune the VoxCPM model in folder `model` on `data` (a dataset's path, or clips); `out`
    becomes the new model's folder. Every problem of the data or the settings is a
    `TrainingError` (`DatasetError` for the data) before anything is written."""
    model, out = Path(model), Path(out)
    settings = settings or TrainSettings()
    _check(settings)
    weights = next((model / n for n in spec.WEIGHTS if (model / n).is_file()), None)
    vae_file = next((model / n for n in spec.VAE_WEIGHTS if (model / n).is_file()), None)
    if not (model / "config.json").is_file() or weights is None or vae_file is None:
        raise TrainingError(f"{model}: not a VoxCPM model folder (config.json, model weights and AudioVAE weights)", param="model")
    if out.resolve() == model.resolve():
        raise TrainingError(f"{out}: the output folder is the model's own", hint="give a new folder for the fine-tuned model", param="out")
    training = out / "training"
    if out.exists() and (not out.is_dir() or (any(p.name != "training" for p in out.iterdir()) and not (training / "latest" / "koe.pt").exists())):
        raise TrainingError(f"{out} holds something other than a fine-tuning run; its files would be replaced", hint="give a new or empty folder", param="out")
    cfg = read_config(model / "config.json")
    if cfg.dit_mean_mode:
        raise TrainingError(f"{model}: a mean-velocity DiT (dit_mean_mode); koe does not reproduce its training (a Jacobian-vector product)", param="model")
    clips = data if isinstance(data, list) else load_clips(data)
    key = clips_key(clips)
    resume = _earlier_run(training, settings, key)
    if resume is not None and resume["next_update"] >= settings.steps:  # finished: the export again
        export(model, out)
        return Finetuned(out, settings.steps)
    tokenizer = TextTokenizer.load(model)
    vae = (
        build_from_weights(lambda: AudioVAE(VAEConfig.from_json(cfg.audio_vae, cfg.vae_version)), [vae_file], rename=VoxCPMModel.checkpoint_name).float().eval()
    )
    patch_samples = vae.config.hop_length * cfg.patch_size
    source = "" if isinstance(data, list) else data
    samples = read_samples(clips, tokenizer, vae.config.sample_rate, patch_samples, cfg.max_length, source)
    _check_lengths(clips, samples, settings, vae.config.sample_rate, vae.config.sample_rate / vae.config.hop_length, cfg.patch_size, source)
    net = build_from_weights(lambda: VoxCPMModel(cfg), [weights], dtype=torch.float32, rename=VoxCPMModel.checkpoint_name)
    if resume is None:
        torch.manual_seed(settings.seed)
        replay_construction(vae, net)
    if isinstance(settings, LoRASettings):
        add_lora(net, settings.lora(), cfg.architecture)  # each A drawn as upstream draws it (a resumed run restores the generator after)
    vae.to(device)
    patches = [(s.text_ids, encode_clip(vae, torch.from_numpy(s.audio).to(device), cfg.patch_size)) for s in samples]
    del vae
    updates = run(net, patches, model, training, settings, on_step=on_step, should_stop=should_stop, device=device, resume=resume, data_key=key)
    if updates >= settings.steps:
        export(model, out)
    return Finetuned(out, updates)


def _earlier_run(training: Path, settings: TrainSettings, key: str) -> dict | None:
    """The state of an earlier run into the same folder, to go on from; None when there is none.
    A damaged one, or one made with other settings or data, is a TrainingError."""
    state_file = training / "latest" / "koe.pt"
    if not state_file.exists():
        return None
    try:
        state = torch.load(state_file, map_location="cpu", weights_only=True)
        weights = WEIGHTS_FILE if isinstance(settings, LoRASettings) else "model.safetensors"
        if not isinstance(state, dict) or not (training / "latest" / weights).is_file():
            raise ValueError("incomplete")
    except Exception as e:  # a torn or foreign file: torch's unpickler raises several kinds
        raise TrainingError(
            f"{state_file.parent}: a damaged checkpoint ({type(e).__name__})",
            hint="remove it to start again (the step_<update> folders beside it are whole)",
            param="out",
        ) from e
    check_same_run(training.parent, state, settings, key)
    return state


def train(model: Path, data: Path, out: Path, settings: TrainSettings, *, device: str = "cpu", reporter=None, should_stop=None) -> Finetuned:
    """`koe train finetune` on a VoxCPM model (the spec's `trainers`; `koe.service.training`)."""
    if reporter is not None:
        reporter.note(f"fine-tuning {model.name} on {data} (upstream's train_voxcpm_finetune.py recipe)")
    return finetune(model, data, out, settings, on_step=reporter.step if reporter is not None else None, should_stop=should_stop, device=device)


def export(base: Path, out: Path) -> Path:
    """Write the model folder `out` from the run's `out/training/latest/` and the base folder's
    config, AudioVAE and tokenizer files. A LoRA run's folder holds the base's weights (linked
    where the file system allows) and the adapters beside them (`lora_weights.safetensors`,
    `lora_config.json`): koe applies them when it loads the folder, upstream when given it as
    `lora_weights_path`."""
    latest = out / "training" / "latest"
    for name in (*BASE_FILES, RANDOM_WEIGHTS_FILE):
        if (base / name).is_file():
            shutil.copy2(base / name, out / name)
    if (latest / WEIGHTS_FILE).is_file():  # LoRA: the base's weights, the adapters beside
        weights = next(base / n for n in spec.WEIGHTS if (base / n).is_file())
        _place(weights, out / weights.name, link=True)
        for name in (WEIGHTS_FILE, CONFIG_FILE):
            _place(latest / name, out / name)
    else:
        _place(latest / "model.safetensors", out / "model.safetensors")
    return out


def _place(source: Path, target: Path, link: bool = False) -> None:
    """`source` at `target`, written whole first (a hard link where asked and possible, else a copy)."""
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    try:
        if not link:
            raise OSError
        os.link(source, partial)
    except OSError:  # a copy asked for, or another file system
        shutil.copyfile(source, partial)
    partial.replace(target)


def _check_lengths(clips: list[Clip], samples, s: TrainSettings, rate: int, fps: float, patch_size: int, source) -> None:
    """Upstream leaves out clips whose estimated sequence exceeds max_batch_tokens // batch_size
    (`compute_sample_lengths`); koe lists them instead, so the data trained on is the data given."""
    if len(samples) < s.batch_size:
        raise DatasetError(source or "the clips", [f"{len(samples)} clips, fewer than a batch ({s.batch_size}): upstream's loader drops a partial batch"])
    if s.max_batch_tokens <= 0:
        return
    limit = s.max_batch_tokens // s.batch_size
    problems = []
    for clip, sample in zip(clips, samples, strict=True):
        frames = math.ceil(sample.audio.size / rate * fps)  # upstream's estimate from the clip's duration
        length = len(sample.text_ids) + math.ceil(frames / patch_size) + 2
        if length > limit:
            problems.append(
                f"{clip.where or clip.audio.name}: about {length} positions, more than max_batch_tokens // batch_size = {limit} (upstream leaves such clips out)"
            )
    if problems:
        raise DatasetError(source or "the clips", problems)


def _check(s: TrainSettings) -> None:
    refuse_settings(
        (
            ("steps", s.steps >= 1, "at least 1"),
            ("lr", s.lr > 0, "positive"),
            ("weight_decay", s.weight_decay >= 0, "0 or more"),
            ("warmup_updates", s.warmup_updates >= 0, "0 or more"),
            ("batch_size", s.batch_size >= 1, "at least 1"),
            ("grad_accum", s.grad_accum >= 1, "at least 1"),
            ("max_grad_norm", s.max_grad_norm >= 0, "0 (no clipping) or more"),
            ("max_batch_tokens", s.max_batch_tokens >= 0, "0 (any length) or more"),
            ("save_every", s.save_every >= 1, "at least 1"),
            *(
                (
                    ("lora_rank", s.lora_rank >= 1, "at least 1"),
                    ("lora_alpha", s.lora_alpha > 0, "positive"),
                    ("lora_dropout", 0 <= s.lora_dropout < 1, "from 0 to below 1"),
                    ("lora_lm, lora_dit or lora_proj", s.lora_lm or s.lora_dit or s.lora_proj, "on (the adapters need a place)"),
                )
                if isinstance(s, LoRASettings)
                else ()
            ),
        )
    )
