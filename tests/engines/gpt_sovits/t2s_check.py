"""The `t2s` / `t2s_batch` goldens' shared check: koe's decoding of one case against upstream's rows,
idx list and first-step logits."""

from __future__ import annotations

import numpy as np
import torch

from koe.engines.gpt_sovits.sampling import Sampling
from koe.engines.gpt_sovits.t2s import Text2Semantic


def case_inputs(folder, case: dict) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor | None]:
    arrays = np.load(folder / "inputs.npz")
    phones = [torch.from_numpy(arrays[f"phones.{t}"]) for t in case["texts"]]
    bert = [torch.from_numpy(arrays[f"bert.{t}"]) for t in case["texts"]]
    prompt = torch.from_numpy(arrays["prompt"]).expand(len(phones), -1) if case["prompt"] else None
    return phones, bert, prompt


def check_case(golden, folder, model: Text2Semantic, name: str, case: dict, decode) -> tuple[list[torch.Tensor], list[int]]:
    """Run `decode` (decode_serial / decode_batched) on the case after its seed; assert upstream's bits."""
    phones, bert, prompt = case_inputs(folder, case)
    settings = Sampling(case["top_k"], case["top_p"], case["temperature"], case["repetition_penalty"])
    early_stop_num = model.config.early_stop_num if case["early_stop_num"] is None else case["early_stop_num"]
    assert early_stop_num == golden[f"{name}.early_stop_num"]
    first: list[torch.Tensor] = []
    torch.manual_seed(case["seed"])
    rows, idxs = decode(model, phones, bert, prompt, settings, early_stop_num, first_logits=first)
    assert np.array_equal(torch.cat(first).numpy(), golden[f"{name}.first_logits"]), "first step's logits"
    assert idxs == golden[f"{name}.idx"].tolist()
    assert len(rows) == len(case["texts"])
    for i, row in enumerate(rows):
        want = golden[f"{name}.row.{i}"]
        assert row.dtype == torch.from_numpy(want).dtype and np.array_equal(row.numpy(), want), f"row {i}"
    return rows, idxs
