"""F5-TTS's training loss against upstream f5-tts==1.1.22's `CFM.forward` in training mode, bit for
bit on the CPU in float32: after seeding torch and Python's `random` with the same N, the same
padded batch gives the same span, noise, time, condition drops and dropout, so the same loss,
prediction and gradient of every parameter (koe/engines/f5_tts/finetune/objective.py), for both
arch families and with the audio or both conditions dropped."""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.f5_tts.engine import F5TTSEngine
from koe.engines.f5_tts.finetune.objective import Objective, pad_ids
from koe.engines.f5_tts.fixtures import write_random_model

pytestmark = pytest.mark.oracle

TOKENS = [
    list("Some call me nature."),
    ["n", "i3", "h", "ao3", " ", "sh", "i4", "j", "ie4"],
    list("Hi! ") + ["not-in-the-vocabulary"],
]
LENS = [41, 29, 37]  # mel frames of each row; the batch is padded to the longest
CASES = [  # id, seed, audio_drop_prob, cond_drop_prob
    ("default_0", 0, 0.3, 0.2),
    ("default_7", 7, 0.3, 0.2),
    ("audio_dropped", 3, 1.0, 0.0),
    ("both_dropped", 5, 0.0, 1.0),
]


def _batch(seed: int = 11) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mel = torch.randn(len(LENS), max(LENS), 100, generator=g)
    for row, n in enumerate(LENS):
        mel[row, n:] = 0.0
    return mel


@pytest.fixture(scope="module", params=["F5TTS_v1_Base", "F5TTS_Base"])
def compared(request, tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp(request.param), request.param)
    given = tmp_path_factory.mktemp("given") / "batch.safetensors"
    save_file({"mel": _batch()}, str(given))
    cases = [
        {"id": cid, "seed": seed, "mel": "mel", "lens": LENS, "tokens": TOKENS, "audio_drop_prob": audio, "cond_drop_prob": both}
        for cid, seed, audio, both in CASES
    ]
    tensors, _ = run_oracle("train_step", {"model": str(folder), "tensors": str(given), "cases": cases}, tmp_path_factory.mktemp("oracle"), family="f5_tts")
    engine = F5TTSEngine.load(folder, device="cpu")
    yield engine, tensors
    engine.close()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_loss_prediction_and_gradients_equal_upstream(compared, case):
    import random

    engine, upstream = compared
    cid, seed, audio, both = case
    dit = engine.model.transformer
    dit.train().requires_grad_(True)
    dit.zero_grad(set_to_none=True)
    text = pad_ids([engine.vocab.ids(tokens) for tokens in TOKENS])
    torch.manual_seed(seed)
    random.seed(seed)
    step = Objective(audio_drop_prob=audio, cond_drop_prob=both)(dit, _batch(), text, torch.tensor(LENS))
    step.loss.backward()
    assert same(step.loss.detach(), upstream[f"{cid}.loss"]), (cid, step.loss.item(), upstream[f"{cid}.loss"])
    assert same(step.cond, upstream[f"{cid}.cond"]) and same(step.pred.detach(), upstream[f"{cid}.pred"])
    grads = {name: p.grad for name, p in dit.named_parameters() if p.grad is not None}
    assert {k.removeprefix(f"{cid}.grad.") for k in upstream if k.startswith(f"{cid}.grad.")} == set(grads)
    for name, grad in grads.items():
        assert same(grad, upstream[f"{cid}.grad.{name}"]), name
    if cid == "audio_dropped":
        assert step.drop_audio_cond and not step.drop_text
    if cid == "both_dropped":
        assert step.drop_audio_cond and step.drop_text
