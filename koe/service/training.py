"""Fine-tuning as the shells ask for it: which family trains a model, and a run with koe's errors.

Torch-free at import, like the rest of `service/`: the family's trainer (`FamilySpec.trainers`,
"module:function") is imported when a run starts. Beside it, in its module, the family keeps
`TrainSettings` (the run's settings), `export_checkpoint(out, dtype)` (`koe train export`) and
`prepare_dataset(base, data, out, ref=, device=)` (the data stage alone). Its own errors (a bad
dataset, a model the recipe cannot train, settings a checkpoint was not made with) come back as
`InvalidRequest`, so the CLI prints them as one clear message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from koe.runtime.files import read_json_object
from koe.service.errors import InvalidRequest

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class SpeakerJob:
    """`koe train speaker`: a Base model and recordings -> a model with NAME as its preset speaker."""

    model: Path  # the base model's folder (resolved by the shell)
    data: Path
    speaker: str
    out: Path
    ref: Path | None = None
    device: str | None = None  # None: cuda when there is one, else cpu
    export_dtype: str | None = None  # None: as trained
    stop_after: str | None = None  # "prepare" | "train"
    settings: dict[str, Any] = field(default_factory=dict)  # the family's TrainSettings fields


SETTINGS = (
    "epochs",
    "lr",
    "batch_size",
    "grad_accum",
    "seed",
    "precision",
    "gradient_checkpointing",
    "offload_optimizer",
    "save_every",
    "lora_rank",
    "lora_alpha",
)  # the run's settings, as `koe train speaker` and `koe.train.speaker` name their arguments


@dataclass(frozen=True)
class FinetuneJob:
    """`koe train finetune`: a model and recordings with transcripts -> the model fine-tuned on them."""

    model: Path  # the model's folder (resolved by the shell)
    data: Path
    out: Path
    device: str | None = None  # None: cuda when there is one, else cpu
    settings: dict[str, Any] = field(default_factory=dict)  # the family's TrainSettings fields; None: its default
    method: str = "finetune"  # or "lora": adapters only, where the family's recipe has them


FINETUNE_SETTINGS = (
    "epochs",
    "steps",
    "lr",
    "weight_decay",
    "warmup_updates",
    "frames_per_batch",
    "max_clips",
    "batch_size",
    "max_batch_tokens",
    "grad_accum",
    "max_grad_norm",
    "save_every",
    "last_every",
    "seed",
    "gradient_checkpointing",
    "schedule",
    "batch_tokens",
    "min_sample_tokens",
    "max_sample_tokens",
    "workers",
    "lora_rank",
    "lora_alpha",
    "lora_dropout",
    "lora_lm",
    "lora_dit",
    "lora_proj",
)  # `koe train finetune`'s and `koe.train.finetune`'s settings (the union of the families'; each takes those of its recipe)


def speaker_settings(arguments: dict[str, Any]) -> dict[str, Any]:
    """`SpeakerJob.settings` from a caller's arguments (its `locals()`) named as `SETTINGS`."""
    return {name: arguments[name] for name in SETTINGS}


@dataclass
class Reporter:
    """What a run tells its shell while it goes (a trainer calls these): notes, the data stage's
    progress (done, total), and a report after every batch (epoch, batch, loss, ...)."""

    note: Callable[[str], None] = lambda message: None
    prepare: Callable[[int, int], None] = lambda done, total: None
    step: Callable[[Any], None] = lambda report: None


def trainer_for(folder: Path, method: str = "speaker"):
    """The family function that runs `method` on the model in `folder`, or InvalidRequest saying
    which models can."""
    from koe.engines import registry

    info = registry.detect(folder)
    spec = registry.spec(info.family)
    target = (getattr(spec, "trainers", None) or {}).get(method)
    if target is None:
        trainable = [s.title for s in registry.specs() if method in (getattr(s, "trainers", None) or {})]
        raise InvalidRequest(
            f"{folder}: {spec.title} models have no {method} training in koe", hint=f"families that train: {', '.join(trainable) or 'none'}", param="model"
        )
    return registry.import_target(target)


def _beside(train, name: str):
    """The member `name` of the module that holds the family's trainer `train` (see the module doc)."""
    import sys

    return getattr(sys.modules[train.__module__], name)


