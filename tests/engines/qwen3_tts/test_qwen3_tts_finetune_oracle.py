"""The fine-tuning oracle (tests/oracle/qwen_finetune.py: upstream's sft_12hz.py recipe) works.

What koe's `koe train speaker` is compared against must itself be sound: it loads a 1.7B-like
Base model cleanly, is deterministic under a seed, learns, and exports CustomVoice folders that
upstream qwen-tts loads and speaks with. The tests also pin the recipe's facts koe reproduces:
the data order (two draws from torch's global generator per epoch), the accumulation's sync
steps, the parameters that never get a gradient, and upstream's lower-cased speaker lookup.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from finetune_data import random_codes_jsonl, write_dataset
from fixtures_models import model_folder
from oracle_harness import run_oracle
from safetensors.torch import load_file

pytestmark = pytest.mark.oracle

CLIPS, BATCH, EPOCHS, LR = 11, 2, 3, 1e-3  # 6 batches an epoch: accumulation groups of 4 and 2
SPEAKER = "speaker_test"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    base = model_folder(root, "base", "tiny-1b7")
    data = write_dataset(root / "finetune-data", n=CLIPS)
    train = random_codes_jsonl(data["jsonl"], root / "finetune-data" / "train.jsonl")
    return root, base, train


def finetune(setup, tag: str, seed: int, epochs: int = EPOCHS, speaker: str = SPEAKER):
    root, base, train = setup
    out = root / f"finetune-{tag}"
    job = {
        "model": str(base),
        "train_jsonl": str(train),
        "seed": seed,
        "batch_size": BATCH,
        "lr": LR,
        "num_epochs": epochs,
        "speaker_name": speaker,
        "out": str(out / "model"),
    }
    tensors, info = run_oracle("qwen_finetune", job, out)
    return tensors, info


@pytest.fixture(scope="module")
def run_a(setup):
    return finetune(setup, "a", seed=0)


@pytest.fixture(scope="module")
def run_b(setup):
    return finetune(setup, "b", seed=0)


@pytest.fixture(scope="module")
def run_c(setup):
    """Another seed, one epoch, and a mixed-case speaker name (for upstream's lookup)."""
    return finetune(setup, "c", seed=1, epochs=1, speaker="Speaker_Test")


def weights(info, epoch: int) -> dict[str, torch.Tensor]:
    return load_file(f"{info['checkpoints'][epoch]}/model.safetensors")


def test_oracle_loads_base_without_missing_or_unexpected_keys(run_a):
    _, info = run_a
    loading = info["loading"]
    assert loading["missing_keys"] == [] and loading["unexpected_keys"] == [] and loading["mismatched_keys"] == []
    assert info["attn"] == "sdpa"


def test_first_batch_is_the_recipe_layout_of_the_first_two_examples(run_a, setup):
    tensors, info = run_a
    rows = [json.loads(line) for line in setup[2].read_text().splitlines()]
    first = info["order"][0][:BATCH]
    mask, codes, labels = tensors["batch0.codec_mask"], tensors["batch0.codec_ids"], tensors["batch0.codec_0_labels"]
    assert sorted(k for k in tensors if k.startswith("batch0.")) == sorted(
        f"batch0.{k}"
        for k in ("input_ids", "ref_mels", "attention_mask", "text_embedding_mask", "codec_embedding_mask", "codec_0_labels", "codec_ids", "codec_mask")
    )
    assert tensors["batch0.input_ids"].shape[:2] == mask.shape and tensors["batch0.ref_mels"].shape[::2] == (BATCH, 128)
    for i, idx in enumerate(first):
        want = torch.tensor(rows[idx]["audio_codes"])
        assert torch.equal(codes[i][mask[i]], want)
        assert torch.equal(labels[i][labels[i] != -100], torch.cat([want[:, 0], torch.tensor([2150])]))  # codebook 0 + eos
        assert not tensors["batch0.codec_embedding_mask"][i, 6, 0]  # the speaker slot
        assert int(tensors["batch0.attention_mask"][i].sum()) == int(tensors["batch0.text_embedding_mask"][i].sum())


def test_same_seed_gives_the_same_losses_order_and_weights(run_a, run_b):
    (ta, ia), (tb, ib) = run_a, run_b
    assert ia["order"] == ib["order"]
    for key in ("loss", "talker_loss", "sub_talker_loss", "grad_norm", "target_speaker_embedding"):
        assert torch.equal(ta[key], tb[key]), key
    for epoch in range(EPOCHS):
        wa, wb = weights(ia, epoch), weights(ib, epoch)
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), epoch


def test_another_seed_gives_another_data_order(run_a, run_c):
    assert run_a[1]["order"][0] != run_c[1]["order"][0]
    assert sorted(run_c[1]["order"][0]) == list(range(CLIPS))


