"""The training loop: upstream's recipe (`sft_12hz.py` under accelerate) step for step, resumable.

What upstream's loop does, and koe with it:

- Data order: each epoch a fresh shuffle, drawn as torch's `DataLoader(shuffle=True)` draws it
  (one int64 for the loader's worker seed, one for the sampler's seed, then `randperm`), from a
  generator seeded with the run's seed: koe's seed N is upstream run right after
  `torch.manual_seed(N)`. Batches of `batch_size` in that order, the last one short.
- Gradient accumulation as accelerate does it with `gradient_accumulation_steps=4`: every loss is
  divided by 4 before `backward`; the optimizer steps on every 4th batch of an epoch and on its last
  batch (where the count starts again), so a short last group is still divided by 4.
- On each step: gradients clipped to norm 1.0 (over all parameters; those without a gradient are
  skipped), AdamW (lr, weight decay 0.01, torch's defaults otherwise), constant learning rate,
  gradients cleared.
- The new speaker's embedding is the speaker encoder's x-vector of the first example of the very
  first batch.

koe adds what a user needs around it: checkpoints at the end of every epoch (and every
`save_every` optimizer steps) that a later run resumes from to the same bits as an uninterrupted
run, a log, progress reports, and memory options that keep the results (gradient checkpointing;
the optimizer's state on the CPU when training on a GPU).

A checkpoint is written whole into `checkpoint.partial` (every file fsynced, `state.json` last and
atomically: a folder holding it is complete), then swapped in with two renames (`checkpoint` to
`checkpoint.old`, `checkpoint.partial` to `checkpoint`) and the old one removed. A crash anywhere
leaves a complete checkpoint under one of the three names: `recover_checkpoint`, at the start of
the next run, finishes the swap or takes `checkpoint.old` back (the export, a reader, takes the
newest complete one where it is: `latest_checkpoint`). A checkpoint whose
files are damaged anyway (a disk fault, a copy cut short) stops the run with a `TrainingError`
naming the file and saying what to do, never an exception from deep inside torch.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import torch
from safetensors.torch import load_file, save_file

from koe.engines.base import TrainingError, TrainStep
from koe.engines.qwen3_tts.finetune.batch import Batch, SpeakerExamples, collate
from koe.engines.qwen3_tts.finetune.lora import adapters, add_lora, merged_state
from koe.engines.qwen3_tts.finetune.objective import speaker_loss
from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
from koe.runtime.files import atomic_file, fsync_dir, fsync_tree, read_json_object

PRECISIONS = ("float32", "bfloat16")
CHECKPOINT, PARTIAL, OLD = "checkpoint", "checkpoint.partial", "checkpoint.old"  # in the run's training folder
STATE_FILE = "state.json"  # written last: a checkpoint folder holding it is complete
T = TypeVar("T")


@dataclass(frozen=True)
class TrainSettings:
    """The recipe's knobs, with upstream's defaults (`sft_12hz.py`: batch 2, lr 2e-5, 3 epochs,
    accumulation 4, weight decay 0.01, clip 1.0)."""

    epochs: int = 3
    lr: float = 2e-5
    batch_size: int = 2
    grad_accum: int = 4
    seed: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    precision: str = "float32"  # "bfloat16": upstream's own (bf16 weights and autocast); not bit-checked
    gradient_checkpointing: bool = False
    offload_optimizer: bool = False
    save_every: int = 0  # optimizer steps between extra checkpoints; 0: only at the end of each epoch
    lora_rank: int = 0  # > 0: train low-rank adapters instead of every weight (not upstream's recipe; lora.py)
    lora_alpha: float | None = None  # the adapters' scale is alpha / rank; None: 2 x rank

    @property
    def alpha(self) -> float:
        return float(self.lora_alpha) if self.lora_alpha is not None else 2.0 * self.lora_rank

    def check(self) -> None:
        problems = []
        for name in ("epochs", "batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1 (got {getattr(self, name)})")
        if not (math.isfinite(self.lr) and self.lr > 0):
            problems.append(f"lr must be a positive number (got {self.lr})")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            problems.append(f"weight_decay must be >= 0 (got {self.weight_decay})")
        if not (math.isfinite(self.max_grad_norm) and self.max_grad_norm > 0):
            problems.append(f"max_grad_norm must be positive (got {self.max_grad_norm})")
        if self.precision not in PRECISIONS:
            problems.append(f"precision must be one of {', '.join(PRECISIONS)} (got {self.precision!r})")
        if self.save_every < 0:
            problems.append(f"save_every must be >= 0 (got {self.save_every})")
        if self.lora_rank < 0:
            problems.append(f"lora_rank must be >= 0 (got {self.lora_rank}; 0 trains every weight)")
        if self.lora_alpha is not None and not (math.isfinite(self.lora_alpha) and self.lora_alpha > 0):
            problems.append(f"lora_alpha must be positive (got {self.lora_alpha})")
        if problems:
            raise TrainingError("; ".join(problems))

    def resume_key(self) -> dict:
        """What a checkpoint must share with a run that resumes it (epochs may grow)."""
        d = asdict(self)
        for free in ("epochs", "gradient_checkpointing", "offload_optimizer", "save_every"):
            d.pop(free)
        return d


@dataclass(frozen=True)
class StepReport(TrainStep):
    """One batch done: what a progress bar or a log line shows (the kit's fields, then the loss's parts)."""

    talker_loss: float
    code_predictor_loss: float
    grad_norm: float | None  # on optimizer steps
    seconds: float  # this batch's wall time


@dataclass
class RunState:
    """Where a run is: saved in every checkpoint."""

    epoch: int = 0
    next_batch: int = 0
    order: list[int] | None = None  # this epoch's shuffle, drawn at its start
    accum_count: int = 0  # batches since the epoch's start, as accelerate counts them
    optimizer_steps: int = 0
    losses: list[float] = field(default_factory=list)  # every batch's loss so far


def epoch_order(generator: torch.Generator, n: int) -> list[int]:
    """The example order of one epoch, drawn as `DataLoader(shuffle=True)` (no workers) draws it."""
    torch.empty((), dtype=torch.int64).random_(generator=generator)  # the loader's worker base seed
    seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


class SpeakerTrainer:
    """Trains `net` (a Base model's network, on its device) on `examples`; checkpoints in `folder`."""

    def __init__(
        self,
        net: Qwen3TTSNetwork,
        examples: SpeakerExamples,
        settings: TrainSettings,
        folder: Path,
        fingerprint: str,
        on_step: Callable[[StepReport], None] | None = None,
    ) -> None:
        settings.check()
        self.net, self.examples, self.settings = net, examples, settings
        self.cfg = net.cfg
        self.folder = Path(folder)
        self.fingerprint = fingerprint  # of the prepared data and the base model: a checkpoint is for them only
        self.on_step = on_step
        self.device = net.talker.codec_head.weight.device
        self.generator = torch.Generator().manual_seed(settings.seed)
        self.trained_parameters = sum(p.numel() for p in net.parameters())
        if settings.lora_rank:
            self.trained_parameters = add_lora(net, settings.lora_rank, settings.alpha, settings.seed)
        self.optimizer = make_optimizer(net, settings)
        self.state = RunState()
        self.target: torch.Tensor | None = None  # the new speaker's embedding (C,)

    @property
    def checkpoint(self) -> Path:
        return self.folder / CHECKPOINT

    # ------------------------------------------------------------------ the loop
    def run(self, should_stop: Callable[[], bool] | None = None) -> bool:
        """Train to the last epoch, resuming from the checkpoint if there is one. Returns False when
        `should_stop()` asked to stop early (after a checkpoint), True when training finished."""
        s = self.settings
        self.resume()
        self.net.train()
        n = len(self.examples)
        while self.state.epoch < s.epochs:
            st = self.state
            if st.order is None:
                st.order = epoch_order(self.generator, n)
            batches = [st.order[i : i + s.batch_size] for i in range(0, n, s.batch_size)]
            while st.next_batch < len(batches):
                started = time.perf_counter()
                last = st.next_batch == len(batches) - 1
                st.accum_count = 0 if last else st.accum_count + 1
                sync = last or st.accum_count % s.grad_accum == 0
                loss = self.backward(collate([self.examples[i] for i in batches[st.next_batch]], self.cfg))
                norm = self.step() if sync else None
                st.next_batch += 1
                total, talker, predictor = (float(x.detach()) for x in (loss.total, loss.talker, loss.code_predictor))
                st.losses.append(total)
                self.report(
                    StepReport(
                        st.epoch, s.epochs, st.next_batch, len(batches), st.optimizer_steps, total, talker, predictor, norm, time.perf_counter() - started
                    )
                )
                if sync and not last and s.save_every and st.optimizer_steps % s.save_every == 0:
                    self.save()
                    if should_stop is not None and should_stop():
                        return False
            st.epoch, st.next_batch, st.order, st.accum_count = st.epoch + 1, 0, None, 0
            self.save()
            if should_stop is not None and should_stop() and st.epoch < s.epochs:
                return False
        return True

    def backward(self, batch: Batch):
        """Forward and backward of one batch, its loss divided by the accumulation steps."""
        batch = to_device(batch, self.device)
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16) if self.settings.precision == "bfloat16" else nullcontext()
        with autocast:
            loss = speaker_loss(self.net, batch, checkpointing=self.settings.gradient_checkpointing)
        if self.target is None:
            self.target = loss.speaker_embedding[0].detach().clone()
        (loss.total / self.settings.grad_accum).backward()
        return loss

    def step(self) -> float:
        """Clip, step, clear: one optimizer step. Returns the gradient norm before clipping."""
        norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.settings.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.state.optimizer_steps += 1
        return float(norm)

    def report(self, r: StepReport) -> None:
        line = (
            f"epoch {r.epoch + 1}/{r.epochs} batch {r.batch}/{r.batches} step {r.optimizer_steps} "
            f"loss {r.loss:.4f} talker {r.talker_loss:.4f} code_predictor {r.code_predictor_loss:.4f}"
            + (f" grad_norm {r.grad_norm:.4f}" if r.grad_norm is not None else "")
            + f" {r.seconds:.2f}s"
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / "train.log").open("a", encoding="utf-8") as f:
            f.write(line + "\n")
        if self.on_step is not None:
            self.on_step(r)

    # ------------------------------------------------------------------ checkpoints
    def trained_state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps of the talker: every weight, or with LoRA the adapters only."""
        if self.settings.lora_rank:
            return adapters(self.net.talker)
        return self.net.talker.state_dict()

    def export_state(self) -> dict[str, torch.Tensor]:
        """The talker's weights in the released names (LoRA adapters merged)."""
        if self.settings.lora_rank:
            return merged_state(self.net.talker)
        return self.net.talker.state_dict()

    def save(self) -> None:
        """Write the checkpoint (weights, optimizer, generator, run state) whole, then swap it in (see the module docstring)."""
        tmp = self.folder / PARTIAL
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_file({k: v.detach().contiguous().cpu() for k, v in self.trained_state().items()}, str(tmp / "talker.safetensors"))
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        extra = {"generator": self.generator.get_state()}
        if self.target is not None:
            extra["target_speaker_embedding"] = self.target.cpu().contiguous()
        save_file(extra, str(tmp / "trainer.safetensors"))
        fsync_tree(tmp)
        meta = {"settings": asdict(self.settings), "resume_key": self.settings.resume_key(), "fingerprint": self.fingerprint, "state": asdict(self.state)}
        with atomic_file(tmp / STATE_FILE, "w", encoding="utf-8") as f:
            f.write(json.dumps(meta, indent=1))
        fsync_dir(tmp)
        install_partial(self.folder)

    def resume(self) -> None:
        """Continue from the run's checkpoint if there is one (made by the same recipe on the same data)."""
        checkpoint = recover_checkpoint(self.folder)
        if checkpoint is None:
            return
        meta = read_checkpoint_state(checkpoint)
        if meta.get("fingerprint") != self.fingerprint:
            raise TrainingError(f"{checkpoint} was made from other data or another base model; remove it (or use another output folder) to start again")
        if meta.get("resume_key") != self.settings.resume_key():
            theirs, ours = meta.get("resume_key") or {}, self.settings.resume_key()
            diff = ", ".join(f"{k} {theirs.get(k)!r} (now {ours[k]!r})" for k in ours if theirs.get(k) != ours[k])
            raise TrainingError(f"{checkpoint} was trained with {diff}; pass the same settings to resume, or remove it to start again")
        read_checkpoint_file(checkpoint, "talker.safetensors", self._restore_talker)
        read_checkpoint_file(checkpoint, "optimizer.pt", lambda p: self.optimizer.load_state_dict(torch.load(p, weights_only=True)))
        read_checkpoint_file(checkpoint, "trainer.safetensors", self._restore_trainer)
        self.state = read_checkpoint_file(checkpoint, STATE_FILE, lambda p: RunState(**meta["state"]))
        with (self.folder / "train.log").open("a", encoding="utf-8") as f:  # batches after the checkpoint may be logged twice
            f.write(
                f"# resumed from the checkpoint: epoch {self.state.epoch + 1}, batch {self.state.next_batch + 1}, "
                f"{self.state.optimizer_steps} optimizer steps\n"
            )

    def _restore_talker(self, path: Path) -> None:
        weights = load_file(str(path), device=str(self.device))
        if self.settings.lora_rank:
            if weights.keys() != adapters(self.net.talker).keys():
                raise TrainingError(f"{path.parent} does not hold this run's LoRA adapters; remove it to start again")
            self.net.talker.load_state_dict(weights, strict=False)
        else:
            self.net.talker.load_state_dict(weights, strict=True)

    def _restore_trainer(self, path: Path) -> None:
        extra = load_file(str(path))
        self.generator.set_state(extra["generator"])
        target = extra.get("target_speaker_embedding")
        self.target = target.to(self.device) if target is not None else None


