"""Upstream's training loop (omnivoice 0.2.1's `OmniTrainer.train`), on one process: the same
updates, draw for draw, and checkpoints in upstream's format.

- `set_seed(seed)` before the first data loader starts: its generator gives each epoch's workers'
  base seed (`pipeline.base_seed`), and nothing else in the main process draws (no dropout).
- Steps-based: batches are taken until `steps` updates are done; when the data runs out the next
  epoch starts (`set_epoch`, a new loader), in the middle of an accumulation group if need be.
- AdamW (torch's, `lr`, `weight_decay`; the rest its defaults) over the parameters in upstream's
  order; transformers' cosine (or constant) schedule with a linear warm-up from 0 over
  `warmup_updates` (upstream's default: 3% of `steps`, rounded up), stepped once an update.
- Gradient accumulation as accelerate does it for a loader it does not wrap: each loss divided by
  `grad_accum`, an update at every `grad_accum`-th batch counted over the whole run (epochs do not
  end a group); gradients clipped to `max_grad_norm` (0: off) with torch's `clip_grad_norm_`.
- `checkpoint-<update>/` every `save_every` updates and at the end, as upstream's
  `save_checkpoint` writes it (accelerate's `save_state`, then `save_pretrained`):
  `model.safetensors`, `config.json`, `optimizer.bin`, `scheduler.bin`, the tokenizer's files and
  `train_config.json`, plus `koe_state.pt` (where the run is, the loader generator's state, the
  settings and the data's key) in place of accelerate's `random_states_0.pkl`: a stopped run
  resumed from it gives the uninterrupted run's weights (upstream's own resume starts its data
  again from the first epoch). Each folder is written whole, then renamed into place.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe.engines.base import TrainingError, TrainStep
from koe.engines.omnivoice.finetune.objective import batch_loss
from koe.engines.omnivoice.finetune.pipeline import Grouping, ProcessorSettings, base_seed, collate, epoch_batches
from koe.engines.omnivoice.finetune.shards import Sample
from koe.engines.omnivoice.model import OmniVoiceLM

__all__ = ["SCHEDULES", "StepReport", "TrainSettings", "lr_factor", "run", "warmup_of"]

SCHEDULES = ("cosine", "constant")
STATE_NAME = "koe_state.pt"


@dataclass(frozen=True)
class TrainSettings:
    """Upstream's training settings (`TrainingConfig`, its defaults), by koe's names."""

    steps: int = 300000  # updates in all
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_updates: int | None = None  # None: upstream's default, 3% of `steps` rounded up
    schedule: str = "cosine"  # or "constant" (after the warm-up)
    batch_tokens: int = 8192  # tokens of a batch (its longest sample x (its samples + 1) reaching this closes it)
    max_clips: int = 64  # samples of a batch at most (upstream's max_batch_size)
    min_sample_tokens: int = 50  # samples shorter (text and audio, after the draws) are skipped, as upstream does
    max_sample_tokens: int = 2000  # and longer ones
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # 0: no clipping
    save_every: int = 10000  # a checkpoint every N updates (and at the end)
    seed: int = 42
    workers: int = 8  # upstream's data-loader workers: each draws from its own seeds


@dataclass(frozen=True)
class StepReport(TrainStep):
    """One batch done (the kit's fields: the epoch and batch of the data, the updates, the loss),
    then the gradient norm (on updates, with clipping on) and the rate the batch's update uses."""

    grad_norm: float | None
    lr: float


def warmup_of(s: TrainSettings) -> int:
    return math.ceil(s.steps * 0.03) if s.warmup_updates is None else s.warmup_updates


def lr_factor(step: int, s: TrainSettings) -> float:
    """The schedule's factor at scheduler step `step` (transformers' warm-up, then cosine or constant)."""
    warmup = warmup_of(s)
    if step < warmup:
        return float(step) / float(max(1, warmup))
    if s.schedule == "constant":
        return 1.0
    progress = float(step - warmup) / float(max(1, s.steps - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def run(
    model: OmniVoiceLM,
    shards: list[list[Sample]],
    out: Path,
    settings: TrainSettings,
    *,
    tokenize: Callable[[str], list[int]],
    pad_id: int,
    write_extra: Callable[[Path], None] = lambda folder: None,
    on_step: Callable[[StepReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    device: str | torch.device = "cpu",
    resume: dict | None = None,
    data_key: str = "",
) -> int:
    """Train `model` (the base's weights loaded) on `shards` (each shard's samples in order);
    checkpoints go to `out`, each completed by `write_extra(folder)` (config, tokenizer files).
    `should_stop()` is asked after each update (a stop writes a checkpoint first). `resume`: what
    a checkpoint this function wrote holds (`koe_state.pt`'s entries, and its `optimizer` and
    `scheduler` states), with its weights already loaded into `model`; the run goes on from it as
    if it had never stopped. Returns the updates done."""
    s = settings
    model.to(device).train().requires_grad_(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, s))
    processor, grouping = (
        ProcessorSettings(audio_mask_id=model.config.audio_mask_id),
        Grouping(s.batch_tokens, s.min_sample_tokens, s.max_sample_tokens, s.max_clips),
    )
    loader = torch.Generator().manual_seed(s.seed)
    out.mkdir(parents=True, exist_ok=True)
    epoch, index, update, micro, base = 0, 0, 0, 0, None
    if resume is not None:
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        where = resume["koe"]
        epoch, index, update, micro, base = where["epoch"], where["index"], where["update"], where["micro"], where["base"]
        loader.set_state(where["loader_rng"])
    if base is None:
        base = base_seed(loader)
    batches = epoch_batches(shards, epoch, base, s.workers, tokenize, processor, grouping)

    def save() -> None:
        where = {"epoch": epoch, "index": index, "update": update, "micro": micro, "base": base, "loader_rng": loader.get_state()}
        save_checkpoint(out, update, model, optimizer, scheduler, s, where, data_key, write_extra)

    while update < s.steps:
        if index == len(batches):
            epoch, index = epoch + 1, 0
            base = base_seed(loader)
            batches = epoch_batches(shards, epoch, base, s.workers, tokenize, processor, grouping)
            if not batches:
                raise TrainingError(
                    f"epoch {epoch} has no batch: every sample was skipped (min_sample_tokens {s.min_sample_tokens}, max_sample_tokens {s.max_sample_tokens})"
                )
        batch = collate(batches[index], pad_id)
        index += 1
        lr = optimizer.param_groups[0]["lr"]
        loss = batch_loss(model, batch, device)
        (loss / s.grad_accum).backward()
        micro += 1
        norm = None
        sync = micro % s.grad_accum == 0
        if sync:
            if s.max_grad_norm > 0:
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), s.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            update += 1
        if on_step is not None:
            epochs = max(epoch + 1, math.ceil(s.steps * s.grad_accum / len(batches)))  # an estimate: epochs differ in batches
            on_step(StepReport(epoch, epochs, index, len(batches), update, loss.item(), None if norm is None else norm.item(), lr))
        if not sync:
            continue
        if update % s.save_every == 0 or update == s.steps:
            save()
        if update < s.steps and should_stop is not None and should_stop():
            if update % s.save_every:
                save()
            return update
    return update


def checkpoint_name(update: int) -> str:
    return f"checkpoint-{update}"


def save_checkpoint(
    out: Path,
    update: int,
    model: OmniVoiceLM,
    optimizer: torch.optim.Optimizer,
    scheduler,
    s: TrainSettings,
    where: dict,
    data_key: str,
    write_extra: Callable[[Path], None],
) -> Path:
    """`out/checkpoint-<update>/` in upstream's layout plus `koe_state.pt`, written whole first."""
    final = out / checkpoint_name(update)
    partial = out / f".{final.name}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    save_file({k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}, str(partial / "model.safetensors"), metadata={"format": "pt"})
    torch.save(optimizer.state_dict(), partial / "optimizer.bin")
    torch.save(scheduler.state_dict(), partial / "scheduler.bin")
    (partial / "train_config.json").write_text(json.dumps(upstream_config(s), indent=4), encoding="utf-8")
    write_extra(partial)
    torch.save({"koe": where, "settings": asdict(s), "data": data_key}, partial / STATE_NAME)
    if final.exists():
        shutil.rmtree(final)
    partial.rename(final)
    return final


def upstream_config(s: TrainSettings) -> dict:
    """The `TrainingConfig` fields upstream's trainer takes for these settings (its other fields
    at their defaults): `omnivoice.cli.train --train_config` with this runs the same recipe."""
    return {
        "learning_rate": s.lr,
        "weight_decay": s.weight_decay,
        "max_grad_norm": s.max_grad_norm,
        "steps": s.steps,
        "seed": s.seed,
        "lr_scheduler_type": s.schedule,
        "warmup_type": "steps",
        "warmup_steps": warmup_of(s),
        "batch_tokens": s.batch_tokens,
        "gradient_accumulation_steps": s.grad_accum,
        "num_workers": s.workers,
        "mixed_precision": "no",
        "allow_tf32": False,
        "attn_implementation": "sdpa",
        "max_sample_tokens": s.max_sample_tokens,
        "min_sample_tokens": s.min_sample_tokens,
        "max_batch_size": s.max_clips,
        "save_steps": s.save_every,
    }
