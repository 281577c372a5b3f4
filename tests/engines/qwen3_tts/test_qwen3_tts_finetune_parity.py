"""`koe train speaker` against upstream's recipe (tests/oracle/qwen_finetune.py), bit for bit.

koe runs the whole pipeline from the raw JSONL (check, prepare with koe's codec, train, export);
the oracle runs upstream's sft_12hz.py (float32, CPU, after torch.manual_seed) on koe's prepared
file (whose codes equal upstream's prepare_data.py: test_qwen3_tts_finetune_data.py). Then the
exported model speaks in upstream qwen-tts as koe speaks with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from finetune_data import write_dataset
from fixtures_models import model_folder
from oracle_harness import assert_same_outputs, generated, run_oracle
from safetensors.torch import load_file

import koe
from koe.engines.qwen3_tts.finetune.run import train_speaker
from koe.engines.qwen3_tts.finetune.trainer import StepReport, TrainSettings

pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::UserWarning")]

CLIPS, BATCH, EPOCHS, LR, SEED = 11, 2, 3, 1e-3, 7
SPEAKER = "speaker_test"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune-parity")
    base = model_folder(tmp_path_factory.getbasetemp(), "base", "tiny-1b7")
    data = write_dataset(root / "data", n=CLIPS)
    torch.set_num_threads(1)  # as the oracle runs (OMP_NUM_THREADS=1), so float bits compare
    steps: list[StepReport] = []
    from koe.engines.qwen3_tts.finetune.run import Reporter

    out = root / "koe"
    result = train_speaker(
        base, data["jsonl"], SPEAKER, out, TrainSettings(epochs=EPOCHS, lr=LR, batch_size=BATCH, seed=SEED), reporter=Reporter(step=steps.append)
    )
    job = {
        "model": str(base),
        "train_jsonl": str(out / "training" / "prepared.jsonl"),
        "seed": SEED,
        "batch_size": BATCH,
        "lr": LR,
        "num_epochs": EPOCHS,
        "speaker_name": SPEAKER,
        "out": str(root / "upstream"),
    }
    tensors, info = run_oracle("qwen_finetune", job, root / "oracle")
    return base, out, result, steps, tensors, info


def test_every_step_has_upstreams_losses_and_gradient_norms(runs):
    _, _, result, steps, tensors, info = runs
    assert len(result.losses) == len(info["steps"]) == EPOCHS * 6
    assert torch.equal(torch.tensor(result.losses, dtype=torch.float32), tensors["loss"].float())
    assert [s.talker_loss for s in steps] == tensors["talker_loss"].tolist()
    assert [s.code_predictor_loss for s in steps] == tensors["sub_talker_loss"].tolist()
    assert [s.grad_norm is not None for s in steps] == [s["sync"] for s in info["steps"]]
    assert [s.grad_norm for s in steps if s.grad_norm is not None] == tensors["grad_norm"].tolist()


def test_the_trained_weights_are_upstreams_bit_for_bit(runs):
    _, out, _, _, _, info = runs
    ours = load_file(str(out / "model.safetensors"))
    theirs = load_file(str(Path(info["checkpoints"][-1]) / "model.safetensors"))
    assert ours.keys() == theirs.keys()
    different = [k for k in ours if not torch.equal(ours[k], theirs[k])]
    assert not different, f"{len(different)} of {len(ours)} tensors differ: {different[:5]}"
    ours_cfg = json.loads((out / "config.json").read_text())
    theirs_cfg = json.loads((Path(info["checkpoints"][-1]) / "config.json").read_text())
    assert ours_cfg == theirs_cfg


def test_the_new_speaker_speaks_in_upstream_as_in_koe(runs):
    _, out, *_ = runs
    calls = [
        {
            "method": "generate_custom_voice",
            "seed": 11,
            "kwargs": {"text": "She said she would be here by noon.", "speaker": SPEAKER, "language": "Auto", "max_new_tokens": 14},
        },
        {
            "method": "generate_custom_voice",
            "seed": 12,
            "kwargs": {"text": "Hello there.", "speaker": SPEAKER.upper(), "language": "English", "max_new_tokens": 12},
        },
    ]
    tensors, info = run_oracle("qwen_generate", {"model_dir": str(out), "calls": calls}, out.parent / "oracle-generate")
    assert info["loading"]["missing_keys"] == [] and info["loading"]["unexpected_keys"] == []
    tts = koe.load(out)
    for i, call in enumerate(calls):
        kwargs = dict(call["kwargs"])
        result = tts.generate(kwargs.pop("text"), seed=call["seed"], non_streaming_mode=True, **kwargs)
        assert_same_outputs([(result.codes, result.audio)], generated(tensors, i), f"call {i}")
