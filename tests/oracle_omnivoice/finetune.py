"""Upstream OmniVoice's own trainer (`omnivoice.cli.train`'s path: `build_model_and_tokenizer`,
`build_dataloaders`, `OmniTrainer.train`), for parity tests.

Job: {"model": folder, "shards": [[tar, jsonl], ...], "config": {TrainingConfig's fields}}. As the
CLI does: the config with `init_from_checkpoint` = the folder and `data_config` = a data config
naming a manifest of the shards (written here, in order), the model and tokenizer built from the
folder, the data loaders (the padded SDPA path: `attn_implementation` "sdpa"), the trainer, its
`train()`. The job's config sets the rest (steps, lr, schedule, accumulation, clipping, workers,
`mixed_precision` "no" for float32).

Writes per batch `batch.<i>.<input_ids|labels|audio_mask|position_ids|attention_mask>` and `loss`,
per update `grad_norm` and `lr` (what the update used), the final checkpoint's weights
(`model.<name>`, from its `model.safetensors`) and optimizer state (`optimizer.<index>.<state>`);
info: the steps, the checkpoint folders and their files, the scheduler's state.
"""

from __future__ import annotations

import json

import torch
from common import read_job, write_results


def main() -> None:
    job, out = read_job()
    from omnivoice.models.omnivoice import OmniVoice
    from omnivoice.training.builder import build_dataloaders, build_model_and_tokenizer
    from omnivoice.training.config import TrainingConfig
    from omnivoice.training.trainer import OmniTrainer
    from safetensors.torch import load_file

    lines = []
    for tar, jsonl in job["shards"]:
        lines.append(f"{tar} {jsonl} 0 0.0\n")
    (out / "data.lst").write_text("".join(lines))
    (out / "data_config.json").write_text(json.dumps({"train": [{"manifest_path": [str(out / "data.lst")]}]}))

    run = out / "run"
    config = TrainingConfig(**job["config"])
    config.output_dir, config.data_config, config.init_from_checkpoint = str(run), str(out / "data_config.json"), job["model"]

    model, tokenizer = build_model_and_tokenizer(config)
    train_loader, _ = build_dataloaders(config, tokenizer)
    trainer = OmniTrainer(model=model, config=config, train_dataloader=train_loader, tokenizer=tokenizer)

    tensors: dict[str, torch.Tensor] = {}
    losses, norms, lrs = [], [], []
    forward = OmniVoice.forward

    def recorded_forward(self, **batch):
        i = len(losses)
        for name, value in batch.items():
            if isinstance(value, torch.Tensor):
                tensors[f"batch.{i}.{name}"] = value.clone()
        lrs.append(trainer.optimizer.param_groups[0]["lr"])
        output = forward(self, **batch)
        losses.append(output.loss.detach().clone())
        return output

    OmniVoice.forward = recorded_forward
    clip = trainer.accelerator.clip_grad_norm_

    def recorded_clip(*args, **kwargs):
        norm = clip(*args, **kwargs)
        norms.append(norm.detach().clone())
        return norm

    trainer.accelerator.clip_grad_norm_ = recorded_clip
    updates: list[int] = []
    step = trainer.optimizer.step

    def recorded_step(*args, **kwargs):
        if trainer.accelerator.sync_gradients:
            updates.append(len(losses) - 1)
        return step(*args, **kwargs)

    trainer.optimizer.step = recorded_step
    trainer.train()

    folders = sorted((p for p in run.iterdir() if p.name.startswith("checkpoint-")), key=lambda p: int(p.name.split("-")[-1]))
    last = folders[-1]
    tensors.update({f"model.{k}": v for k, v in load_file(str(last / "model.safetensors")).items()})
    optimizer = torch.load(last / "optimizer.bin", weights_only=True, map_location="cpu")
    for index, state in optimizer["state"].items():
        tensors.update({f"optimizer.{index}.{k}": v for k, v in state.items()})
    scheduler = torch.load(last / "scheduler.bin", weights_only=True, map_location="cpu")
    tensors["loss"] = torch.stack(losses)
    tensors["grad_norm"] = torch.stack(norms) if norms else torch.zeros(0)
    tensors["lr"] = torch.tensor([lrs[i] for i in updates], dtype=torch.float64)
    info = {
        "steps": trainer.global_step,
        "batches": len(losses),
        "updates_at": updates,
        "epochs": trainer.epoch,
        "checkpoints": {p.name: sorted(f.name for f in p.iterdir()) for p in folders},
        "param_groups": [{k: v for k, v in g.items() if k != "params"} for g in optimizer["param_groups"]],
        "scheduler": {k: v for k, v in scheduler.items() if k in ("last_epoch", "_step_count", "_last_lr", "base_lrs")},
    }
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
