"""`koe train lora` on a VoxCPM model: upstream's LoRA recipe (`voxcpm_finetune_lora.yaml`), the
same run as `koe train finetune` with only the adapters trained (`run.finetune` with
`LoRASettings`). The folder it writes speaks with the adapters, in koe and in upstream."""

from __future__ import annotations

from pathlib import Path

from koe.engines.voxcpm.finetune.run import Finetuned, finetune
from koe.engines.voxcpm.finetune.trainer import LoRASettings as TrainSettings

__all__ = ["TrainSettings", "train"]


def train(model: Path, data: Path, out: Path, settings: TrainSettings, *, device: str = "cpu", reporter=None, should_stop=None) -> Finetuned:
    """`koe train lora` on a VoxCPM model (the spec's `trainers`; `koe.service.training`)."""
    if reporter is not None:
        reporter.note(f"LoRA fine-tuning of {model.name} on {data} (upstream's train_voxcpm_finetune.py recipe with its lora config)")
    return finetune(model, data, out, settings, on_step=reporter.step if reporter is not None else None, should_stop=should_stop, device=device)
