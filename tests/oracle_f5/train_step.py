"""Upstream F5-TTS's training forward and backward on a model folder, for parity tests.

Job: {"model": folder, "tensors": file, "cases": [{"id", "seed", "mel", "lens", "tokens",
"audio_drop_prob", "cond_drop_prob"}]}. The model is upstream's `CFM` with the folder's weights
(`load_model`, the EMA weights as fine-tuning starts from them) in training mode. Per case: torch
and Python's `random` seeded with `seed`, then `loss, cond, pred = model(mel, text=tokens,
lens=lens)` as upstream's `Trainer.train` calls it (mel (B, n, mels) padded, token lists), then
`loss.backward()`. Writes `<id>.loss`, `<id>.pred`, `<id>.cond` and `<id>.grad.<parameter>`.
"""

from __future__ import annotations

import random

import torch
from common import read_job, write_results
from safetensors.torch import load_file


def main() -> None:
    job, out = read_job()
    from generate import _load

    model, _, _, _ = _load(job["model"])
    model.train()
    given = load_file(job["tensors"])
    tensors, info = {}, {}
    for case in job["cases"]:
        cid = case["id"]
        model.audio_drop_prob, model.cond_drop_prob = case["audio_drop_prob"], case["cond_drop_prob"]
        model.zero_grad(set_to_none=True)
        torch.manual_seed(case["seed"])
        random.seed(case["seed"])
        loss, cond, pred = model(given[case["mel"]], text=case["tokens"], lens=torch.tensor(case["lens"]))
        loss.backward()
        tensors[f"{cid}.loss"], tensors[f"{cid}.pred"], tensors[f"{cid}.cond"] = loss.detach(), pred.detach(), cond.detach()
        for name, param in model.transformer.named_parameters():
            if param.grad is not None:
                tensors[f"{cid}.grad.{name}"] = param.grad
        info[cid] = {"parameters_with_grad": sum(p.grad is not None for p in model.transformer.parameters())}
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
