"""OmniVoice fine-tuning on a tiny random model, koe alone: clips in (a JSONL with languages and
instructions, mixed rates, stereo), their audio tokens in upstream's shards with upstream's labels;
a stopped run resumed gives the
uninterrupted run's checkpoints bit for bit, and a finished one's command again exports it again;
bad data lists every problem at once with nothing written; settings, a damaged checkpoint and other
settings on resume are refused by name; the export is a model koe speaks with."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import load_file

import koe
from koe.engines.base import TrainingError
from koe.engines.dataset import DatasetError
from koe.engines.omnivoice.finetune.data import load_clips
from koe.engines.omnivoice.finetune.run import finetune
from koe.engines.omnivoice.finetune.shards import Sample, read_shard
from koe.engines.omnivoice.finetune.trainer import TrainSettings, lr_factor
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.omnivoice.reference import load_clip

FAST = TrainSettings(
    steps=4, lr=1e-3, warmup_updates=1, batch_tokens=200, min_sample_tokens=10, grad_accum=2, max_grad_norm=0.5, save_every=2, seed=5, workers=2
)


def _samples(n: int = 8) -> list[Sample]:
    rng = np.random.default_rng(1)
    return [Sample(f"utt{i:06d}", rng.integers(0, 1024, (8, 20 + 5 * i)).astype(np.int16), {"text": f"Sentence number {i}."}) for i in range(n)]


def _clip(path, seconds: float, seed: int, rate: int = 24000, level: float = 0.2, stereo: bool = False) -> None:
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    x = level * np.sin(2 * np.pi * (140 + 30 * seed) * np.arange(n) / rate) + 0.1 * level * rng.standard_normal(n)
    sf.write(path, np.stack([x, 0.5 * x], axis=-1) if stereo else x, rate, subtype="PCM_16")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("base"))


def _files(folder) -> dict[str, bytes]:
    """Every file of a run's folder but those naming its own path (the manifest, the data config)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in ("data.lst", "data_config.json")
    }


