"""OmniVoice fine-tuning against upstream omnivoice==0.2.1's own trainer (`omnivoice.cli.train`'s
path: `build_model_and_tokenizer`, `build_dataloaders` on the padded SDPA path, `OmniTrainer.train`;
tests/oracle_omnivoice/finetune.py), bit for bit on the CPU in float32 on a tiny random model and
a dozen clips' tokens in upstream's shards: every batch (the sample processor's draws in the
data-loader workers, the length-grouped batches, the workers taking turns, epochs starting again),
every update's loss, gradient norm and learning rate (a warm-up from 0, cosine and constant
schedules, accumulation across an epoch's end, clipping that bites, a partial batch), the final
weights, AdamW's state, the scheduler's state and the checkpoints written. Upstream loads the
export with no missing or unexpected keys. A clip's audio tokens are what upstream's
`extract_audio_tokens.py` stores for it (tests/oracle_omnivoice/extract.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import load_file

from koe.engines.omnivoice.audio_tokenizer import load_audio_tokenizer
from koe.engines.omnivoice.config import read_config
from koe.engines.omnivoice.finetune.data import Clip, prepare_samples
from koe.engines.omnivoice.finetune.pipeline import Grouping, ProcessorSettings, base_seed, collate, epoch_batches
from koe.engines.omnivoice.finetune.run import finetune, special_ids
from koe.engines.omnivoice.finetune.shards import Sample, read_shard, write_dataset
from koe.engines.omnivoice.finetune.trainer import TrainSettings, run
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.omnivoice.model import OmniVoiceLM
from koe.engines.omnivoice.text import TextTokenizer
from koe.runtime.weights import build_from_weights

pytestmark = pytest.mark.oracle

FIELDS = ("input_ids", "labels", "audio_mask", "position_ids", "attention_mask")
TEXTS = ["Hello there.", "你好，世界。", "A longer sentence to speak.", "Short.", "我们今天去公园。", "Mixed 中文 and English.",
         "One more.", "The quick brown fox.", "Bonjour.", "Yes.", "How are you today?", "Fine."]  # fmt: skip
RUNS = {  # id: (koe's settings, shards in the data (None: one per worker, as koe writes them))
    "accumulated": (TrainSettings(steps=6, lr=1e-3, warmup_updates=2, batch_tokens=200, min_sample_tokens=10, grad_accum=2, max_grad_norm=0.35, save_every=3, seed=7, workers=1), None),
    "two_workers": (
        TrainSettings(steps=5, lr=2e-3, weight_decay=0.1, warmup_updates=3, schedule="constant", batch_tokens=260, max_clips=2, min_sample_tokens=10, grad_accum=3,
                      max_grad_norm=1.0, save_every=2, seed=3, workers=2),
        None,
    ),
    "three_shards": (TrainSettings(steps=3, lr=1e-3, batch_tokens=230, min_sample_tokens=10, max_sample_tokens=140, seed=11, workers=2, save_every=100), 3),
}  # fmt: skip


def samples() -> list[Sample]:
    rng = np.random.default_rng(0)
    found = []
    for i, text in enumerate(TEXTS):
        n = 20 + 7 * i
        label = {"text": text, "audio_duration": n / 25, "num_tokens": n}
        if i % 3 == 0:
            label["language_id"] = "en" if i % 2 == 0 else "zh"
        if i % 4 == 1:
            label["instruct"] = "female, whisper"
        if i == 4:
            label["text_pinyin"] = "wo3 men5 jin1 tian1 qu4 gong1 yuan2"
        found.append(Sample(f"utt{i:06d}", rng.integers(0, 1024, (8, n)).astype(np.int16), label))
    return found


def upstream_config(s: TrainSettings) -> dict:
    return {
        "steps": s.steps, "learning_rate": s.lr, "weight_decay": s.weight_decay, **({"warmup_type": "ratio"} if s.warmup_updates is None else {"warmup_type": "steps", "warmup_steps": s.warmup_updates}),
        "lr_scheduler_type": s.schedule, "batch_tokens": s.batch_tokens, "max_batch_size": s.max_clips, "min_sample_tokens": s.min_sample_tokens,
        "max_sample_tokens": s.max_sample_tokens, "gradient_accumulation_steps": s.grad_accum, "max_grad_norm": s.max_grad_norm, "save_steps": s.save_every,
        "seed": s.seed, "num_workers": s.workers, "mixed_precision": "no", "allow_tf32": False, "attn_implementation": "sdpa", "logging_steps": 1000,
    }  # fmt: skip


_RUNS: dict[str, tuple] = {}


def _run(run_id: str, factory) -> tuple:
    """(upstream's tensors, its info, koe's step reports, koe's result, the base folder, the shards) of a run, made once."""
    if run_id not in _RUNS:
        settings, count = RUNS[run_id]
        base = _RUNS.get("base") or write_random_model(factory.mktemp("base"))
        _RUNS["base"] = base
        pairs = write_dataset(factory.mktemp("data"), samples(), count or settings.workers)
        job = {"model": str(base), "shards": [[str(t), str(j)] for t, j in pairs], "config": upstream_config(settings)}
        upstream, info = run_oracle("finetune", job, factory.mktemp("oracle"), family="omnivoice", keep=("loss", "grad_norm", "lr"))
        reports: list = []
        done = None
        if count is None:  # koe's own run: its shards, one per worker
            done = finetune(base, samples(), factory.mktemp("run") / "finetuned", settings, on_step=reports.append)
        else:  # upstream's shards as they are: koe's trainer on them
            cfg, text = read_config(base), TextTokenizer.from_folder(base)
            net = build_from_weights(lambda: OmniVoiceLM(cfg), [base / "model.safetensors"])
            shards = [read_shard(t, j) for t, j in pairs]
            run(net, shards, factory.mktemp("run"), settings, tokenize=text.ids, pad_id=special_ids(base)["pad_token_id"], on_step=reports.append)
        _RUNS[run_id] = (upstream, info, reports, done, base, pairs)
    return _RUNS[run_id]


@pytest.fixture(scope="module", params=list(RUNS))
def compared(request, tmp_path_factory):
    return (request.param, *_run(request.param, tmp_path_factory))


@pytest.fixture(scope="module", params=[r for r in RUNS if RUNS[r][1] is None])
def finetuned(request, tmp_path_factory):
    return (request.param, *_run(request.param, tmp_path_factory))


@pytest.mark.parametrize("run_id", list(RUNS))
def test_every_batch_is_upstreams(run_id, tmp_path_factory):
    upstream, info, _, _, base, pairs = _run(run_id, tmp_path_factory)
    settings = RUNS[run_id][0]
    shards = [read_shard(t, j) for t, j in pairs]
    text, pad = TextTokenizer.from_folder(base), special_ids(base)["pad_token_id"]
    grouping = Grouping(settings.batch_tokens, settings.min_sample_tokens, settings.max_sample_tokens, settings.max_clips)
    loader = torch.Generator().manual_seed(settings.seed)
    made: list = []
    for epoch in range(info["epochs"] + 1):  # each epoch's loader draws its workers' base seed
        made += epoch_batches(shards, epoch, base_seed(loader), settings.workers, text.ids, ProcessorSettings(), grouping)
    assert len(made) >= info["batches"]
    for i in range(info["batches"]):
        batch = collate(made[i], pad)
        for name in FIELDS:
            assert same(getattr(batch, name), upstream[f"batch.{i}.{name}"]), (i, name)
    sizes = [upstream[f"batch.{i}.input_ids"].shape[0] for i in range(info["batches"])]
    if run_id == "accumulated":  # a bucket's rest at an epoch's end: a partial batch
        assert min(sizes) == 1 < max(sizes)
    if run_id == "two_workers":  # max_clips closes a bucket
        assert max(sizes) == settings.max_clips


def test_every_update_has_upstreams_loss_gradient_norm_and_rate(compared):
    run_id, upstream, info, reports, done, *_ = compared
    settings = RUNS[run_id][0]
    assert [r.loss for r in reports] == upstream["loss"].tolist()
    assert [r.grad_norm for r in reports if r.grad_norm is not None] == upstream["grad_norm"].tolist()
    assert [i for i, r in enumerate(reports) if r.grad_norm is not None] == info["updates_at"]
    assert [r.lr for r in reports if r.grad_norm is not None] == upstream["lr"].tolist()
    assert info["steps"] == settings.steps == reports[-1].optimizer_steps
    assert upstream["lr"][0] == 0.0 or not settings.warmup_updates  # the warm-up starts from 0
    if run_id == "accumulated":  # clipping bites; accumulation groups run across an epoch's end
        assert max(upstream["grad_norm"].tolist()) > settings.max_grad_norm
        assert info["epochs"] >= 1 and len(reports) == settings.steps * settings.grad_accum
    if run_id == "three_shards":  # the default warm-up: 3% of the steps, rounded up (1)
        assert upstream["lr"].tolist()[:2] == [0.0, settings.lr]


def test_the_checkpoints_are_upstreams(finetuned):
    run_id, upstream, info, _, done, *_ = finetuned
    training = done.folder / "training"
    written = {p.name: sorted(f.name for f in p.iterdir()) for p in training.iterdir() if p.name.startswith("checkpoint-")}
    assert sorted(written) == sorted(info["checkpoints"])
    for name, files in info["checkpoints"].items():  # koe's resume state in place of accelerate's RNG pickle
        assert written[name] == sorted({*files} - {"random_states_0.pkl"} | {"koe_state.pt"}), name
    last = training / f"checkpoint-{info['steps']}"
    weights = load_file(str(last / "model.safetensors"))
    assert {f"model.{k}" for k in weights} == {k for k in upstream if k.startswith("model.")}
    for name, tensor in weights.items():
        assert same(tensor, upstream[f"model.{name}"]), name
    optimizer = torch.load(last / "optimizer.bin", weights_only=True)
    assert {f"optimizer.{i}.{k}" for i, s in optimizer["state"].items() for k in s} == {k for k in upstream if k.startswith("optimizer.")}
    for index, state in optimizer["state"].items():
        for key, tensor in state.items():
            assert same(tensor, upstream[f"optimizer.{index}.{key}"]), (index, key)
    groups = [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items() if k != "params"} for g in optimizer["param_groups"]]
    assert groups == info["param_groups"]
    scheduler = torch.load(last / "scheduler.bin", weights_only=True)
    assert {k: scheduler[k] for k in info["scheduler"]} == info["scheduler"]
    exported = load_file(str(done.folder / "model.safetensors"))
    assert all(torch.equal(exported[k], weights[k]) for k in weights) and set(exported) == set(weights)


