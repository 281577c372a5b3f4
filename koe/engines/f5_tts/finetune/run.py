"""A fine-tuning run on an F5-TTS model folder: its checkpoint's EMA weights trained on clips
(`trainer.run`), then exported as a model folder that koe and upstream both load.

`out` becomes the model folder: the base's `config.yaml`, `vocab.txt` and `vocos/`, and
`model_last.safetensors`, the EMA weights in the release's layout (`ema_model.*`, with the EMA's
`initted` and `step`). `out/training/` keeps the run's checkpoints in upstream's format
(`model_last.pt`, `model_<update>.pt`), which upstream's trainer and inference read too. Running
again into the same `out` goes on from its `model_last.pt` (the same settings and data), or, for
a finished run, exports it again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe.engines.base import TrainingError
from koe.engines.f5_tts import spec
from koe.engines.f5_tts.config import read_config
from koe.engines.f5_tts.dit import F5Model
from koe.engines.f5_tts.finetune.data import Clip, load_clips, prepare_items
from koe.engines.f5_tts.finetune.trainer import StepReport, TrainSettings, run
from koe.engines.f5_tts.text import Vocab
from koe.engines.finetuning import Finetuned, check_same_run, clips_key, refuse_settings
from koe.engines.spec import RANDOM_WEIGHTS_FILE
from koe.runtime.weights import build_from_weights, checkpoint_tensors, open_safetensors

__all__ = ["Finetuned", "ema_counters", "export", "finetune", "train"]

EXPORT_NAME = "model_last.safetensors"


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
    """Fine-tune the F5-TTS model in folder `model` on `data` (a dataset's path, see `data.py`, or
    clips); `out` becomes the new model's folder. Every problem of the data or the settings is a
    `TrainingError` (`DatasetError` for the data) before anything is written."""
    model, out = Path(model), Path(out)
    settings = settings or TrainSettings()
    _check(settings)
    checkpoints = spec.checkpoint_files(model)
    if not checkpoints or not (model / "config.yaml").is_file() or not (model / "vocab.txt").is_file():
        raise TrainingError(f"{model}: not an F5-TTS model folder (config.yaml, vocab.txt and a model_<step> checkpoint)", param="model")
    if out.resolve() == model.resolve():
        raise TrainingError(f"{out}: the output folder is the model's own", hint="give a new folder for the fine-tuned model", param="out")
    if out.exists() and (not out.is_dir() or (any(p.name != "training" for p in out.iterdir()) and not (out / "training" / "model_last.pt").exists())):
        raise TrainingError(f"{out} holds something other than a fine-tuning run; its files would be replaced", hint="give a new or empty folder", param="out")
    cfg = read_config(model / "config.yaml")
    vocab = Vocab.load(model / "vocab.txt")
    clips = data if isinstance(data, list) else load_clips(data)
    key = clips_key(clips)
    resume = _earlier_run(out / "training" / "model_last.pt", settings, key)
    if resume is not None and resume["koe"]["epoch"] >= settings.epochs:  # finished: the export again
        export(model, out)
        return Finetuned(out, resume["update"])
    items = prepare_items(clips, vocab, cfg.mel, settings.frames_per_batch, "" if isinstance(data, list) else data)
    net = build_from_weights(lambda: F5Model(cfg, vocab.size), checkpoints[:1], rename=F5Model.checkpoint_name)
    counters = ema_counters(checkpoints[0])
    updates = run(
        net, items, out / "training", settings, ema_counters=counters, on_step=on_step, should_stop=should_stop, device=device, resume=resume, data_key=key
    )
    export(model, out)
    return Finetuned(out, updates)


def _earlier_run(last: Path, settings: TrainSettings, key: str) -> dict | None:
    """The checkpoint of an earlier run into the same folder, to go on from; None when there is
    none. A damaged one, one made with other settings or data, or not by koe, is a TrainingError."""
    if not last.exists():
        return None
    try:
        state = torch.load(last, map_location="cpu", weights_only=True)
    except Exception as e:  # a torn or foreign file: torch's unpickler raises several kinds
        raise TrainingError(
            f"{last}: a damaged checkpoint ({type(e).__name__})", hint="remove it to start again (the model_<update>.pt beside it are whole)", param="out"
        ) from e
    where = state.get("koe") if isinstance(state, dict) else None
    if not isinstance(where, dict):
        raise TrainingError(f"{last}: a checkpoint koe did not write; koe goes on only from its own", hint="give another output folder", param="out")
    check_same_run(last.parent.parent, where, settings, key, free=("save_every", "last_every", "gradient_checkpointing"))  # the others change the bits
    return state


def train(model: Path, data: Path, out: Path, settings: TrainSettings, *, device: str = "cpu", reporter=None, should_stop=None) -> Finetuned:
    """`koe train finetune` on an F5-TTS model (the spec's `trainers`; `koe.service.training`)."""
    if reporter is not None:
        reporter.note(f"fine-tuning {model.name} on {data} (upstream's finetune_cli.py recipe)")
    return finetune(model, data, out, settings, on_step=reporter.step if reporter is not None else None, should_stop=should_stop, device=device)


def ema_counters(checkpoint: Path) -> tuple[bool, int]:
    """The EMA's (`initted`, `step`) a checkpoint carries (a release has them); (False, 0) when it
    has none: the EMA then starts as a new one (its first update copies the weights)."""
    if checkpoint.suffix == ".safetensors":  # only the two tensors read, not the weights
        with open_safetensors(checkpoint) as f:
            found = {key: f.get_tensor(key) for key in ("initted", "step") if key in f.keys()}
    else:
        found = {key: t for name, t in checkpoint_tensors(checkpoint) if (key := name.removeprefix("ema_model_state_dict.")) in ("initted", "step")}
    return bool(found.get("initted", torch.tensor(False))), int(found.get("step", torch.tensor(0)))


def export(base: Path, out: Path) -> Path:
    """Write the model folder `out` from the run's `out/training/model_last.pt` (its EMA weights)
    and the base folder's config, vocabulary and vocoder."""
    state = torch.load(out / "training" / "model_last.pt", map_location="cpu", weights_only=True)["ema_model_state_dict"]
    for name in ("config.yaml", "vocab.txt", RANDOM_WEIGHTS_FILE):
        if (base / name).is_file():
            shutil.copy2(base / name, out / name)
    shutil.copytree(base / "vocos", out / "vocos", dirs_exist_ok=True)
    partial = out / f".{EXPORT_NAME}.partial"
    save_file({k: v.contiguous() for k, v in state.items()}, str(partial))
    partial.replace(out / EXPORT_NAME)
    return out


def _check(s: TrainSettings) -> None:
    refuse_settings(
        (
            ("epochs", s.epochs >= 1, "at least 1"),
            ("lr", s.lr > 0, "positive"),
            ("warmup_updates", s.warmup_updates >= 0, "0 or more"),
            ("frames_per_batch", s.frames_per_batch > 0, "positive"),
            ("max_clips", s.max_clips >= 0, "0 (any number) or more"),
            ("grad_accum", s.grad_accum >= 1, "at least 1"),
            ("max_grad_norm", s.max_grad_norm >= 0, "0 (no clipping) or more"),
            ("save_every", s.save_every >= 1, "at least 1"),
            ("last_every", s.last_every >= 1, "at least 1"),
        )
    )
