"""Upstream's batches by frames (`batch_size_type="frame"`, its `DynamicBatchSampler`).

Clips are sorted by length in mel frames (a stable sort: equal lengths keep their order), then cut
into batches of at most `frames` frames in all and `max_samples` clips (0: any number); a clip
longer than `frames` alone is left out, as upstream leaves it. The last, partial batch is kept.
Each epoch visits the batches in the order of `torch.randperm` from a generator seeded with
`seed + epoch` (upstream's `resumable_with_seed`, 666 in its fine-tuning script), so a resumed run
sees the same batches in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["epoch_order", "frame_batches", "frame_length"]


def frame_length(duration_s: float, sample_rate: int = 24000, hop_length: int = 256) -> float:
    """A clip's length in mel frames as upstream counts it for batching (a float, from its duration)."""
    return duration_s * sample_rate / hop_length


def frame_batches(lengths: Sequence[float], frames: float, max_samples: int = 0) -> list[list[int]]:
    """Clip indices in batches (see the module's doc); `lengths` in mel frames, per clip."""
    batches: list[list[int]] = []
    batch: list[int] = []
    batch_frames = 0.0
    for index, length in sorted(enumerate(lengths), key=lambda item: item[1]):
        if batch_frames + length <= frames and (max_samples == 0 or len(batch) < max_samples):
            batch.append(index)
            batch_frames += length
            continue
        if batch:
            batches.append(batch)
        batch, batch_frames = ([index], length) if length <= frames else ([], 0.0)
    if batch:
        batches.append(batch)
    return batches


def epoch_order(batches: list[list[int]], seed: int | None, epoch: int) -> list[list[int]]:
    """The batches in the order epoch `epoch` visits them (as built when `seed` is None)."""
    if seed is None:
        return list(batches)
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
