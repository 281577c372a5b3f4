"""Upstream's fine-tuning loop (f5-tts 1.1.22's `Trainer.train` as `finetune_cli.py` runs it), on
one process: the same updates, draw for draw, and checkpoints in upstream's format.

- The model and its EMA start from the checkpoint's EMA weights; the EMA keeps the checkpoint's
  counters (`initted`, `step`) and follows `ema_pytorch` 0.8.3's rules: one call per update, the
  weights copied every 10th call up to call 100, then `lerp` towards the model every 10th call with
  decay `min(1 - (1 + n)^(-2/3), 0.9999)` (n: calls past 101).
- AdamW (fused, torch's defaults but the rate), a linear warm-up from 1e-8 of the rate over
  `warmup_updates` then a linear decay to 1e-8 of it over the rest (`SequentialLR`).
- Batches by frames (`batches.py`) in the order upstream's loaders ask for them (`loader_epoch`);
  a loader's first start draws one int64 from torch's generator (its persistent workers' base
  seed), then every batch's loss draws (`objective.py`).
- Gradient accumulation as accelerate does it: the loss divided by `grad_accum`, the optimizer and
  scheduler stepped (and the gradients clipped to `max_grad_norm`) every `grad_accum` batches and
  at each epoch's last.
- `model_last.pt` every `last_every` updates and at the end, `model_<update>.pt` every
  `save_every`: `model_state_dict`, `optimizer_state_dict`, `ema_model_state_dict`,
  `scheduler_state_dict`, `update`, as upstream writes them (its inference and its trainer read
  them), and koe's `koe` entry: where the run goes on and both generators' states, so a stopped
  run resumed gives the uninterrupted run's weights (upstream's own resume draws anew). Each is
  written whole, then put in place: a run killed while saving leaves the one before.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from koe.engines.base import TrainStep
from koe.engines.f5_tts.dit import F5Model
from koe.engines.f5_tts.finetune.batches import epoch_order, frame_batches, frame_length
from koe.engines.f5_tts.finetune.data import Item, collate
from koe.engines.f5_tts.finetune.objective import Objective, pad_ids

__all__ = ["Ema", "StepReport", "TrainSettings", "run"]


@dataclass(frozen=True)
class TrainSettings:
    """Upstream's fine-tuning settings (`finetune_cli.py`'s arguments, its defaults)."""

    epochs: int = 100
    lr: float = 1e-5
    warmup_updates: int = 20000
    frames_per_batch: int = 3200
    max_clips: int = 64  # clips per batch (0: any number)
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # 0: no clipping
    save_every: int = 50000  # model_<update>.pt
    last_every: int = 5000  # model_last.pt
    seed: int = 0  # torch's and Python's generators, seeded when training starts
    shuffle_seed: int = 666  # the batches' order (upstream's `resumable_with_seed`)
    gradient_checkpointing: bool = False  # less memory, more time, the same bits (upstream's `checkpoint_activations`)


@dataclass(frozen=True)
class StepReport(TrainStep):
    """One batch done (the kit's fields, then the gradient norm and the rate)."""

    grad_norm: float | None  # on optimizer steps (with clipping on)
    lr: float  # the rate this batch's update used


class Ema:
    """ema_pytorch 0.8.3's `EMA` as upstream's trainer builds it (beta 0.9999, updates after call
    100, every 10 calls), over the model's parameters."""

    BETA, AFTER, EVERY, POWER = 0.9999, 100, 10, 2 / 3

    def __init__(self, model: torch.nn.Module, initted: bool, step: int) -> None:
        self.weights = {name: p.detach().clone() for name, p in model.named_parameters()}
        self.buffers = {name: b.detach().clone() for name, b in model.state_dict().items() if name not in self.weights}  # the saved ones
        self.initted = torch.tensor(initted)
        self.step = torch.tensor(step)

    def update(self, model: torch.nn.Module) -> None:
        step = self.step.item()
        self.step += 1
        if not self.initted.item():
            self._copy(model)
            self.initted.copy_(torch.tensor(True))
            return
        if step % self.EVERY:
            return
        if step <= self.AFTER:
            self._copy(model)
            return
        weight = 1.0 - self._decay()
        with torch.no_grad():
            for name, p in model.named_parameters():
                self.weights[name].lerp_(p.detach(), weight)

    def _decay(self) -> float:
        epoch = (self.step - self.AFTER - 1).clamp(min=0.0)
        value = 1 - (1 + epoch / 1.0) ** -self.POWER
        if epoch.item() <= 0:
            return 0.0
        return value.clamp(min=0.0, max=self.BETA).item()

    def _copy(self, model: torch.nn.Module) -> None:
        with torch.no_grad():
            for name, p in model.named_parameters():
                self.weights[name].copy_(p.detach())

    def load_state_dict(self, state: dict[str, torch.Tensor], prefix: str = "ema_model.") -> None:
        """What `state_dict` gave: the counters and the weights."""
        self.initted = state["initted"].clone()
        self.step = state["step"].clone()
        for name in self.weights:
            self.weights[name].copy_(state[prefix + name])

    def state_dict(self, prefix: str = "ema_model.") -> dict[str, torch.Tensor]:
        """Upstream's `ema_model_state_dict`: the counters and the weights (and buffers) under `prefix`."""
        state = {"initted": self.initted.clone(), "step": self.step.clone()}
        state.update({prefix + k: v.clone() for k, v in {**self.weights, **self.buffers}.items()})
        return state


def loader_epoch(epoch: int) -> int:
    """The epoch upstream's batch sampler is set to when training epoch `epoch` (from 0) starts.

    Upstream's trainer (given `resumable_with_seed`) reads its first epoch from a second data loader
    made by accelerate's `skip_first_batches` (skipping none on a fresh start), the others from the
    first; each loader sets the shared sampler's epoch to the number of passes it has made itself.
    So epochs 0 and 1 both see the sampler's epoch 0, epoch k > 1 sees k - 1 (and each loader's
    first start draws from torch's generator: epochs 0 and 1)."""
    return max(epoch - 1, 0)


def run(
    model: F5Model,
    items: list[Item],
    out: Path,
    settings: TrainSettings,
    *,
    ema_counters: tuple[bool, int] = (False, 0),
    on_step: Callable[[StepReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    device: str | torch.device = "cpu",
    resume: dict | None = None,
    data_key: str = "",
) -> int:
    """Fine-tune `model` (the checkpoint's EMA weights loaded) on `items`; checkpoints go to `out`.
    `should_stop()` is asked after each update (a stop saves `model_last.pt` first). `resume`: a
    `model_last.pt` this function wrote; the run goes on from it as if it had never stopped (its
    `koe` entry keeps where the run was, both generators' states, the settings and `data_key`).
    Returns the updates done."""
    s = settings
    model.to(device)
    dit = model.transformer
    model.train().requires_grad_(True)
    ema = Ema(model, *ema_counters)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr, fused=True)
    batches = frame_batches([frame_length(item.duration) for item in items], s.frames_per_batch, s.max_clips)
    total = math.ceil(len(batches) / s.grad_accum) * s.epochs
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1e-8, end_factor=1.0, total_iters=s.warmup_updates)
    decay = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=1e-8, total_iters=total - s.warmup_updates)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, schedulers=[warmup, decay], milestones=[s.warmup_updates])
    objective = Objective(checkpointed=s.gradient_checkpointing)
    out.mkdir(parents=True, exist_ok=True)

    def save(update: int, name: str, epoch: int, batch: int) -> None:
        """Upstream's checkpoint, plus where the run goes on (`epoch`, `batch`: the next batch)."""
        state = {
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "ema_model_state_dict": ema.state_dict(),
            "scheduler_state_dict": scheduler.state_dict(),
            "update": update,
            "koe": {
                "epoch": epoch,
                "batch": batch,
                "torch_rng": torch.get_rng_state(),
                "python_rng": random.getstate(),
                "settings": asdict(s),
                "data": data_key,
            },
        }
        partial = out / f".{name}.partial"
        torch.save(state, partial)
        partial.replace(out / name)  # a run killed while saving leaves the checkpoint before

    start_epoch, start_batch, update = 0, 0, 0
    if resume is None:
        torch.manual_seed(s.seed)
        random.seed(s.seed)
    else:
        model.load_state_dict(resume["model_state_dict"])
        optimizer.load_state_dict(resume["optimizer_state_dict"])
        scheduler.load_state_dict(resume["scheduler_state_dict"])
        ema.load_state_dict(resume["ema_model_state_dict"])
        where = resume["koe"]
        start_epoch, start_batch, update = where["epoch"], where["batch"], resume["update"]
        torch.set_rng_state(where["torch_rng"])
        random.setstate(_python_state(where["python_rng"]))
    for epoch in range(start_epoch, s.epochs):
        first = start_batch if epoch == start_epoch else 0
        if epoch < 2 and first == 0:  # a data loader's first start draws its (persistent) workers' base seed
            torch.empty((), dtype=torch.int64).random_()
        order = epoch_order(batches, s.shuffle_seed, loader_epoch(epoch))
        for index in range(first, len(order)):
            mel, lens, rows = collate([items[i] for i in order[index]])
            lr = optimizer.param_groups[0]["lr"]
            step = objective(dit, mel.to(device), pad_ids(rows).to(device), lens.to(device))
            (step.loss / s.grad_accum).backward()
            sync = (index + 1) % s.grad_accum == 0 or index == len(order) - 1
            norm = None
            if sync:
                if s.max_grad_norm > 0:
                    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), s.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                ema.update(model)
                update += 1
            if on_step is not None:
                on_step(StepReport(epoch, s.epochs, index + 1, len(order), update, step.loss.item(), None if norm is None else norm.item(), lr))
            if not sync:
                continue
            following = (epoch, index + 1) if index + 1 < len(order) else (epoch + 1, 0)
            if update % s.last_every == 0:
                save(update, "model_last.pt", *following)
            if update % s.save_every == 0:
                save(update, f"model_{update}.pt", *following)
            if should_stop is not None and should_stop():
                save(update, "model_last.pt", *following)
                return update
    save(update, "model_last.pt", s.epochs, 0)
    return update


def _python_state(saved) -> tuple:
    """`random.getstate()` as saved (a checkpoint read back may hold its tuples as lists)."""
    version, internal, gauss = saved
    return (version, tuple(internal), gauss)
