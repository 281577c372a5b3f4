"""Fine-tuning from Python: the same runs as `koe train` (`speaker` for Qwen3-TTS, `finetune` for
F5-TTS, VoxCPM and OmniVoice, `lora` for VoxCPM).

    import koe.train
    result = koe.train.speaker("Qwen/Qwen3-TTS-12Hz-1.7B-Base", data="clips/", speaker="alice", out="alice-voice")
    tts = koe.load("alice-voice")
    tts.generate("Hello!", speaker="alice")

`speaker` runs three stages, each leaving an artefact in `OUT/training/` and each reused by a later
call with the same arguments (so a stopped run goes on where it was): prepare (the codec's codes,
in upstream's prepared JSONL), train (a checkpoint after every epoch), export (`OUT` becomes a
CustomVoice model folder). docs/training.md has the data format, the settings and what is exact.

Every call runs the trainer of the model's family (its spec's `trainers`, through
`koe.service.training`, as `koe train` does); a model whose family does not train is refused
naming those that do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["export", "finetune", "lora", "prepare", "speaker"]


def speaker(
    model: str | os.PathLike,
    data: str | os.PathLike,
    speaker: str,
    out: str | os.PathLike,
    *,
    ref: str | os.PathLike | None = None,
    epochs: int = 3,
    lr: float = 2e-5,
    batch_size: int = 2,
    grad_accum: int = 4,
    seed: int = 0,
    precision: str = "float32",
    gradient_checkpointing: bool = False,
    offload_optimizer: bool = False,
    save_every: int = 0,
    lora_rank: int = 0,
    lora_alpha: float | None = None,
    device: str | None = None,
    export_dtype: str | None = None,
    stop_after: str | None = None,
    on_step: Callable[[Any], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
):
    """Fine-tune the Base `model` (a folder, store name or hub id) on `data` into a model whose preset
    speaker is `speaker`, written to `out`. Defaults are upstream's recipe's (batch 2, lr 2e-5, 3
    epochs, accumulation 4); `lora_rank=N` trains LoRA adapters instead (not upstream's recipe).
    `on_step(report)` is called after every batch (epoch, batch, loss, ...);
    `should_stop()` is asked after each checkpoint. Returns the run's result (`out`, `speaker`,
    `finished`, `losses`, `optimizer_steps`), or None with `stop_after="prepare"`. Raises
    `koe.service.errors.InvalidRequest` for bad data or settings, before any training."""
    from koe.service.store.resolve import model_folder
    from koe.service.training import Reporter, SpeakerJob, run_speaker, speaker_settings

    settings = speaker_settings(locals())  # the run's settings, among the arguments
    job = SpeakerJob(
        model_folder(model),
        Path(data),
        speaker,
        Path(out),
        ref=Path(ref) if ref is not None else None,
        device=device,
        export_dtype=export_dtype,
        stop_after=stop_after,
        settings=settings,
    )
    reporter = Reporter()
    if on_step is not None:
        reporter.step = on_step
    if on_note is not None:
        reporter.note = on_note
    return run_speaker(job, reporter, should_stop)


def finetune(
    model: str | os.PathLike,
    data: str | os.PathLike,
    out: str | os.PathLike,
    *,
    device: str | None = None,
    on_step: Callable[[Any], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    **settings: Any,
):
    """Fine-tune `model` (a folder, store name or hub id of a family with a "finetune" trainer:
    F5-TTS, VoxCPM, OmniVoice) on `data` (a JSONL or CSV of audio and text, or a folder of NAME.wav
    + NAME.txt pairs); `out` becomes the fine-tuned model's folder. `settings` are the family's
    (F5-TTS: epochs, lr, warmup_updates, frames_per_batch, max_clips, grad_accum, max_grad_norm,
    save_every, last_every, seed, gradient_checkpointing; VoxCPM: steps, lr, weight_decay,
    warmup_updates, batch_size, grad_accum, max_grad_norm, max_batch_tokens, save_every, seed;
    OmniVoice: steps, lr, weight_decay, warmup_updates, schedule, batch_tokens, max_clips,
    min_sample_tokens, max_sample_tokens, grad_accum, max_grad_norm, save_every, seed, workers;
    docs/training.md has every family's; upstream's defaults where not given). `on_step(report)`
    is called after every batch or update; `should_stop()` is asked after every update (the run
    saves its checkpoint and returns). Returns the run's result (`folder`, `updates`). Raises
    `koe.service.errors.InvalidRequest` for bad data (every problem listed) or settings, before any
    training."""
    return _run("finetune", model, data, out, device, on_step, on_note, should_stop, settings)


def lora(
    model: str | os.PathLike,
    data: str | os.PathLike,
    out: str | os.PathLike,
    *,
    device: str | None = None,
    on_step: Callable[[Any], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    **settings: Any,
):
    """`finetune` with low-rank adapters trained instead of the whole model, where the family's
    recipe has them (VoxCPM: its settings plus lora_rank, lora_alpha, lora_dropout, lora_lm,
    lora_dit, lora_proj). `out` holds the base's files and the adapters beside them; loading it
    speaks with the adapters."""
    return _run("lora", model, data, out, device, on_step, on_note, should_stop, settings)


def _run(method, model, data, out, device, on_step, on_note, should_stop, settings):
    from koe.service.store.resolve import model_folder
    from koe.service.training import FinetuneJob, Reporter, run_finetune

    reporter = Reporter()
    if on_step is not None:
        reporter.step = on_step
    if on_note is not None:
        reporter.note = on_note
    job = FinetuneJob(model_folder(model), Path(data), Path(out), device=device, settings=settings, method=method)
    return run_finetune(job, reporter, should_stop)


def prepare(
    model: str | os.PathLike, data: str | os.PathLike, out: str | os.PathLike, *, ref: str | os.PathLike | None = None, device: str | None = None
) -> Path:
    """Check `data` and write upstream's prepared JSONL (the codes of every clip) to `out`, with
    `model`'s codec; returns `out`. A later `speaker(..., data=out)` trains on it as it is."""
    from koe.service.store.resolve import model_folder
    from koe.service.training import prepare_data

    return prepare_data(model_folder(model), Path(data), Path(out), ref=Path(ref) if ref is not None else None, device=device)


def export(out: str | os.PathLike, *, export_dtype: str | None = None) -> Path:
    """Export the latest checkpoint of the run in `out` as the model in `out` (a run stopped early)."""
    from koe.service.training import export_run

    return export_run(Path(out), export_dtype)