def test_clips_become_upstreams_shards(base, tmp_path):
    rows = [
        ("a.wav", "Hello there.", 24000, False, {"language_id": "en"}),
        ("b.wav", "你好。", 16000, True, {"instruct": "female"}),
        ("c.wav", "Bonjour.", 44100, False, {}),
    ]
    lines = []
    for i, (name, text, rate, stereo, extra) in enumerate(rows):
        _clip(tmp_path / name, 0.4 + 0.2 * i, i, rate, stereo=stereo)
        lines.append(json.dumps({"audio": name, "text": text, **extra}, ensure_ascii=False))
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    done = finetune(base, tmp_path / "data.jsonl", out, TrainSettings(steps=1, min_sample_tokens=5, workers=2, batch_tokens=400))
    data = out / "training" / "data"
    manifest = [line.split() for line in (data / "data.lst").read_text().splitlines()]
    assert len(manifest) == 2 and [int(m[2]) for m in manifest] == [2, 1]  # a shard per worker
    assert json.loads((data / "data_config.json").read_text()) == {"train": [{"manifest_path": [str(data / "data.lst")]}]}
    found = [s for tar, jsonl, *_ in manifest for s in read_shard(tar, jsonl)]  # the tokens' values: test_omnivoice_finetune_parity.py
    for sample, (name, text, _, _, extra) in zip(found, rows):
        samples = load_clip(tmp_path / name, 24000).shape[-1]
        assert sample.tokens.dtype == np.int16 and sample.tokens.shape == (8, -(-samples // 960))  # whole frames
        assert sample.label == {"id": sample.key, "text": text, **extra, "audio_duration": samples / 24000, "num_tokens": sample.tokens.shape[1]}
    assert done.updates == 1 and (out / "model.safetensors").is_file()


def test_resuming_gives_the_uninterrupted_runs_bits(base, tmp_path):
    whole = finetune(base, _samples(), tmp_path / "whole", FAST)
    stops = iter([False, True])  # after the second update
    reports: list = []
    stopped = finetune(base, _samples(), tmp_path / "stopped", FAST, should_stop=lambda: next(stops, False), on_step=reports.append)
    assert stopped.updates == 2 and not (tmp_path / "stopped" / "model.safetensors").exists()
    resumed_reports: list = []
    resumed = finetune(base, _samples(), tmp_path / "stopped", FAST, on_step=resumed_reports.append)
    assert resumed.updates == whole.updates == FAST.steps
    assert _files(tmp_path / "whole") == _files(tmp_path / "stopped")  # every checkpoint, the shards and the export
    again = finetune(base, _samples(), tmp_path / "stopped", FAST)  # finished: exported again, nothing trained
    assert again.updates == FAST.steps


def test_another_seed_gives_other_weights(base, tmp_path):
    """(The same seed gives the same bits: the resumed run above is a second run of it.)"""
    one = TrainSettings(**{**FAST.__dict__, "steps": 1, "grad_accum": 1, "warmup_updates": 0})  # (a warm-up's first rate is 0)
    a = load_file(str(finetune(base, _samples(), tmp_path / "a", one).folder / "model.safetensors"))
    c = load_file(str(finetune(base, _samples(), tmp_path / "c", TrainSettings(**{**one.__dict__, "seed": 6})).folder / "model.safetensors"))
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_bad_data_lists_every_problem_and_writes_nothing(base, tmp_path):
    _clip(tmp_path / "ok.wav", 0.5, 1)
    _clip(tmp_path / "silent.wav", 0.5, 2, level=0.0)
    _clip(tmp_path / "long.wav", 2.0, 3)
    (tmp_path / "broken.wav").write_bytes(b"RIFF nonsense")
    rows = [
        {"audio": "ok.wav", "text": "Fine."},
        {"audio": "missing.wav", "text": "Gone."},
        {"audio": "ok.wav", "text": "Twice."},
        {"audio": "silent.wav", "text": "Nothing."},
        {"audio": "long.wav", "text": "Too long for max_sample_tokens."},
        {"audio": "broken.wav", "text": "Broken."},
        {"audio": "ok.wav", "text": "   "},
        {"text": "No audio."},
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n", encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        finetune(base, data, tmp_path / "out", TrainSettings(workers=1, min_sample_tokens=1, max_sample_tokens=30))
    text = "\n".join(caught.value.problems)
    assert "data.jsonl:7: an empty transcript" in text and "data.jsonl:8: no audio path" in text and "data.jsonl:9" in text
    assert "the same clip ok.wav" in text
    rows = [rows[i] for i in (1, 3, 4, 5)]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        finetune(base, data, tmp_path / "out", TrainSettings(workers=1, min_sample_tokens=1, max_sample_tokens=30))
    problems = caught.value.problems
    assert len(problems) == 4, problems
    for where, what in (
        ("data.jsonl:1", "no such file"),
        ("data.jsonl:2", "silent"),
        ("data.jsonl:3", "more than max_sample_tokens (30)"),
        ("data.jsonl:4", "cannot be decoded"),
    ):
        assert any(p.startswith(where) and what in p for p in problems), (where, problems)
    assert not (tmp_path / "out").exists()


def test_refusals(base, tmp_path):
    with pytest.raises(TrainingError, match="steps must be at least 1; schedule must be one of cosine, constant; workers must be at least 1"):
        finetune(base, _samples(), tmp_path / "x", TrainSettings(steps=0, schedule="linear", workers=0))
    with pytest.raises(TrainingError, match="3 clips for 4 data-loader workers"):
        finetune(base, _samples(3), tmp_path / "x", TrainSettings(workers=4))
    with pytest.raises(TrainingError, match="not an OmniVoice model folder"):
        finetune(tmp_path, _samples(), tmp_path / "x", FAST)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(TrainingError, match="holds something other than a fine-tuning run"):
        finetune(base, _samples(), tmp_path / "busy", FAST)
    assert not (tmp_path / "x").exists()
    stopped = finetune(base, _samples(), tmp_path / "run", FAST, should_stop=lambda: True)
    assert stopped.updates == 1
    with pytest.raises(TrainingError, match=r"other settings \(lr, seed\)"):
        finetune(base, _samples(), tmp_path / "run", TrainSettings(**{**FAST.__dict__, "lr": 1e-4, "seed": 1}))
    with pytest.raises(TrainingError, match="on other data"):
        finetune(base, _samples(7), tmp_path / "run", FAST)
    (tmp_path / "run" / "training" / "checkpoint-1" / "optimizer.bin").unlink()
    with pytest.raises(TrainingError, match="checkpoint-1: a damaged checkpoint"):
        finetune(base, _samples(), tmp_path / "run", FAST)


def test_the_schedules_are_transformers(base):
    cosine = TrainSettings(steps=10, warmup_updates=4)
    assert [lr_factor(i, cosine) for i in (0, 2, 4, 7, 10)] == [0.0, 0.5, 1.0, 0.5 * (1.0 + np.cos(np.pi * 0.5)), 0.0]
    assert [lr_factor(i, TrainSettings(steps=100, schedule="constant")) for i in (0, 1, 2, 3, 50)] == [0.0, 1 / 3, 2 / 3, 1.0, 1.0]  # 3% of 100


def test_the_export_speaks(base, tmp_path):
    done = finetune(base, _samples(), tmp_path / "mine", TrainSettings(**{**FAST.__dict__, "steps": 2}))
    config = json.loads((done.folder / "config.json").read_text())
    assert (config["pad_token_id"], config["eos_token_id"]) == (151643, 151645)
    engine = koe.load(done.folder, device="cpu")
    try:
        random.seed(0)
        result = engine.generate("Hello.", seed=1, num_step=2)
    finally:
        engine.close()
    assert result.audio.size > 0 and np.isfinite(result.audio).all()
    assert load_clips  # the reader is exported for the family's shell
