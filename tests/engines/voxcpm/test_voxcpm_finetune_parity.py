"""VoxCPM fine-tuning against upstream voxcpm==2.0.3's own training script
(`scripts/train_voxcpm_finetune.py`, its `train(**config)` as a YAML config runs it;
tests/oracle_voxcpm/finetune.py), bit for bit on the CPU in float32, on tiny random models of both
architectures and a few synthetic clips (at the AudioVAE's rate, at another rate, in stereo):
upstream seeds torch with 42 and builds its model (koe replays those draws), then every update's
diffusion and stop losses and gradient norm, the learning rate, every checkpoint's weights, the
final optimizer state and the scheduler's are upstream's; with gradient accumulation across an
epoch's end, clipping that bites, and upstream's token-budget setting on. Each checkpoint koe
writes holds the files upstream's does (so upstream's `from_local` reads it as it reads its own),
and the exported folder loads in koe and speaks."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import load_file

import koe
from koe.compat.voxcpm import VoxCPM
from koe.engines.dataset import Clip
from koe.engines.voxcpm.finetune.run import finetune
from koe.engines.voxcpm.finetune.trainer import LoRASettings, TrainSettings
from koe.engines.voxcpm.fixtures import write_random_model

pytestmark = pytest.mark.oracle

TEXTS = ["Hello there.", "你好，世界。", "A longer sentence to speak.", "Short.", "我们今天去公园。", "Mixed 中文 and English.", "One more."]
RUNS = {  # id: (variant, the clips' rates, upstream's config)
    "v2": ("VoxCPM2", [16000, 16000, 22050, 16000, 16000, 44100, 16000],
           dict(sample_rate=16000, batch_size=2, grad_accum_steps=2, num_iters=4, max_steps=4, warmup_steps=1, learning_rate=2e-3,
                weight_decay=0.01, max_grad_norm=0.5, save_interval=3, max_batch_tokens=0)),
    "v15": ("VoxCPM1.5", [44100, 44100, 16000, 44100, 44100, 44100, 44100],
            dict(sample_rate=44100, batch_size=3, grad_accum_steps=1, num_iters=3, max_steps=3, warmup_steps=2, learning_rate=1e-3,
                 weight_decay=0.05, max_grad_norm=0.0, save_interval=2, max_batch_tokens=600)),
    "lora": ("VoxCPM2", [16000, 22050, 16000, 16000, 44100, 16000, 16000],
             dict(sample_rate=16000, batch_size=2, grad_accum_steps=2, num_iters=4, max_steps=4, warmup_steps=2, learning_rate=1e-3,
                  weight_decay=0.01, max_grad_norm=0.5, save_interval=2, max_batch_tokens=0,
                  lora=dict(enable_lm=True, enable_dit=True, enable_proj=True, r=4, alpha=8, dropout=0.0))),
    "lora-v15": ("VoxCPM1.5", [44100] * 7,
                 dict(sample_rate=44100, batch_size=3, grad_accum_steps=1, num_iters=3, max_steps=3, warmup_steps=1, learning_rate=1e-3,
                      weight_decay=0.01, max_grad_norm=0.0, save_interval=5, max_batch_tokens=0,
                      lora=dict(enable_lm=True, enable_dit=False, enable_proj=True, r=3, alpha=5, dropout=0.0))),
}  # fmt: skip


def _settings(c: dict) -> TrainSettings:
    lora = c.get("lora")
    extra = (
        dict(
            lora_rank=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            lora_lm=lora["enable_lm"],
            lora_dit=lora["enable_dit"],
            lora_proj=lora["enable_proj"],
        )
        if lora
        else {}
    )
    return (LoRASettings if lora else TrainSettings)(
        **extra,
        steps=c["num_iters"],
        lr=c["learning_rate"],
        weight_decay=c["weight_decay"],
        warmup_updates=c["warmup_steps"],
        batch_size=c["batch_size"],
        grad_accum=c["grad_accum_steps"],
        max_grad_norm=c["max_grad_norm"],
        max_batch_tokens=c["max_batch_tokens"],
        save_every=c["save_interval"],
    )


def _clips(folder, rates: list[int]) -> list[Clip]:
    rng = np.random.default_rng(1)
    found = []
    for i, (text, rate) in enumerate(zip(TEXTS, rates)):
        n = int(rate * (0.3 + 0.07 * i))
        x = (0.2 * np.sin(2 * np.pi * (150 + 20 * i) * np.arange(n) / rate) + 0.02 * rng.standard_normal(n)).astype(np.float32)
        if rate not in (16000, 44100):
            x = np.stack([x, 0.5 * x], axis=-1)  # stereo at another rate: the channels' mean, resampled
        path = folder / f"clip{i}.wav"
        sf.write(path, x, rate, subtype="PCM_16")
        found.append(Clip(path, text))
    return found


_RUNS: dict[str, tuple] = {}


def _run(run_id: str, factory) -> tuple:
    """(upstream's tensors, its info, koe's reports, koe's run folder, the base) of a run, made once a module."""
    if run_id not in _RUNS:
        variant, rates, config = RUNS[run_id]
        base = write_random_model(factory.mktemp(f"base-{variant}"), variant)
        clips = _clips(factory.mktemp("clips"), rates)
        job = {"model": str(base), "clips": [{"audio": str(c.audio), "text": c.text} for c in clips], "config": {**config, "num_workers": 0, "log_interval": 1}}
        upstream, info = run_oracle("finetune", job, factory.mktemp("oracle"), family="voxcpm")
        reports: list = []
        out = factory.mktemp("koe") / "model"
        torch.set_num_threads(1)
        finetune(base, clips, out, _settings(config), on_step=reports.append)
        _RUNS[run_id] = (upstream, info, reports, out, base)
    return _RUNS[run_id]


@pytest.mark.parametrize("run_id", list(RUNS))
def test_every_update_is_upstreams(run_id, tmp_path_factory):
    upstream, info, reports, _, _ = _run(run_id, tmp_path_factory)
    metrics = info["metrics"]
    assert len(reports) == len(metrics) == RUNS[run_id][2]["num_iters"]
    for report, theirs in zip(reports, metrics):
        assert report.diff == theirs["loss/diff"] and report.stop == theirs["loss/stop"]
        assert report.grad_norm == theirs["grad_norm"]
    assert [r.lr for r in reports[1:]] == [m["lr"] for m in metrics[:-1]]  # upstream logs the next update's rate


@pytest.mark.parametrize("run_id", list(RUNS))
def test_checkpoints_are_upstreams(run_id, tmp_path_factory):
    upstream, info, _, out, base = _run(run_id, tmp_path_factory)
    training = out / "training"
    steps = sorted(info["states"])
    assert sorted(p.name for p in training.glob("step_*")) == steps
    for step in steps:
        assert json.loads((training / step / "training_state.json").read_text()) == info["states"][step]
        weights = "lora_weights.safetensors" if "lora" in RUNS[run_id][2] else "model.safetensors"
        mine = {f"{step}.{k}": v for k, v in load_file(training / step / weights).items()}
        theirs = {k: v for k, v in upstream.items() if k.startswith(f"{step}.")}
        assert set(mine) == set(theirs)
        for name, value in mine.items():
            assert same(value, theirs[name]), name
        if "lora" in RUNS[run_id][2]:  # what the adapters are, and the base (written as given)
            described = json.loads((training / step / "lora_config.json").read_text())
            assert described == {"base_model": str(base), "lora_config": info["lora"][step]}
    upstream_files = {f for f in info["files"] if f != "train.log"}
    mine = {str(p.relative_to(training)) for p in training.rglob("*") if p.is_file()}
    assert upstream_files <= mine
    state = torch.load(training / "latest" / "optimizer.pth", weights_only=True)
    for index, entries in state["state"].items():
        for key, value in entries.items():
            assert same(value if torch.is_tensor(value) else torch.tensor(value), upstream[f"optimizer.{index}.{key}"]), (index, key)
    scheduler = torch.load(training / "latest" / "scheduler.pth", weights_only=True)
    assert scheduler["last_epoch"] == info["scheduler"]["last_epoch"] and scheduler["_last_lr"] == info["scheduler"]["_last_lr"]


def test_the_export_is_the_last_checkpoint_and_speaks(tmp_path_factory):
    upstream, info, _, out, base = _run("v2", tmp_path_factory)
    last = load_file(out / "model.safetensors")
    assert all(same(v, upstream[f"step_{4:07d}.{k}"]) for k, v in last.items())
    audio = koe.load(out).generate("Hello.", seed=0, max_len=4)
    assert audio.audio.size > 0 and audio.sample_rate == 48000


def test_the_lora_export_speaks_upstreams_samples(tmp_path_factory):
    """The LoRA run's adapters in upstream's inference (the base, `lora_config` from the run's
    lora_config.json, `lora_weights_path`) and in koe: the run's folder loaded as a model folder,
    and the drop-in given the base and the adapters apart."""
    upstream, info, _, out, base = _run("lora", tmp_path_factory)
    cases = [
        {"text": "Hello there, a test.", "seed": 1, "max_len": 6, "retry_badcase": False},
        {"text": "你好。", "seed": 2, "max_len": 5, "inference_timesteps": 4, "retry_badcase": False},
    ]
    adapters = tmp_path_factory.mktemp("adapters")  # the adapters alone, their config without the run's paths (a recording's key is its inputs' bytes)
    shutil.copyfile(out / "lora_weights.safetensors", adapters / "lora_weights.safetensors")
    (adapters / "lora_config.json").write_text(json.dumps({"lora_config": json.loads((out / "lora_config.json").read_text())["lora_config"]}))
    tensors, found = run_oracle(
        "generate", {"model": str(base), "lora": str(adapters), "cases": cases}, tmp_path_factory.mktemp("oracle-lora"), family="voxcpm"
    )
    assert found["adapters"] == 40
    described = json.loads((out / "lora_config.json").read_text())["lora_config"]
    for m in (
        VoxCPM(str(out), enable_denoiser=False),
        VoxCPM(str(base), enable_denoiser=False, lora_config=described, lora_weights_path=str(out / "lora_weights.safetensors")),
    ):
        for i, case in enumerate(cases):
            torch.manual_seed(case["seed"])
            got = m.generate(**{k: v for k, v in case.items() if k != "seed"})
            assert same(got, tensors[f"case{i}"]), i
