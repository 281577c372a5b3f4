"""OmniVoice's training loss against upstream omnivoice==0.2.1's `OmniVoice.forward` with labels, bit
for bit on the CPU in float32: padded batches made by koe's sample processor and collator (text and
audio rows, rows whose text and conditions were dropped, padding, a one-row batch) give upstream's
loss and the same gradient of every parameter, in upstream's parameter order
(koe/engines/omnivoice/finetune/objective.py; tests/oracle_omnivoice/train_step.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.omnivoice.config import read_config
from koe.engines.omnivoice.finetune.objective import batch_loss
from koe.engines.omnivoice.finetune.pipeline import ProcessorSettings, collate, process
from koe.engines.omnivoice.finetune.run import special_ids
from koe.engines.omnivoice.finetune.shards import Sample
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.omnivoice.model import OmniVoiceLM
from koe.engines.omnivoice.text import TextTokenizer
from koe.runtime.weights import build_from_weights

pytestmark = pytest.mark.oracle

FIELDS = ("input_ids", "labels", "audio_mask", "position_ids", "attention_mask")
LABELS = [
    {"text": "Hello there.", "language_id": "en"},
    {"text": "你好，世界。", "instruct": "female, low pitch"},
    {"text": "A longer sentence to speak, with words.", "language_id": "en", "instruct": "male"},
    {"text": "Short.", "text_pinyin": "ni3 hao3"},
]
BATCHES = {  # id: (samples, processor settings, seed of the draws)
    "mixed": ([0, 1, 2], ProcessorSettings(), 5),
    "dropped": ([3, 0], ProcessorSettings(drop_cond_ratio=1.0), 2),
    "prompted": ([2, 1, 3], ProcessorSettings(prompt_ratio_range=(0.3, 0.6), use_pinyin_ratio=1.0, language_ratio=1.0, only_instruct_ratio=0.0), 9),
    "single": ([1], ProcessorSettings(), 4),
}


def _samples() -> list[Sample]:
    rng = np.random.default_rng(3)
    return [Sample(f"utt{i:06d}", rng.integers(0, 1024, (8, 30 + 9 * i)).astype(np.int16), label) for i, label in enumerate(LABELS)]


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp("omnivoice"))
    text, pad = TextTokenizer.from_folder(folder), special_ids(folder)["pad_token_id"]
    samples = _samples()
    batches = {}
    for bid, (rows, settings, seed) in BATCHES.items():
        py, gen = random.Random(seed), torch.Generator().manual_seed(seed)
        batches[bid] = collate([process(samples[i], text.ids, settings, py, gen) for i in rows], pad)
    given = tmp_path_factory.mktemp("given") / "batches.safetensors"
    save_file({f"{bid}.{name}": getattr(b, name).contiguous() for bid, b in batches.items() for name in FIELDS}, str(given))
    tensors, info = run_oracle(
        "train_step", {"model": str(folder), "tensors": str(given), "batches": list(BATCHES)}, tmp_path_factory.mktemp("oracle"), family="omnivoice"
    )
    cfg = read_config(folder)
    model = build_from_weights(lambda: OmniVoiceLM(cfg), [folder / "model.safetensors"]).train()
    return model, batches, tensors, info


def test_parameters_are_in_upstreams_order(compared):
    model, _, _, info = compared
    assert [name for name, _ in model.named_parameters()] == info["parameters"]  # AdamW's state indices and the clipped norm follow it


def test_the_batches_hold_what_the_draws_chose(compared):
    _, batches, _, _ = compared
    dropped = batches["dropped"]  # no text, no prompt: every real position is audio, padding after the shorter row
    assert dropped.audio_mask.sum(dim=1).tolist() == [30 + 9 * 3, 30] and dropped.input_ids.shape[-1] == 30 + 9 * 3
    mixed = batches["mixed"]
    assert mixed.attention_mask.shape == (3, 1, mixed.input_ids.shape[-1], mixed.input_ids.shape[-1])
    assert not bool(mixed.attention_mask.all())  # padding keys are masked


@pytest.mark.parametrize("bid", list(BATCHES))
def test_loss_and_every_gradient_equal_upstream(compared, bid):
    model, batches, tensors, _ = compared
    model.zero_grad(set_to_none=True)
    loss = batch_loss(model, batches[bid])
    loss.backward()
    assert same(loss.detach(), tensors[f"{bid}.loss"])
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert same(param.grad, tensors[f"{bid}.grad.{name}"]), name
