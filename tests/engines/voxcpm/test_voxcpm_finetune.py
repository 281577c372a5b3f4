"""VoxCPM fine-tuning without upstream: bad settings and bad data (every problem at once, nothing
written), a folder that is no VoxCPM model, the export a run leaves (a model folder koe loads,
the run's checkpoints beside it), a stopped run resumed (the uninterrupted run's weights, within
an epoch or across its end), a damaged checkpoint, other settings or other data refused; and the
shells: `koe train finetune` from a folder of clip + transcript pairs to a model `koe speak`
uses, `koe.train.finetune` with the family's settings, `koe models info` naming the training; and
LoRA (`koe train lora`, `koe.train.lora`): a folder of the base's files with the adapters beside,
which koe speaks with, and a stopped LoRA run resumed to the uninterrupted run's adapters."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import load_file, save_file

import koe
from koe.engines.base import TrainingError
from koe.engines.dataset import Clip, DatasetError
from koe.engines.voxcpm.finetune.run import finetune
from koe.engines.voxcpm.finetune.trainer import LoRASettings, TrainSettings
from koe.engines.voxcpm.fixtures import write_random_model

pytest_plugins = ["cli_fixtures"]

TEXTS = ["One clip.", "两个。", "Three clips here.", "Four.", "The fifth one."]
QUICK = TrainSettings(steps=5, lr=1e-3, warmup_updates=1, batch_size=2, grad_accum=1, max_grad_norm=1.0, save_every=2)


def _clip(path, seconds: float, seed: int, rate: int = 16000, level: float = 0.2) -> None:
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    x = level * np.sin(2 * np.pi * (140 + 30 * seed) * np.arange(n) / rate) + 0.1 * level * rng.standard_normal(n)
    sf.write(path, x.astype(np.float32), rate, subtype="PCM_16")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("voxcpm"), "VoxCPM2")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pairs")
    for i, text in enumerate(TEXTS):
        _clip(folder / f"utt{i}.wav", 0.3 + 0.1 * i, i)
        (folder / f"utt{i}.txt").write_text(text + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def clips(pairs) -> list[Clip]:
    return [Clip(pairs / f"utt{i}.wav", text) for i, text in enumerate(TEXTS)]


def test_bad_settings_are_listed_at_once_and_nothing_is_written(base, clips, tmp_path):
    bad = TrainSettings(steps=0, lr=-1.0, batch_size=0, grad_accum=0, weight_decay=-1)
    with pytest.raises(TrainingError) as refused:
        finetune(base, clips, tmp_path / "out", bad)
    for name in ("steps", "lr", "batch_size", "grad_accum", "weight_decay"):
        assert name in refused.value.message
    assert not (tmp_path / "out").exists()


def test_bad_data_is_listed_at_once_and_nothing_is_written(base, clips, tmp_path):
    _clip(tmp_path / "silent.wav", 0.5, 0, level=0.0)
    _clip(tmp_path / "tiny.wav", 0.01, 1)
    (tmp_path / "broken.wav").write_bytes(b"RIFF....not a wave")
    _clip(tmp_path / "long.wav", 4.0, 2)
    bad = [
        *clips,
        Clip(tmp_path / "silent.wav", "x"),
        Clip(tmp_path / "tiny.wav", "y"),
        Clip(tmp_path / "missing.wav", "z"),
        Clip(tmp_path / "broken.wav", "w"),
    ]
    with pytest.raises(DatasetError) as refused:
        finetune(base, bad, tmp_path / "out", QUICK)
    text = "\n".join(refused.value.problems)
    assert "silent" in text and "shorter than one latent patch" in text and "no such file" in text and "cannot be decoded" in text, text
    with pytest.raises(DatasetError, match="max_batch_tokens // batch_size = 25"):
        finetune(base, [*clips, Clip(tmp_path / "long.wav", "long")], tmp_path / "out", TrainSettings(**{**QUICK.__dict__, "max_batch_tokens": 50}))
    with pytest.raises(DatasetError, match="fewer than a batch"):
        finetune(base, clips[:1], tmp_path / "out", QUICK)
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_no_voxcpm_model_is_refused(clips, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainingError, match="not a VoxCPM model folder"):
        finetune(tmp_path / "empty", clips, tmp_path / "out")


def _weights(out):
    return load_file(out / "training" / "latest" / "model.safetensors"), torch.load(out / "training" / "latest" / "optimizer.pth", weights_only=True)["state"]


def _equal(a, b) -> bool:
    (wa, oa), (wb, ob) = a, b
    return all(torch.equal(wa[k], wb[k]) for k in wa) and all(torch.equal(oa[i][k], ob[i][k]) for i in oa for k in oa[i])


@pytest.fixture(scope="module")
def uninterrupted(base, clips, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "run"
    losses = []
    done = finetune(base, clips, out, QUICK, on_step=lambda r: losses.append(r.loss))
    return out, done, losses


def test_a_run_leaves_a_model_folder_koe_loads_and_its_checkpoints(uninterrupted, pairs):
    out, done, losses = uninterrupted
    assert done.folder == out and done.updates == 5 and len(losses) == 5
    steps = {f"step_{u:07d}" for u in (0, 2, 4, 5)}  # every save_every, the last update, and after the loop
    assert {p.name for p in (out / "training").iterdir()} == steps | {"latest"}
    exported, last = load_file(out / "model.safetensors"), load_file(out / "training" / "latest" / "model.safetensors")
    assert set(exported) == set(last) and all(torch.equal(exported[k], last[k]) for k in last)
    engine = koe.load(out, device="cpu")
    try:
        voice = engine.prepare_voice(str(pairs / "utt2.wav"), ref_text=TEXTS[2])
        assert engine.generate("Hello.", voice=voice, seed=1, max_len=4).audio.size
    finally:
        engine.close()


@pytest.mark.parametrize("stop_at", [1, 3], ids=["within-epoch", "across-epoch-end"])  # 2 batches an epoch: update 3 starts a new pass
def test_a_stopped_run_resumed_gives_the_uninterrupted_weights(base, clips, uninterrupted, tmp_path, stop_at):
    whole, _, whole_losses = uninterrupted
    out = tmp_path / "run"
    losses = []
    first = finetune(base, clips, out, QUICK, on_step=lambda r: losses.append(r.loss), should_stop=lambda: len(losses) >= stop_at)
    assert first.updates == stop_at and not (out / "model.safetensors").exists()
    done = finetune(base, clips, out, QUICK, on_step=lambda r: losses.append(r.loss))
    assert done.updates == 5 and losses == whole_losses
    assert _equal(_weights(out), _weights(whole))
    again = finetune(base, clips, out, QUICK)  # finished: exported again, nothing trained
    assert again.updates == 5 and _equal(_weights(out), _weights(whole))


def test_a_damaged_checkpoint_or_other_settings_or_data_are_refused(base, clips, tmp_path):
    out = tmp_path / "run"
    finetune(base, clips, out, QUICK, should_stop=lambda: True)
    with pytest.raises(TrainingError, match="made with other settings \\(lr, seed\\)"):
        finetune(base, clips, out, TrainSettings(**{**QUICK.__dict__, "lr": 2e-3, "seed": 5}))
    with pytest.raises(TrainingError, match="made on other data"):
        finetune(base, clips[:4], out, QUICK)
    state = out / "training" / "latest" / "koe.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    with pytest.raises(TrainingError, match="latest: a damaged checkpoint"):
        finetune(base, clips, out, QUICK)


FAST = ["--steps", "2", "--lr", "1e-3", "--warmup-updates", "1", "--batch-size", "2", "--grad-accum", "1", "--no-progress"]


def test_the_cli_makes_a_model_koe_speak_uses(base, pairs, home, koe, tmp_path):
    out = tmp_path / "mine"
    r = koe("train", "finetune", "--model", base, "--data", pairs, "--out", out, *FAST)
    assert "the fine-tuned model (2 updates)" in r.output, r.output
    wav = tmp_path / "hi.wav"
    koe("speak", "--model", out, "--ref", pairs / "utt2.wav", "--ref-text", TEXTS[2], "--seed", "1", "--max-len", "4", "Hello.", "-o", wav)
    assert wav.stat().st_size > 1000
    other = koe("train", "finetune", "--model", base, "--data", pairs, "--out", tmp_path / "o2", "--epochs", "2", ok=False)
    assert other.exit_code == 2 and "unknown training settings: epochs" in " ".join(other.output.split()), other.output
    assert "training: koe train finetune, koe train lora" in koe("models", "info", base).output


def test_the_cli_trains_lora_adapters_the_model_speaks_with(base, pairs, home, koe, tmp_path):
    out = tmp_path / "adapters"
    r = koe("train", "lora", "--model", base, "--data", pairs, "--out", out, *FAST, "--lora-rank", "4", "--lora-alpha", "8", "--lora-proj")
    assert "the fine-tuned model (2 updates)" in r.output, r.output
    described = json.loads((out / "lora_config.json").read_text())
    assert described["lora_config"]["r"] == 4 and described["lora_config"]["enable_proj"] and described["base_model"] == str(base)
    assert (out / "lora_weights.safetensors").is_file() and (out / "model.safetensors").read_bytes() == (base / "model.safetensors").read_bytes()
    wav = tmp_path / "hi.wav"
    koe("speak", "--model", out, "--seed", "1", "--max-len", "4", "Hello.", "-o", wav)
    assert wav.stat().st_size > 1000
    whole = koe("train", "finetune", "--model", base, "--data", pairs, "--out", tmp_path / "o2", *FAST, "--lora-rank", "4", ok=False)
    assert whole.exit_code == 2 and "unknown training settings: lora_rank" in " ".join(whole.output.split()), whole.output


def test_a_stopped_lora_run_resumed_gives_the_uninterrupted_adapters(base, clips, tmp_path):
    settings = LoRASettings(**{**QUICK.__dict__, "lr": 1e-3}, lora_rank=4, lora_proj=True)
    finetune(base, clips, tmp_path / "whole", settings)
    losses = []
    finetune(base, clips, tmp_path / "run", settings, on_step=lambda r: losses.append(r.loss), should_stop=lambda: len(losses) >= 3)
    finetune(base, clips, tmp_path / "run", settings)
    a, b = (load_file(tmp_path / name / "lora_weights.safetensors") for name in ("whole", "run"))
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    engine = koe.load(tmp_path / "run", device="cpu")  # the base's files and the adapters beside them
    try:
        assert engine.generate("Hello.", seed=1, max_len=4).audio.size
    finally:
        engine.close()


def test_lora_settings_and_a_hostile_lora_folder_are_refused(base, clips, tmp_path):
    with pytest.raises(TrainingError, match="lora_rank must be at least 1; lora_dropout must be from 0 to below 1; lora_lm, lora_dit or lora_proj"):
        finetune(base, clips, tmp_path / "out", LoRASettings(lora_rank=0, lora_dropout=1.0, lora_lm=False, lora_dit=False))
    folder = tmp_path / "hostile"
    shutil.copytree(base, folder)
    save_file({"base_lm.layers.0.self_attn.q_proj.lora_A": torch.zeros(2, 64)}, str(folder / "lora_weights.safetensors"))
    with pytest.raises(ValueError, match="do not fit the model's adapters"):
        koe.load(folder, device="cpu")
    (folder / "lora_config.json").write_text(json.dumps({"base_model": "/etc", "lora_config": {"r": "x", "enable_lm": "yes", "dropout": 2}}))
    with pytest.raises(ValueError, match="r must be a whole number.*dropout must be.*must be true or false"):
        koe.load(folder, device="cpu")
    (folder / "lora_config.json").write_text(json.dumps({"lora_config": {"r": 2, "evil": 1}}))
    with pytest.raises(ValueError, match="unknown LoRA settings"):
        koe.load(folder, device="cpu")


def test_from_python_with_the_familys_settings(base, pairs, tmp_path):
    import koe.train

    steps = []
    done = koe.train.finetune(base, pairs, tmp_path / "py", steps=2, lr=1e-3, warmup_updates=1, batch_size=2, grad_accum=1, on_step=steps.append)
    assert done.updates == steps[-1].optimizer_steps == 2 and (done.folder / "model.safetensors").is_file()
    assert steps[0].diff + steps[0].stop == steps[0].loss
    adapters = koe.train.lora(base, pairs, tmp_path / "lora", steps=1, batch_size=2, grad_accum=1, lora_rank=2)
    assert adapters.updates == 1 and (adapters.folder / "lora_weights.safetensors").is_file()