def test_koe_wrote_the_shards_upstream_trained_on(finetuned):
    run_id, *_, done, _, pairs = finetuned
    for tar, jsonl in pairs:
        ours = done.folder / "training" / "data" / "shards"
        assert (ours / Path(tar).name).read_bytes() == Path(tar).read_bytes()
        assert (ours / Path(jsonl).name).read_bytes() == Path(jsonl).read_bytes()


def test_upstream_loads_the_export_strictly(tmp_path_factory, tmp_path):
    *_, done, _, _ = _run("accumulated", tmp_path_factory)
    folder = tmp_path / "export"  # the loadable files only (the run's folder is no input of the key)
    folder.mkdir()
    for p in done.folder.iterdir():
        if p.name != "training":
            (shutil.copytree if p.is_dir() else shutil.copy2)(p, folder / p.name)
    _, info = run_oracle("load_check", {"model": str(folder)}, tmp_path / "oracle", family="omnivoice")
    assert info["keys"]["missing"] == [] and info["keys"]["unexpected"] == [] and info["keys"]["checked"] > 0


def test_the_audio_tokens_are_upstreams_extraction(tmp_path_factory, tmp_path):
    base = _RUNS.get("base") or write_random_model(tmp_path_factory.mktemp("base"))
    _RUNS["base"] = base
    rng = np.random.default_rng(0)
    clips = []
    for i, (rate, stereo, seconds) in enumerate([(24000, False, 0.83), (16000, True, 0.61), (44100, False, 1.05), (24000, False, 0.8)]):
        n = int(rate * seconds)  # lengths that are not whole frames, but the last
        x = 0.2 * np.sin(2 * np.pi * (150 + 20 * i) * np.arange(n) / rate) + 0.02 * rng.standard_normal(n)
        path = tmp_path / f"clip{i}.wav"
        sf.write(path, np.stack([x, 0.5 * x], axis=-1) if stereo else x, rate, subtype="PCM_16")
        clips.append(path)
    upstream, _ = run_oracle("extract", {"model": str(base), "clips": [str(p) for p in clips]}, tmp_path / "oracle", family="omnivoice")
    found = prepare_samples([Clip(p, "text") for p in clips], load_audio_tokenizer(base), 2000)
    for i, sample in enumerate(found):
        assert same(torch.from_numpy(sample.tokens), upstream[f"clip{i}"]), i