@pytest.mark.parametrize("which", ["a", "c"])
def test_data_order_is_two_global_draws_per_epoch(which, run_a, run_c):
    """After torch.manual_seed(seed): per epoch the DataLoader iterator's base seed, then the
    RandomSampler's seed, whose own generator gives randperm(n); nothing else draws."""
    seed, (_, info) = {"a": (0, run_a), "c": (1, run_c)}[which]
    torch.manual_seed(seed)
    predicted = []
    for _ in info["order"]:
        torch.empty((), dtype=torch.int64).random_()  # _BaseDataLoaderIter._base_seed
        sampler_seed = int(torch.empty((), dtype=torch.int64).random_().item())
        predicted.append(torch.randperm(CLIPS, generator=torch.Generator().manual_seed(sampler_seed)).tolist())
    assert predicted == info["order"]


def test_loss_is_talker_plus_0_3_sub_talker_and_goes_down(run_a):
    tensors, _info = run_a
    assert torch.equal(tensors["loss"], tensors["talker_loss"] + 0.3 * tensors["sub_talker_loss"])
    per_epoch = tensors["loss"].view(EPOCHS, -1).mean(dim=1)
    assert per_epoch[-1] < per_epoch[0] - 0.3, per_epoch
    assert all(torch.isfinite(tensors["loss"]))


def test_accumulation_syncs_every_4_steps_and_at_the_end_of_each_epoch(run_a):
    _, info = run_a
    for epoch in range(EPOCHS):
        syncs = [s["sync"] for s in info["steps"] if s["epoch"] == epoch]
        assert syncs == [False, False, False, True, False, True], epoch
    assert len(run_a[0]["grad_norm"]) == 2 * EPOCHS


def test_parameters_without_gradient(run_a):
    """The speaker encoder (its output is detached) and text_projection (the recipe skips it) get
    no gradient; the last sub-talker head gets an all-zero one (the loss's extra shift drops it)."""
    _, info = run_a
    names = info["no_grad_params"]
    assert [n for n in names if not n.startswith("speaker_encoder.")] == [
        f"talker.text_projection.linear_fc{i}.{leaf}" for i in (1, 2) for leaf in ("weight", "bias")
    ]
    assert any(n.startswith("speaker_encoder.") for n in names)
    assert info["zero_grad_params"] == ["talker.code_predictor.lm_head.14.weight"]


def test_checkpoints_are_custom_voice_folders_with_the_speaker_at_3000(run_a, setup):
    tensors, info = run_a
    base = load_file(str(setup[1] / "model.safetensors"))
    previous = None
    for epoch, folder in enumerate(info["checkpoints"]):
        assert folder.endswith(f"checkpoint-epoch-{epoch}")
        config = json.loads(Path(folder, "config.json").read_text(encoding="utf-8"))
        assert config["tts_model_type"] == "custom_voice"
        assert config["talker_config"]["spk_id"] == {SPEAKER: 3000} and config["talker_config"]["spk_is_dialect"] == {SPEAKER: False}
        w = weights(info, epoch)
        assert not any(k.startswith("speaker_encoder.") for k in w)
        assert set(w) == {k for k in base if not k.startswith("speaker_encoder.")}
        assert torch.equal(w["talker.model.codec_embedding.weight"][3000], tensors["target_speaker_embedding"][0])
        assert not torch.equal(w["talker.codec_head.weight"], base["talker.codec_head.weight"])
        if previous is not None:
            assert not torch.equal(w["talker.codec_head.weight"], previous["talker.codec_head.weight"])
        previous = w


def test_checkpoint_speaks_in_upstream_as_custom_voice(run_a, setup):
    _, info = run_a
    calls = [
        {
            "method": "generate_custom_voice",
            "seed": i,
            "kwargs": {"text": "She said she would be here by noon.", "speaker": name, "language": "english", "max_new_tokens": 12},
        }
        for i, name in enumerate([SPEAKER, SPEAKER.upper()])
    ]
    tensors, gen = run_oracle("qwen_generate", {"model_dir": info["checkpoints"][-1], "calls": calls}, setup[0] / "finetune-speak")
    assert gen["loading"]["missing_keys"] == [] and gen["loading"]["unexpected_keys"] == []
    for i in range(len(calls)):
        assert gen[f"count_{i}"] == 1 and tensors[f"codes_{i}_0"].shape[-1] == 16 and tensors[f"wav_{i}_0"].numel() > 0


def test_mixed_case_speaker_name_cannot_be_used_upstream(run_c, setup):
    """Upstream looks speakers up as `speaker.lower()` in spk_id, so a name exported with capitals
    is found by no spelling: koe must export (or look up) the lower-cased name."""
    _, info = run_c
    job = {
        "model_dir": info["checkpoints"][0],
        "calls": [
            {"method": "generate_custom_voice", "seed": 0, "kwargs": {"text": "Hello.", "speaker": "Speaker_Test", "language": "english", "max_new_tokens": 4}}
        ],
    }
    with pytest.raises(RuntimeError, match="Speaker Speaker_Test not implemented"):
        run_oracle("qwen_generate", job, setup[0] / "finetune-mixed-case")
