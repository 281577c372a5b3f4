"""Upstream's fine-tuning loop (voxcpm 2.0.3's `scripts/train_voxcpm_finetune.py`, whole model,
one process): the same updates, draw for draw, and checkpoints in upstream's layout.

- torch's generator seeded (upstream's `Accelerator(seed=42)`), then moved as upstream's model
  construction moves it (`draws.replay_construction`).
- The data: a shuffling loader over the clips, `batch_size` a batch, the last partial batch of an
  epoch dropped. Each pass (upstream makes a new iterator when one runs out, in the middle of an
  update if need be) draws two int64 from torch's generator: the loader's base seed, then the
  sampler's seed, whose own generator gives the pass's `randperm`.
- An update: `grad_accum` batches, each loss `(diff * 1.0 / grad_accum) + (stop * 1.0 /
  grad_accum)` back-propagated, the gradients clipped (`max_grad_norm`; upstream clips at 1e9 when
  it is 0, which only measures the norm), AdamW (torch's, `weight_decay`), then transformers'
  cosine schedule with linear warm-up (`warmup_updates`, over `steps`). `progress` (the condition
  noise's schedule) is update / steps.
- With LoRA settings only the adapters train (`koe.engines.voxcpm.lora`), and a checkpoint holds
  `lora_weights.safetensors` and `lora_config.json` instead of the model's files.
- Checkpoints as upstream writes them, in `out/step_<7 digits>/` at update 0, every `save_every`,
  the last, and once more after the loop (`step_<steps>`, the same weights), each also as
  `out/latest/` (hard links where the file system has them): `model.safetensors` (every weight but the AudioVAE's), the base folder's
  `config.json`, `audiovae.*` and tokenizer files (so each is a model folder upstream and koe
  load), `optimizer.pth`, `scheduler.pth`, `training_state.json`. koe adds `koe.pt` (where the
  data is, the generator's state, the settings, the data's key): a stopped run resumed from
  `latest/` gives the uninterrupted run's weights (upstream's own resume repeats the saved update
  and draws anew). A folder is written whole, then put in place.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from koe.engines.base import TrainStep
from koe.engines.voxcpm.finetune.objective import losses, pack
from koe.engines.voxcpm.lora import CONFIG_FILE, WEIGHTS_FILE, LoRAConfig, adapters, load_adapters
from koe.engines.voxcpm.model import VoxCPMModel

__all__ = ["BASE_FILES", "LoRASettings", "StepReport", "TrainSettings", "cosine_with_warmup", "run"]

BASE_FILES = ("config.json", "audiovae.pth", "audiovae.safetensors", "tokenizer.json", "special_tokens_map.json", "tokenizer_config.json")


@dataclass(frozen=True)
class TrainSettings:
    """Upstream's fine-tuning settings (`conf/voxcpm_v2/voxcpm_finetune_all.yaml`'s values)."""

    steps: int = 1000  # updates (upstream's num_iters, and max_steps: the schedule's length)
    lr: float = 1e-5
    weight_decay: float = 0.01
    warmup_updates: int = 100
    batch_size: int = 2
    grad_accum: int = 8
    max_grad_norm: float = 1.0  # 0: no clipping
    max_batch_tokens: int = 8192  # a clip's sequence may be at most max_batch_tokens // batch_size long (0: any)
    save_every: int = 500
    seed: int = 42  # upstream's Accelerator seeds 42 before it builds the model


@dataclass(frozen=True)
class LoRASettings(TrainSettings):
    """Upstream's LoRA fine-tuning settings (`voxcpm_finetune_lora.yaml`): adapters on the two LMs'
    and the DiT's attention projections (`lora_lm`, `lora_dit`), optionally on the model's
    projections (`lora_proj`), rank 32, alpha 32; everything else frozen."""

    lr: float = 1e-4
    lora_rank: int = 32
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_lm: bool = True
    lora_dit: bool = True
    lora_proj: bool = False

    def lora(self) -> LoRAConfig:
        return LoRAConfig(self.lora_lm, self.lora_dit, self.lora_proj, self.lora_rank, self.lora_alpha, self.lora_dropout)


@dataclass(frozen=True)
class StepReport(TrainStep):
    """One update done (the kit's fields: `batch` counts the epoch's batches), then the loss's parts."""

    diff: float
    stop: float
    grad_norm: float
    lr: float  # the rate this update used


def cosine_with_warmup(update: int, warmup: int, total: int) -> float:
    """The rate's factor at `update`: linear from 0 over `warmup`, then half a cosine to 0 at `total`
    (transformers' `get_cosine_schedule_with_warmup`, its arithmetic)."""
    if update < warmup:
        return float(update) / float(max(1, warmup))
    progress = float(update - warmup) / float(max(1, total - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))