# ---------------------------------------------------------------------------- checkpoint folders
def install_partial(folder: Path) -> None:
    """Make the complete `checkpoint.partial` in `folder` the checkpoint: the last one is renamed to
    `checkpoint.old`, the new one into place, then the old one removed. Each rename is made durable
    before the next; a crash between them leaves `checkpoint.old` and the complete `checkpoint.partial`."""
    partial, current, old = folder / PARTIAL, folder / CHECKPOINT, folder / OLD
    shutil.rmtree(old, ignore_errors=True)
    if current.exists():
        os.replace(current, old)
        fsync_dir(folder)
    os.replace(partial, current)
    fsync_dir(folder)
    shutil.rmtree(old, ignore_errors=True)


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The newest complete checkpoint in the run's training `folder`, changing nothing (for a reader
    such as the export): `checkpoint.partial` when complete (a crash cut its swap short), else
    `checkpoint`, else `checkpoint.old`; None when there is none. A `checkpoint` without its state
    file is damaged: a TrainingError."""
    folder = Path(folder)
    current = folder / CHECKPOINT
    if current.exists() and not (current / STATE_FILE).is_file():
        raise damaged_checkpoint(current, f"{STATE_FILE} is missing")
    return next((c for c in (folder / PARTIAL, current, folder / OLD) if (c / STATE_FILE).is_file()), None)


def recover_checkpoint(folder: str | Path) -> Path | None:
    """The run's latest complete checkpoint (see `latest_checkpoint`), made `folder/checkpoint` again:
    a complete `checkpoint.partial` is swapped in, a `checkpoint.old` left alone is renamed back. For
    the run itself, at its start; None when there is no checkpoint. An incomplete `checkpoint.partial`
    is left for the next save to replace."""
    folder = Path(folder)
    latest = latest_checkpoint(folder)
    if latest is None:
        return None
    if latest.name == PARTIAL:
        install_partial(folder)
    elif latest.name == OLD:
        os.replace(latest, folder / CHECKPOINT)
        fsync_dir(folder)
    return folder / CHECKPOINT


def read_checkpoint_file(checkpoint: Path, name: str, read: Callable[[Path], T]) -> T:
    """`read(checkpoint / name)`, or a TrainingError naming the file when it is missing or damaged
    (torn by a crash, cut short by a copy, not what this recipe writes)."""
    try:
        return read(checkpoint / name)
    except TrainingError:
        raise
    except FileNotFoundError as e:
        raise damaged_checkpoint(checkpoint, f"{name} is missing") from e
    except Exception as e:  # safetensors and torch.load raise many types for a damaged file
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0].removeprefix(f"{checkpoint / name}: ")[:200]
        raise damaged_checkpoint(checkpoint, f"{name} cannot be read ({reason})") from e


def read_checkpoint_state(checkpoint: Path) -> dict:
    """The checkpoint's `state.json` (settings, resume key, data fingerprint, run state), or a TrainingError naming it."""

    def read(path: Path) -> dict:
        meta = read_json_object(path)
        if not all(isinstance(meta.get(k), dict) for k in ("settings", "resume_key", "state")):
            raise ValueError("not the state of a koe training checkpoint")
        return meta

    return read_checkpoint_file(checkpoint, STATE_FILE, read)


