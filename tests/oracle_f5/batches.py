"""Upstream F5-TTS's batches by frames, for parity tests: its `DynamicBatchSampler` over clips of
the given durations (the fine-tuning data's `duration.json`), per epoch.

Job: {"durations": [seconds, ...], "cases": [{"id", "frames", "max_samples", "seed", "epochs"}]}.
Writes `<id>.epoch<k>` (the batches of epoch k, flattened) and `<id>.sizes<k>` (their lengths).
"""

from __future__ import annotations

import torch
from common import read_job, write_results


class Clips:
    """What the sampler reads of upstream's `CustomDataset`: its length and `get_frame_len`."""

    def __init__(self, durations):
        self.durations = durations

    def __len__(self):
        return len(self.durations)

    def get_frame_len(self, index):
        return self.durations[index] * 24000 / 256


def main() -> None:
    job, out = read_job()
    from f5_tts.model.dataset import DynamicBatchSampler
    from torch.utils.data import SequentialSampler

    tensors = {}
    for case in job["cases"]:
        sampler = DynamicBatchSampler(
            SequentialSampler(Clips(job["durations"])), case["frames"], max_samples=case["max_samples"], random_seed=case["seed"], drop_residual=False
        )
        for epoch in range(case["epochs"]):
            sampler.set_epoch(epoch)
            batches = list(sampler)
            tensors[f"{case['id']}.epoch{epoch}"] = torch.tensor([i for b in batches for i in b])
            tensors[f"{case['id']}.sizes{epoch}"] = torch.tensor([len(b) for b in batches])
    write_results(out, tensors, {})


if __name__ == "__main__":
    main()