class Batches:
    """Upstream's shuffling loader: a new pass when one runs out, each drawing its two seeds."""

    def __init__(self, count: int, batch_size: int) -> None:
        self.count, self.batch_size = count, batch_size
        self.per_epoch = count // batch_size
        self.epoch, self.index, self.order = -1, 0, []

    def _new_pass(self) -> None:
        torch.empty((), dtype=torch.int64).random_()  # the loader iterator's base seed
        seed = int(torch.empty((), dtype=torch.int64).random_().item())  # the sampler's
        self.order = torch.randperm(self.count, generator=torch.Generator().manual_seed(seed)).tolist()
        self.epoch, self.index = self.epoch + 1, 0

    def next(self) -> list[int]:
        if self.epoch < 0 or self.index >= self.per_epoch:
            self._new_pass()
        start = self.index * self.batch_size
        self.index += 1
        return self.order[start : start + self.batch_size]

    def state(self) -> dict:
        return {"epoch": self.epoch, "index": self.index, "order": list(self.order)}

    def restore(self, state: dict) -> None:
        self.epoch, self.index, self.order = state["epoch"], state["index"], list(state["order"])


def run(
    model: VoxCPMModel,
    patches: list[tuple[list[int], torch.Tensor]],
    base: Path,
    out: Path,
    settings: TrainSettings,
    *,
    on_step: Callable[[StepReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    device: str | torch.device = "cpu",
    resume: dict | None = None,
    data_key: str = "",
) -> int:
    """Fine-tune `model` (the generator already moved as upstream's construction moves it; with
    LoRA settings, its adapters added) on `patches` (each clip's token ids and latent patches);
    checkpoints go to `out`. `resume`: a `koe.pt` this function wrote (with `latest/` beside it).
    Returns the updates done."""
    s = settings
    lora = s.lora() if isinstance(s, LoRASettings) else None
    model.to(device).train().requires_grad_(lora is None)
    for p in adapters(model).values():
        p.requires_grad_(True)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=s.lr, weight_decay=s.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: cosine_with_warmup(update, s.warmup_updates, s.steps))
    batches = Batches(len(patches), s.batch_size)
    start = 0
    if resume is not None:
        latest = out / "latest"
        state = load_file(str(latest / (WEIGHTS_FILE if lora else "model.safetensors")))
        if lora is None:
            model.load_state_dict(state)
        else:
            load_adapters(model, state, latest)
        optimizer.load_state_dict(torch.load(latest / "optimizer.pth", map_location="cpu", weights_only=True))
        scheduler.load_state_dict(torch.load(latest / "scheduler.pth", map_location="cpu", weights_only=True))
        batches.restore(resume["batches"])
        torch.set_rng_state(resume["torch_rng"])
        start = resume["next_update"]

    def save(step: int, next_update: int) -> None:
        folder = out / f"step_{step:07d}"
        partial = out / f".step_{step:07d}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        if lora is None:  # the whole model, and the base's other files: a model folder
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(partial / "model.safetensors"))
            for name in BASE_FILES:
                if (base / name).is_file():
                    shutil.copy2(base / name, partial / name)
        else:  # the adapters, and what they are (upstream's lora_config.json)
            save_file({k: v.detach().contiguous() for k, v in adapters(model).items()}, str(partial / WEIGHTS_FILE))
            described = {"base_model": str(base), "lora_config": lora.as_upstream(model.cfg.architecture)}
            (partial / CONFIG_FILE).write_text(json.dumps(described, indent=2, ensure_ascii=False), encoding="utf-8")
        torch.save(optimizer.state_dict(), partial / "optimizer.pth")
        torch.save(scheduler.state_dict(), partial / "scheduler.pth")
        (partial / "training_state.json").write_text(json.dumps({"step": int(step)}))
        koe_state = {"next_update": next_update, "batches": batches.state(), "torch_rng": torch.get_rng_state(), "settings": asdict(s), "data": data_key}
        torch.save(koe_state, partial / "koe.pt")
        shutil.rmtree(folder, ignore_errors=True)
        partial.replace(folder)
        staged = out / ".latest.partial"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(folder, staged, copy_function=_link)  # the same files, never written again
        shutil.rmtree(out / "latest", ignore_errors=True)
        staged.replace(out / "latest")

    out.mkdir(parents=True, exist_ok=True)
    for step in range(start, s.steps):
        optimizer.zero_grad(set_to_none=True)
        lr = optimizer.param_groups[0]["lr"]
        for _ in range(s.grad_accum):
            batch = pack([patches[i] for i in batches.next()], model.cfg.max_length)
            parts = losses(model, _to(batch, device), progress=step / max(1, s.steps))
            total = 0.0 + parts.diff * 1.0 / s.grad_accum
            total = total + parts.stop * 1.0 / s.grad_accum
            total.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=s.max_grad_norm if s.max_grad_norm > 0 else 1e9)
        optimizer.step()
        scheduler.step()
        if on_step is not None:
            diff, stop = parts.diff.item(), parts.stop.item()
            epochs = math.ceil(s.steps * s.grad_accum / max(1, batches.per_epoch))
            on_step(StepReport(batches.epoch, epochs, batches.index, batches.per_epoch, step + 1, diff + stop, diff, stop, norm.item(), lr))
        stop = step < s.steps - 1 and should_stop is not None and should_stop()
        if stop or step % s.save_every == 0 or step == s.steps - 1:
            save(step, step + 1)
        if stop:
            return step + 1
    save(s.steps, s.steps)
    return s.steps


def _to(batch, device):
    for name, value in vars(batch).items():
        setattr(batch, name, value.to(device))
    return batch


def _link(source: str, target: str) -> None:
    """A hard link where the file system has them, else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