def damaged_checkpoint(checkpoint: Path, what: str) -> TrainingError:
    return TrainingError(
        f"the training checkpoint {checkpoint} is damaged: {what}",
        hint=f"remove the folder {checkpoint} to train again from the first epoch (the prepared data is kept)",
    )


def make_optimizer(net: Qwen3TTSNetwork, s: TrainSettings):
    """AdamW over every parameter, as upstream's (parameters that get no gradient are left alone);
    with LoRA over the adapters."""
    params = [p for p in net.parameters() if p.requires_grad] if s.lora_rank else list(net.parameters())
    if s.offload_optimizer and params[0].device.type != "cpu":
        return OffloadedAdamW(params, lr=s.lr, weight_decay=s.weight_decay)
    return torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay)


class OffloadedAdamW:
    """AdamW whose moments live on the CPU: at each step the gradients go to CPU copies of the
    parameters, AdamW steps there, and the new values are copied back. It saves two parameter-sized
    buffers of accelerator memory per parameter; the arithmetic is torch's CPU AdamW."""

    def __init__(self, params: list[torch.nn.Parameter], lr: float, weight_decay: float) -> None:
        self.params = params
        self.shadows = [torch.nn.Parameter(p.detach().to("cpu", copy=True)) for p in params]
        self.inner = torch.optim.AdamW(self.shadows, lr=lr, weight_decay=weight_decay)

    def step(self) -> None:
        for p, s in zip(self.params, self.shadows):
            s.grad = None if p.grad is None else p.grad.detach().to("cpu")
        self.inner.step()
        with torch.no_grad():
            for p, s in zip(self.params, self.shadows):
                if s.grad is not None:
                    p.copy_(s, non_blocking=False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None
        self.inner.zero_grad(set_to_none=True)

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)
        with torch.no_grad():
            for p, s in zip(self.params, self.shadows):
                s.copy_(p.detach().cpu())


def to_device(batch: Batch, device: torch.device) -> Batch:
    if device.type == "cpu":
        return batch
    moved = {k: (v.to(device) if isinstance(v, torch.Tensor) else [m.to(device) for m in v]) for k, v in batch.__dict__.items()}
    return Batch(**moved)
