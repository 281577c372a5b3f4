"""Upstream OmniVoice's training forward and backward on a model folder, for parity tests.

Job: {"model": folder, "tensors": file, "batches": [prefix, ...]}. The model as upstream's trainer
builds it (`build_model_and_tokenizer` with `init_from_checkpoint` = the folder, SDPA attention,
float32) in training mode. Per batch: the tensors `<prefix>.input_ids`, `.labels`, `.audio_mask`,
`.position_ids`, `.attention_mask` (a collated padded batch) through `model(**batch)`, then
`loss.backward()`. Writes `<prefix>.loss` and `<prefix>.grad.<parameter>`.
"""

from __future__ import annotations

import torch
from common import read_job, write_results
from safetensors.torch import load_file


def main() -> None:
    job, out = read_job()
    from omnivoice.training.builder import build_model_and_tokenizer
    from omnivoice.training.config import TrainingConfig

    config = TrainingConfig(init_from_checkpoint=job["model"], attn_implementation="sdpa")
    model, _ = build_model_and_tokenizer(config)
    model.train()
    given = load_file(job["tensors"])
    tensors = {}
    for prefix in job["batches"]:
        model.zero_grad(set_to_none=True)
        batch = {name: given[f"{prefix}.{name}"] for name in ("input_ids", "labels", "audio_mask", "position_ids", "attention_mask")}
        loss = model(**batch).loss
        loss.backward()
        tensors[f"{prefix}.loss"] = loss.detach()
        for name, param in model.named_parameters():
            tensors[f"{prefix}.grad.{name}"] = param.grad if param.grad is not None else torch.zeros(0)
    write_results(out, tensors, {"parameters": [name for name, _ in model.named_parameters()]})


if __name__ == "__main__":
    main()
