"""F5-TTS fine-tuning against upstream f5-tts==1.1.22's own trainer (`finetune_cli.py`'s path:
`Trainer.train` with `resumable_with_seed=666`, tests/oracle_f5/finetune.py), bit for bit on the
CPU in float32, on a tiny random model and a few synthetic clips (24 kHz, 16 kHz stereo, 44.1 kHz;
English, Chinese, both): after torch and Python's `random` are seeded with the same N, every step's
loss, gradient norm and learning rate are upstream's, and so are the final checkpoint's weights,
EMA weights, optimizer state and update count, and the checkpoints written along the way; with
gradient accumulation (a partial group at each epoch's end) and clipping that bites too. The
exported folder loads in upstream's inference (strictly: no missing or unexpected keys) and
speaks koe's samples for the same seed."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

import koe
from koe.engines.f5_tts.finetune.data import Clip
from koe.engines.f5_tts.finetune.run import EXPORT_NAME, finetune
from koe.engines.f5_tts.finetune.trainer import TrainSettings
from koe.engines.f5_tts.fixtures import write_random_model

pytestmark = pytest.mark.oracle

TEXTS = ["Hello there.", "你好，世界。", "A longer sentence to speak.", "Short.", "我们今天去公园。", "Mixed 中文 and English."]
RATES = [24000, 24000, 16000, 44100, 24000, 24000]
RUNS = {  # id: (arch, seed, the Trainer's settings)
    "plain": ("F5TTS_v1_Base", 3, dict(epochs=4, learning_rate=1e-3, num_warmup_updates=2, batch_size_per_gpu=250, max_samples=3,
                                      grad_accumulation_steps=1, max_grad_norm=1.0, save_per_updates=4, last_per_updates=2)),
    "accumulated": ("F5TTS_Base", 5, dict(epochs=3, learning_rate=2e-3, num_warmup_updates=1, batch_size_per_gpu=300, max_samples=2,
                                          grad_accumulation_steps=3, max_grad_norm=0.5, save_per_updates=3, last_per_updates=5)),
}  # fmt: skip


def _settings(s: dict, seed: int) -> TrainSettings:
    return TrainSettings(
        epochs=s["epochs"],
        lr=s["learning_rate"],
        warmup_updates=s["num_warmup_updates"],
        frames_per_batch=s["batch_size_per_gpu"],
        max_clips=s["max_samples"],
        grad_accum=s["grad_accumulation_steps"],
        max_grad_norm=s["max_grad_norm"],
        save_every=s["save_per_updates"],
        last_every=s["last_per_updates"],
        seed=seed,
    )


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[Clip]:
    folder = tmp_path_factory.mktemp("f5-clips")
    rng = np.random.default_rng(0)
    found = []
    for i, (text, rate) in enumerate(zip(TEXTS, RATES)):
        n = int(rate * (0.6 + 0.25 * i))
        x = (0.2 * np.sin(2 * np.pi * (150 + 20 * i) * np.arange(n) / rate) + 0.02 * rng.standard_normal(n)).astype(np.float32)
        if rate != 24000:
            x = np.stack([x, 0.5 * x], axis=-1)  # stereo: the channels' mean
        path = folder / f"clip{i}.wav"
        sf.write(path, x, rate, subtype="PCM_16")
        found.append(Clip(path, text))
    return found


_RUNS: dict[str, tuple] = {}


def _run(run_id: str, clips: list[Clip], factory) -> tuple:
    """(upstream's tensors, its info, koe's step reports, koe's result) of a run, made once a module."""
    if run_id not in _RUNS:
        arch, seed, settings = RUNS[run_id]
        base = write_random_model(factory.mktemp(f"base-{arch}"), arch)
        job = {"model": str(base), "clips": [{"audio": str(c.audio), "text": c.text} for c in clips], "seed": seed, "settings": settings}
        upstream, info = run_oracle("finetune", job, factory.mktemp("oracle"), family="f5_tts")
        reports: list = []
        done = finetune(base, clips, factory.mktemp("run") / "finetuned", _settings(settings, seed), on_step=reports.append)
        _RUNS[run_id] = (upstream, info, reports, done)
    return _RUNS[run_id]


@pytest.fixture(scope="module", params=list(RUNS))
def compared(request, clips, tmp_path_factory):
    return (request.param, *_run(request.param, clips, tmp_path_factory))


def test_every_step_has_upstreams_loss_gradient_norm_and_rate(compared):
    run_id, upstream, info, reports, done = compared
    assert [r.loss for r in reports] == upstream["loss"].tolist()
    assert [r.grad_norm for r in reports if r.grad_norm is not None] == upstream["grad_norm"].tolist()
    assert [r.lr for r in reports] == upstream["lr"].tolist()
    assert done.updates == info["update"] == reports[-1].optimizer_steps
    norms = [r.grad_norm for r in reports if r.grad_norm is not None]
    if run_id == "accumulated":  # optimizer steps only at each third batch and each epoch's last; clipping bites
        assert len(norms) < len(reports) and max(norms) > RUNS[run_id][2]["max_grad_norm"]


def test_the_checkpoint_is_upstreams(compared):
    _, upstream, info, _, done = compared
    last = torch.load(done.folder / "training" / "model_last.pt", map_location="cpu", weights_only=True)
    assert last["update"] == info["update"]
    for part, prefix in (("model_state_dict", "model."), ("ema_model_state_dict", "ema.")):
        assert {prefix + k for k in last[part]} == {k for k in upstream if k.startswith(prefix)}, part
        for name, tensor in last[part].items():
            assert same(tensor, upstream[prefix + name]), (part, name)
    state = last["optimizer_state_dict"]["state"]
    assert {f"optimizer.{i}.{k}" for i, s in state.items() for k in s} == {k for k in upstream if k.startswith("optimizer.")}
    for index, entries in state.items():
        for key, tensor in entries.items():
            assert same(tensor, upstream[f"optimizer.{index}.{key}"]), (index, key)
    scheduler = last["scheduler_state_dict"]
    assert (scheduler["last_epoch"], list(scheduler["_milestones"]), scheduler["_last_lr"]) == (
        info["scheduler"]["last_epoch"],
        info["scheduler"]["_milestones"],
        info["scheduler"]["_last_lr"],
    )
    written = sorted(p.name for p in (done.folder / "training").iterdir())
    assert written == [name for name in info["files"] if not name.startswith("pretrained_")]


def test_upstream_loads_the_export_and_speaks_koes_samples(clips, tmp_path_factory, tmp_path):
    *_, done = _run("plain", clips, tmp_path_factory)
    folder = tmp_path / "export"  # the loadable files only (the run's pickles are no input of the key)
    folder.mkdir()
    for name in ("config.yaml", "vocab.txt", EXPORT_NAME, "RANDOM_WEIGHTS.txt"):
        shutil.copy2(done.folder / name, folder / name)
    shutil.copytree(done.folder / "vocos", folder / "vocos")
    case = {
        "id": "say",
        "kind": "infer",
        "ref_audio": str(clips[0].audio),
        "ref_text": TEXTS[0],
        "text": "Fine-tuned, then spoken.",
        "seed": 9,
        "settings": {"nfe_step": 8},
    }
    tensors, _ = run_oracle("generate", {"model": str(folder), "cases": [case]}, tmp_path / "oracle", family="f5_tts")
    engine = koe.load(folder, device="cpu")
    try:
        voice = engine.prepare_voice(str(clips[0].audio), ref_text=TEXTS[0])
        result = engine.generate(case["text"], voice=voice, seed=9, nfe_step=8)
    finally:
        engine.close()
    assert same(result.audio, tensors["say.wav"])
