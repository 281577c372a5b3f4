"""F5-TTS fine-tuning's batches by frames against upstream f5-tts==1.1.22's `DynamicBatchSampler`
(koe/engines/f5_tts/finetune/batches.py): the same clips in the same batches, visited in the same
order every epoch, with equal durations (the sort keeps their order), a clip longer than a batch
(left out), a cap on clips per batch, and no shuffling."""

from __future__ import annotations

import pytest
from oracle_harness import run_oracle

from koe.engines.f5_tts.finetune.batches import epoch_order, frame_batches, frame_length

pytestmark = pytest.mark.oracle

DURATIONS = [3.2, 1.1, 7.5, 3.2, 0.4, 12.9, 2.25, 5.0, 3.2, 9.75, 0.9, 4.4, 6.1, 1.1, 2.0, 8.8, 31.0, 3.3]
CASES = [  # id, frames per batch, max clips per batch, seed, epochs
    ("finetune", 3200, 64, 666, 3),  # upstream's fine-tuning script's settings
    ("small", 1000, 0, 666, 3),
    ("capped", 2000, 3, 42, 2),
    ("unshuffled", 1500, 4, None, 2),
]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    cases = [{"id": cid, "frames": frames, "max_samples": cap, "seed": seed, "epochs": epochs} for cid, frames, cap, seed, epochs in CASES]
    tensors, _ = run_oracle("batches", {"durations": DURATIONS, "cases": cases}, tmp_path_factory.mktemp("oracle"), family="f5_tts")
    return tensors


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_batches_and_their_order_equal_upstream(upstream, case):
    cid, frames, cap, seed, epochs = case
    batches = frame_batches([frame_length(d) for d in DURATIONS], frames, cap)
    kept = {i for b in batches for i in b}
    assert all((i in kept) == (frame_length(d) <= frames) for i, d in enumerate(DURATIONS))  # a clip longer than a batch is left out
    for epoch in range(epochs):
        order = epoch_order(batches, seed, epoch)
        assert [i for b in order for i in b] == upstream[f"{cid}.epoch{epoch}"].tolist(), epoch
        assert [len(b) for b in order] == upstream[f"{cid}.sizes{epoch}"].tolist(), epoch
