"""Upstream VoxCPM fine-tuning: `scripts/train_voxcpm_finetune.py` of voxcpm 2.0.3's source
distribution (the wheel leaves it out; the oracle's build unpacks it to `<venv>/src/`), its
`train(**config)` called as its `__main__` does with a YAML config, for parity tests.

Job: {"model": folder, "clips": [{"audio", "text"}], "config": {the script's arguments but
pretrained_path, train_manifest and save_path}}.

The clips become the script's JSONL manifest. Each step's metrics (`loss/diff`, `loss/stop`,
`grad_norm`, and `lr`: the rate after the step's scheduler step) are taken from its tracker's
`log_metrics` (give `log_interval: 1`). Writes every `step_*` checkpoint's weights
(`<step folder>.<name>`: the model's, or a LoRA run's adapters), the final optimizer state (`optimizer.<index>.<state>`); info: the
metrics, the files written (relative to the run's folder), each checkpoint's training_state.json
(and a LoRA run's lora_config.json) and the scheduler's state.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import torch
from common import read_job, write_results


def main() -> None:
    job, out = read_job()
    import yaml
    from safetensors.torch import load_file
    from voxcpm.training import tracker

    metrics: list[dict] = []
    original = tracker.TrainingTracker.log_metrics

    def log_metrics(self, values, split="train"):
        metrics.append({k: float(v) for k, v in values.items()})
        return original(self, values, split=split)

    tracker.TrainingTracker.log_metrics = log_metrics
    script = next((Path(sys.prefix) / "src").glob("voxcpm-*/scripts/train_voxcpm_finetune.py"))
    manifest = out / "train.jsonl"
    manifest.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in job["clips"]))
    run = out / "run"
    config = {"pretrained_path": job["model"], "train_manifest": str(manifest), "save_path": str(run), **job["config"]}
    (out / "config.yaml").write_text(yaml.safe_dump(config))
    namespace = runpy.run_path(str(script), run_name="voxcpm_finetune")
    namespace["train"](**config)

    tensors: dict[str, torch.Tensor] = {}
    states = {}
    lora = {}
    for folder in sorted(run.glob("step_*")):
        weights = folder / "model.safetensors" if (folder / "model.safetensors").exists() else folder / "lora_weights.safetensors"
        tensors.update({f"{folder.name}.{k}": v for k, v in load_file(weights).items()})
        states[folder.name] = json.loads((folder / "training_state.json").read_text())
        if (folder / "lora_config.json").exists():
            lora[folder.name] = json.loads((folder / "lora_config.json").read_text())["lora_config"]  # its base_model: the job's model, as given
    optimizer = torch.load(run / "latest" / "optimizer.pth", map_location="cpu", weights_only=True)
    for index, state in optimizer["state"].items():
        tensors.update({f"optimizer.{index}.{k}": v if torch.is_tensor(v) else torch.tensor(v) for k, v in state.items()})
    scheduler = torch.load(run / "latest" / "scheduler.pth", map_location="cpu", weights_only=False)
    files = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file() and "logs" not in p.parts)
    info = {
        "metrics": metrics,
        "files": files,
        "states": states,
        "lora": lora,
        "scheduler": {"last_epoch": scheduler["last_epoch"], "_last_lr": scheduler["_last_lr"]},
    }
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
