"""Speaker fine-tuning on koe's side: the batch layout, the loop's determinism, resume, the memory
options, the export, and the checks that refuse what upstream's recipe cannot do.

The comparison with upstream's own recipe (weights bit for bit) is in
test_qwen3_tts_finetune_parity.py; the data stage in test_qwen3_tts_finetune_data.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import soundfile as sf
import torch
from safetensors.torch import load_file

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.qwen3_tts.finetune.batch import Example, collate
from koe.engines.qwen3_tts.finetune.run import (
    check_base,
    check_speaker,
    export_checkpoint,
    train_on_rows,
)
from koe.engines.qwen3_tts.finetune.trainer import (
    OffloadedAdamW,
    TrainingError,
    TrainSettings,
    epoch_order,
    latest_checkpoint,
)
from koe.engines.qwen3_tts.fixtures import write_random_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from finetune_data import random_codes_jsonl, write_dataset

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def read_24k(path: Path):
    audio, rate = sf.read(path, dtype="float32")
    assert rate == 24000
    return audio


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune")
    base = write_random_model(root / "base", "base", "tiny-1b7")
    data = write_dataset(root / "data")
    prepared = random_codes_jsonl(data["jsonl"], root / "prepared.jsonl")
    rows = [json.loads(line) for line in prepared.read_text().splitlines()]
    return root, base, rows


def train(setup, out: Path, **kw):
    _, base, rows = setup
    rows = kw.pop("rows", rows)
    stop = kw.pop("should_stop", None)
    settings = TrainSettings(**{"epochs": 2, "lr": 1e-3, "seed": 3, **kw})
    return train_on_rows(base, rows, "Alice", out, settings, load_reference=read_24k, should_stop=stop)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


# ---------------------------------------------------------------------------- batch layout
def test_collate_lays_out_text_and_codec_channels_as_upstream(setup):
    _, base, _ = setup
    cfg = Qwen3TTSConfig.from_folder(base)
    t = cfg.talker
    # role tokens 11 12 13, transcript 21 22 (L = 5); 3 frames whose codebook k is 100*frame + k
    a = Example(torch.tensor([[11, 12, 13, 21, 22]]), torch.tensor([[100 * f + k for k in range(16)] for f in range(1, 4)]), torch.zeros(1, 40, 128))
    b = Example(torch.tensor([[11, 12, 13, 31]]), torch.tensor([[7 + k for k in range(16)]]), torch.ones(1, 40, 128))
    batch = collate([a, b], cfg)
    assert batch.input_ids.shape == (2, 5 + 3 + 8, 2)  # longest example (L + n = 8) + 8
    pad, bos, eos = cfg.tts_pad_id, cfg.tts_bos_id, cfg.tts_eos_id
    text = [11, 12, 13, pad, pad, pad, pad, bos, 21, 22, eos, pad, pad, pad, pad, pad]
    codec = [
        0,
        0,
        0,
        t.codec_nothink_id,
        t.codec_think_bos_id,
        t.codec_think_eos_id,
        0,
        t.codec_pad_id,
        t.codec_pad_id,
        t.codec_pad_id,
        t.codec_pad_id,
        t.codec_bos_id,
        100,
        200,
        300,
        t.codec_eos_id,
    ]
    assert batch.input_ids[0, :, 0].tolist() == text
    assert batch.input_ids[0, :, 1].tolist() == codec
    assert batch.labels[0].tolist() == [-100] * 12 + [100, 200, 300, t.codec_eos_id]
    assert batch.codec_mask[0].tolist() == [False] * 12 + [True] * 3 + [False]
    assert torch.equal(batch.codec_ids[0, 12:15], a.codes) and not batch.codec_ids[0, :12].any() and not batch.codec_ids[0, 15].any()
    assert batch.text_embedding_mask[0, :, 0].tolist() == [True] * 16
    assert batch.codec_embedding_mask[0, :, 0].tolist() == [False] * 3 + [True] * 3 + [False] + [True] * 9
    assert batch.attention_mask[0].tolist() == [1] * 16
    # the shorter row: L = 4, n = 1, used 13 of 16 positions, right-padded with zeros
    assert batch.input_ids[1, :, 0].tolist() == [11, 12, 13, pad, pad, pad, pad, bos, 31, eos, pad, pad, pad, 0, 0, 0]
    assert batch.input_ids[1, 10:13, 1].tolist() == [t.codec_bos_id, 7, t.codec_eos_id]
    assert batch.labels[1].tolist() == [-100] * 11 + [7, t.codec_eos_id] + [-100] * 3
    assert batch.attention_mask[1].tolist() == [1] * 13 + [0] * 3
    assert batch.codec_embedding_mask[1, 13:, 0].tolist() == [False] * 3
    assert batch.ref_mels.shape == (2, 40, 128)


def test_references_of_different_lengths_stay_apart(setup):
    _, base, _ = setup
    cfg = Qwen3TTSConfig.from_folder(base)
    codes = torch.zeros(2, 16, dtype=torch.long)
    batch = collate(
        [Example(torch.tensor([[1, 2, 3, 4]]), codes, torch.zeros(1, 40, 128)), Example(torch.tensor([[1, 2, 3, 4]]), codes, torch.zeros(1, 50, 128))], cfg
    )
    assert isinstance(batch.ref_mels, list) and [m.shape[1] for m in batch.ref_mels] == [40, 50]


def test_epoch_order_is_what_a_shuffling_dataloader_draws_after_manual_seed():
    for seed, n, batch in ((0, 11, 2), (5, 7, 3), (123, 40, 4)):
        torch.manual_seed(seed)
        loader = torch.utils.data.DataLoader(list(range(n)), batch_size=batch, shuffle=True, collate_fn=list)
        theirs = [[i for b in loader for i in b] for _ in range(3)]
        g = torch.Generator().manual_seed(seed)
        assert [epoch_order(g, n) for _ in range(3)] == theirs


# ---------------------------------------------------------------------------- the loop
def test_loss_goes_down_and_the_same_seed_gives_the_same_weights(setup, tmp_path):
    first = train(setup, tmp_path / "a", epochs=4)
    second = train(setup, tmp_path / "b", epochs=4)
    assert first.finished and first.optimizer_steps == 4 * 2  # 6 batches an epoch: steps after batch 4 and 6
    assert first.losses == second.losses
    assert_same_weights(weights(tmp_path / "a"), weights(tmp_path / "b"))
    per_epoch = [sum(first.losses[i : i + 6]) / 6 for i in range(0, 24, 6)]
    assert per_epoch[-1] < per_epoch[0] - 0.3, per_epoch
    other = train(setup, tmp_path / "c", epochs=1, seed=4)
    assert other.losses != first.losses[:6]


def test_resume_gives_the_weights_of_an_uninterrupted_run(setup, tmp_path):
    whole = train(setup, tmp_path / "whole", epochs=3, save_every=1)
    asked = []

    def stop_after_three_checkpoints():
        asked.append(1)
        return len(asked) == 3  # mid-epoch 2 (checkpoints after steps 1, 2 of epoch 1, then 3 ...)

    part = train(setup, tmp_path / "resumed", epochs=3, save_every=1, should_stop=stop_after_three_checkpoints)
    assert not part.finished and not (tmp_path / "resumed" / "model.safetensors").exists()
    state = json.loads((tmp_path / "resumed" / "training" / "checkpoint" / "state.json").read_text())["state"]
    assert state["optimizer_steps"] == 3 and state["epoch"] == 1 and state["next_batch"] == 4
    rest = train(setup, tmp_path / "resumed", epochs=3, save_every=1)
    assert rest.finished and rest.losses == whole.losses
    assert_same_weights(weights(tmp_path / "whole"), weights(tmp_path / "resumed"))
    log = (tmp_path / "resumed" / "training" / "train.log").read_text().splitlines()
    assert log[10] == "# resumed from the checkpoint: epoch 2, batch 5, 3 optimizer steps"
    assert len(log) == 19 and log[-1].startswith("epoch 3/3 batch 6/6 step 6 loss ")


class Crash(Exception):
    """The process dying at that point (the test stops it there, leaving the files as a crash would)."""


def small(setup, out: Path, **kw):
    """3 epochs of one batch, a step and a checkpoint after each (quick: 2 clips)."""
    return train(setup, out, **{"rows": setup[2][:2], "grad_accum": 1, "epochs": 3, **kw})


LORA = {"lora_rank": 4, "lr": 1e-2}  # small checkpoints, quick to write and copy (written as any other)


def test_a_crash_between_the_two_renames_of_a_checkpoint_loses_nothing(setup, tmp_path, monkeypatch):
    whole = small(setup, tmp_path / "whole", **LORA)
    real_replace, installs = os.replace, []

    def crash_on_the_second_install(src, dst):
        if Path(src).name == "checkpoint.partial":
            installs.append(dst)
            if len(installs) == 2:  # epoch 2's checkpoint, complete; epoch 1's is already `checkpoint.old`
                raise Crash
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_the_second_install)
    with pytest.raises(Crash):
        small(setup, tmp_path / "crashed", **LORA)
    monkeypatch.setattr(os, "replace", real_replace)
    work = tmp_path / "crashed" / "training"
    assert sorted(p.name for p in work.glob("checkpoint*")) == ["checkpoint.old", "checkpoint.partial"]
    assert latest_checkpoint(work) == work / "checkpoint.partial"  # what the export reads, changing nothing
    for left, resumed_at in (("checkpoint.old", "epoch 2, batch 1, 1 optimizer steps"), ("checkpoint.partial", "epoch 3, batch 1, 2 optimizer steps")):
        run = tmp_path / left
        shutil.copytree(tmp_path / "crashed", run)
        for other in {"checkpoint.old", "checkpoint.partial"} - {left}:
            shutil.rmtree(run / "training" / other)
        rest = small(setup, run, **LORA)
        assert rest.finished and rest.losses == whole.losses, left
        assert_same_weights(weights(tmp_path / "whole"), weights(run))
        assert f"# resumed from the checkpoint: {resumed_at}" in (run / "training" / "train.log").read_text()
        assert sorted(p.name for p in (run / "training").glob("checkpoint*")) == ["checkpoint"]


@pytest.fixture(scope="module")
def stopped(setup, tmp_path_factory):
    """A run stopped after its first checkpoint (epoch 1), with the run file `koe train` writes."""
    out = tmp_path_factory.mktemp("stopped") / "run"
    assert not small(setup, out, should_stop=lambda: True, **LORA).finished
    (out / "training" / "run.json").write_text(json.dumps({"base": str(setup[1]), "speaker": "alice"}))
    return out


@pytest.mark.parametrize(
    "name, damage, message",
    [
        ("optimizer.pt", "torn", r"optimizer.pt cannot be read \(PytorchStreamReader failed"),
        ("talker.safetensors", "torn", r"talker.safetensors cannot be read \("),
        ("trainer.safetensors", "missing", r"trainer.safetensors is missing"),
        ("state.json", "torn", r"state.json cannot be read \(not valid JSON"),
        ("state.json", "missing", r"state.json is missing"),
    ],
)
def test_a_damaged_checkpoint_is_one_named_error(setup, stopped, tmp_path, name, damage, message):
    run = tmp_path / "run"
    shutil.copytree(stopped, run)
    path = run / "training" / "checkpoint" / name
    if damage == "torn":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.unlink()
    checkpoint = run / "training" / "checkpoint"
    attempts = [lambda: small(setup, run, **LORA)] + ([lambda: export_checkpoint(run)] if name != "optimizer.pt" else [])
    for attempt in attempts:  # the export reads all but the optimizer's state
        with pytest.raises(TrainingError, match=rf"the training checkpoint {checkpoint} is damaged: {message}") as info:
            attempt()
        assert info.value.hint == f"remove the folder {checkpoint} to train again from the first epoch (the prepared data is kept)"


def test_a_damaged_run_file_is_one_named_error(stopped, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(stopped, run)
    (run / "training" / "run.json").write_text('{"base": "/models/ba', encoding="utf-8")
    with pytest.raises(TrainingError, match=r"the training run's file is damaged: .*run.json: not valid JSON") as info:
        export_checkpoint(run)  # `koe train speaker` reads it the same way (tests/test_cli_train.py)
    assert info.value.hint == f"remove {run} (or use another output folder) to start the run again"


def test_more_epochs_continue_a_finished_run(setup, tmp_path):
    three = train(setup, tmp_path / "three", epochs=3)
    train(setup, tmp_path / "more", epochs=2)
    more = train(setup, tmp_path / "more", epochs=3)
    assert more.losses == three.losses
    assert_same_weights(weights(tmp_path / "three"), weights(tmp_path / "more"))


def test_resuming_with_other_settings_is_refused(setup, tmp_path):
    train(setup, tmp_path / "run", epochs=1)
    with pytest.raises(TrainingError, match=r"lr 0.001 \(now 0.002\)"):
        train(setup, tmp_path / "run", epochs=2, lr=2e-3)


def test_gradient_checkpointing_keeps_the_bits(setup, tmp_path):
    plain = train(setup, tmp_path / "plain", epochs=1)
    saved = train(setup, tmp_path / "ckpt", epochs=1, gradient_checkpointing=True)
    assert saved.losses == plain.losses
    assert_same_weights(weights(tmp_path / "plain"), weights(tmp_path / "ckpt"))


def test_offloaded_adamw_steps_as_adamw():
    torch.manual_seed(0)
    a = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(4)), torch.nn.Parameter(torch.randn(2))]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    plain, offloaded = torch.optim.AdamW(a, lr=0.1, weight_decay=0.01), OffloadedAdamW(b, lr=0.1, weight_decay=0.01)
    for _ in range(3):
        for pa, pb in zip(a[:2], b[:2]):  # the last parameter never gets a gradient
            g = torch.randn_like(pa)
            pa.grad, pb.grad = g.clone(), g.clone()
        plain.step(), offloaded.step()
        plain.zero_grad(), offloaded.zero_grad()
    assert all(torch.equal(pa, pb) for pa, pb in zip(a, b))
    assert b[0].grad is None


def test_settings_are_checked():
    with pytest.raises(TrainingError, match="epochs must be at least 1.*lr must be a positive number"):
        TrainSettings(epochs=0, lr=float("nan")).check()
    with pytest.raises(TrainingError, match="precision must be one of float32, bfloat16"):
        TrainSettings(precision="int8").check()


# ---------------------------------------------------------------------------- what is refused
def test_the_0_6b_layout_is_refused_with_the_reason(tmp_path):
    folder = write_random_model(tmp_path / "small", "base", "tiny")
    with pytest.raises(TrainingError, match=r"width 32.*width 64.*1.7B Base model \(2048 and 2048\), not the 0.6B"):
        check_base(Qwen3TTSConfig.from_folder(folder), folder)


def test_a_custom_voice_model_is_refused(tmp_path):
    folder = write_random_model(tmp_path / "cv", "custom_voice", "tiny-1b7")
    with pytest.raises(TrainingError, match="is a custom_voice model; speaker fine-tuning starts from a Base model"):
        check_base(Qwen3TTSConfig.from_folder(folder), folder)


def test_speaker_names():
    assert check_speaker(" Alice_2 ") == "alice_2"
    for bad in ("", "a b", "x" * 65, "名前/../"):
        with pytest.raises(TrainingError, match="speaker name"):
            check_speaker(bad)


# ---------------------------------------------------------------------------- the export
def test_export_is_a_custom_voice_folder_koe_speaks_with(setup, tmp_path):
    import koe

    _, base, _ = setup
    train(setup, tmp_path / "voice", epochs=1)
    out = tmp_path / "voice"
    config = json.loads((out / "config.json").read_text())
    assert config["tts_model_type"] == "custom_voice"
    assert config["talker_config"]["spk_id"] == {"alice": 3000} and config["talker_config"]["spk_is_dialect"] == {"alice": False}
    saved = weights(out)
    assert not [k for k in saved if k.startswith("speaker_encoder.")]
    base_keys = {k for k in load_file(str(base / "model.safetensors")) if not k.startswith("speaker_encoder.")}
    assert set(saved) == base_keys
    checkpoint = load_file(str(out / "training" / "checkpoint" / "trainer.safetensors"))
    assert torch.equal(saved["talker.model.codec_embedding.weight"][3000], checkpoint["target_speaker_embedding"])
    assert (out / "speech_tokenizer" / "model.safetensors").exists() and (out / "vocab.json").exists()
    tts = koe.load(out)
    assert tts.capabilities.speakers == ("alice",)
    result = tts.generate("Hello there.", speaker="alice", seed=1)
    assert result.audio.size > 0 and result.sample_rate == 24000


# ---------------------------------------------------------------------------- LoRA (opt-in)
def test_lora_trains_adapters_only_and_exports_them_merged(setup, tmp_path):
    from koe.engines.qwen3_tts.finetune.lora import TARGETS

    _, base, _ = setup
    full = train(setup, tmp_path / "full", epochs=1)
    lora = train(setup, tmp_path / "lora", epochs=3, lr=1e-2, lora_rank=4)
    assert lora.losses[0] == full.losses[0]  # B starts at zero: the first step is the base model's
    per_epoch = [sum(lora.losses[i : i + 6]) / 6 for i in range(0, 18, 6)]
    assert per_epoch[-1] < per_epoch[0] - 0.1, per_epoch
    kept = load_file(str(tmp_path / "lora" / "training" / "checkpoint" / "talker.safetensors"))
    assert kept and all(k.endswith((".lora_A", ".lora_B")) for k in kept)
    assert {k.rsplit(".", 2)[-2] for k in kept} == set(TARGETS)
    exported, original = weights(tmp_path / "lora"), load_file(str(base / "model.safetensors"))
    changed = {k for k in exported if not torch.equal(exported[k], original[k])}
    assert changed and all(k.endswith(tuple(f"{t}.weight" for t in TARGETS)) or k == "talker.model.codec_embedding.weight" for k in changed)
    assert any(".code_predictor." in k for k in changed) and any(".model.layers." in k and ".code_predictor." not in k for k in changed)


def test_lora_merge_computes_what_the_adapters_compute(setup):
    from koe.engines.qwen3_tts.finetune.batch import SpeakerExamples
    from koe.engines.qwen3_tts.finetune.lora import add_lora, merged_state
    from koe.engines.qwen3_tts.finetune.objective import speaker_loss
    from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
    from koe.engines.qwen3_tts.text.tokenizer import QwenTokenizer

    _, base, rows = setup
    cfg = Qwen3TTSConfig.from_folder(base)
    net = Qwen3TTSNetwork.from_folder(base, cfg)
    add_lora(net, 4, 8.0, seed=0)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("lora_B"):
                p.normal_(0, 0.05)  # a trained-looking adapter
    batch = collate([SpeakerExamples(rows, QwenTokenizer.from_folder(base), read_24k)[i] for i in (0, 1)], cfg)
    with torch.no_grad():
        with_adapters = speaker_loss(net, batch).total
        plain = Qwen3TTSNetwork.from_folder(base, cfg)
        plain.talker.load_state_dict(merged_state(net.talker), strict=True)
        merged = speaker_loss(plain, batch).total
    assert torch.allclose(with_adapters, merged, rtol=1e-5), (float(with_adapters), float(merged))


def test_lora_resume_and_export_of_a_stopped_run(setup, tmp_path):
    from koe.engines.qwen3_tts.finetune.run import export_checkpoint

    whole = train(setup, tmp_path / "whole", epochs=2, lr=1e-2, lora_rank=4)
    part = train(setup, tmp_path / "part", epochs=2, lr=1e-2, lora_rank=4, save_every=1, should_stop=lambda: True)
    assert not part.finished
    rest = train(setup, tmp_path / "part", epochs=2, lr=1e-2, lora_rank=4, save_every=1)
    assert rest.losses == whole.losses
    assert_same_weights(weights(tmp_path / "whole"), weights(tmp_path / "part"))
    (tmp_path / "part" / "training" / "run.json").write_text(json.dumps({"base": str(setup[1]), "speaker": "alice"}))
    (tmp_path / "part" / "model.safetensors").unlink()
    export_checkpoint(tmp_path / "part")  # from the adapters in the checkpoint, merged again
    assert_same_weights(weights(tmp_path / "whole"), weights(tmp_path / "part"))
    with pytest.raises(TrainingError, match=r"lora_rank 4 \(now 8\)"):
        train(setup, tmp_path / "part", epochs=3, lr=1e-2, lora_rank=8)