def prepare_data(model: Path, data: Path, out: Path, *, ref: Path | None = None, device: str | None = None) -> Path:
    """The data stage alone of a speaker run on the model in `model` (`koe.train.prepare`): the
    family's prepared data written to `out`, which a later run takes as its data; returns `out`."""
    from koe.engines.base import TrainingError

    prepare = _beside(trainer_for(Path(model)), "prepare_dataset")
    try:
        return prepare(Path(model), Path(data), Path(out), ref=ref, device=device or "cpu")
    except TrainingError as e:
        raise InvalidRequest(e.message, hint=e.hint, param="data") from e


def export_dtype(name: str | None):
    """The torch dtype an `--export-dtype` names (None: as trained), or InvalidRequest."""
    if name is None:
        return None
    if name not in DTYPES:
        raise InvalidRequest(f"export dtype {name!r} is not one of {', '.join(DTYPES)}", param="export_dtype")
    import torch

    return getattr(torch, name)


def run_finetune(job: FinetuneJob, reporter=None, should_stop=None):
    """Run a fine-tuning job (the family's trainer for `job.method`: "finetune" or "lora"); returns
    its result. Settings given as None take the family's default (its recipe's)."""
    from koe.engines.base import TrainingError

    train = trainer_for(Path(job.model), job.method)
    settings = _settings(_beside(train, "TrainSettings"), {k: v for k, v in job.settings.items() if v is not None})
    try:
        return train(Path(job.model), Path(job.data), Path(job.out), settings, device=_device(job.device), reporter=reporter, should_stop=should_stop)
    except TrainingError as e:  # bad data (DatasetError lists every problem), a model or settings the recipe refuses
        raise InvalidRequest(e.message, hint=e.hint, param=e.param) from e


def _settings(settings_type, given: dict[str, Any]):
    """The family's settings object from `given`, or InvalidRequest naming the unknown ones."""
    known = {f.name for f in fields(settings_type)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidRequest(f"unknown training settings: {', '.join(unknown)}", hint=f"known: {', '.join(sorted(known))}")
    return settings_type(**given)


def _device(device: str | None) -> str:
    """`device` checked (cpu, cuda, cuda:N), or cuda when there is one and none was given."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise InvalidRequest(f"device {device!r}: give cpu, cuda or cuda:N", param="device")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidRequest(f"device {device!r}: no CUDA GPU is available here", param="device")
    return device


def run_speaker(job: SpeakerJob, reporter=None, should_stop=None):
    """Run a speaker fine-tuning job (see the family's `train_speaker`); returns its result."""

    from koe.engines.base import TrainingError

    train = trainer_for(Path(job.model))
    settings = _settings(_beside(train, "TrainSettings"), job.settings)  # the family's settings
    dtype = export_dtype(job.export_dtype)
    device = _device(job.device)
    try:
        return train(
            Path(job.model),
            Path(job.data),
            job.speaker,
            Path(job.out),
            settings,
            ref=job.ref,
            device=device,
            export_dtype=dtype,
            stop_after=job.stop_after,
            reporter=reporter,
            should_stop=should_stop,
        )
    except TrainingError as e:  # bad data (the data stage's DatasetError), a model or settings the recipe refuses
        raise InvalidRequest(e.message, hint=e.hint, param=e.param) from e


def export_run(out: Path, dtype_name: str | None = None) -> Path:
    """Export a run's latest checkpoint to its folder (`koe train export`), with the trainer of
    the family of the run's base model (named in `OUT/training/run.json`)."""
    from koe.engines.base import TrainingError

    dtype = export_dtype(dtype_name)
    run_file = Path(out) / "training" / "run.json"
    if not run_file.exists():
        raise InvalidRequest(f"{out} is not a koe training run (no training/run.json)", hint="give the --out folder of `koe train speaker`")
    hint = f"remove {out} (or use another output folder) to start the run again"
    try:
        base = read_json_object(run_file).get("base")
    except ValueError as e:
        raise InvalidRequest(f"the training run's file is damaged: {e}", hint=hint) from e
    if not isinstance(base, str):
        raise InvalidRequest(f"the training run's file is damaged: {run_file}: it does not name the base model", hint=hint)
    export = _beside(trainer_for(Path(base)), "export_checkpoint")
    try:
        return export(Path(out), dtype)
    except TrainingError as e:
        raise InvalidRequest(e.message, hint=e.hint) from e
