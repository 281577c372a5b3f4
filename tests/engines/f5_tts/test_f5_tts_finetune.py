"""F5-TTS fine-tuning's refusals and bookkeeping, without upstream: bad settings (every problem at
once, nothing written), a folder that is no F5-TTS model, the EMA counters a checkpoint carries (a
release has them; without them the EMA starts new), the export a run leaves (a model folder koe
loads, the run's checkpoints beside it), and a stopped run resumed: the uninterrupted run's
weights, mid-epoch or at an epoch's end; a damaged checkpoint, other settings or other data refused;
gradient checkpointing (less memory) gives the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import load_file, save_file

import koe
from koe.engines.base import TrainingError
from koe.engines.f5_tts.finetune.data import Clip
from koe.engines.f5_tts.finetune.run import EXPORT_NAME, ema_counters, finetune
from koe.engines.f5_tts.finetune.trainer import TrainSettings
from koe.engines.f5_tts.fixtures import write_random_model


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("f5"), "F5TTS_v1_Base")


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[Clip]:
    folder = tmp_path_factory.mktemp("clips")
    rng = np.random.default_rng(1)
    found = []
    for i, text in enumerate(["One clip.", "两个。", "Three clips here."]):
        path = folder / f"c{i}.wav"
        sf.write(path, (0.1 * rng.standard_normal(int(24000 * (0.5 + 0.3 * i)))).astype(np.float32), 24000, subtype="PCM_16")
        found.append(Clip(path, text))
    return found


def test_bad_settings_are_listed_at_once_and_nothing_is_written(base, clips, tmp_path):
    bad = TrainSettings(epochs=0, lr=-1.0, frames_per_batch=0, grad_accum=0)
    with pytest.raises(TrainingError) as refused:
        finetune(base, clips, tmp_path / "out", bad)
    for name in ("epochs", "lr", "frames_per_batch", "grad_accum"):
        assert name in refused.value.message
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_no_f5_model_is_refused(clips, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainingError, match="not an F5-TTS model folder"):
        finetune(tmp_path / "empty", clips, tmp_path / "out")


def test_the_ema_counters_come_from_the_checkpoint(base, tmp_path):
    (checkpoint,) = base.glob("model_*.safetensors")
    assert ema_counters(checkpoint) == (True, 1250000)  # as the release carries them
    state = {k: v for k, v in load_file(checkpoint).items() if k not in ("initted", "step")}
    save_file(state, str(tmp_path / "model_1.safetensors"))
    assert ema_counters(tmp_path / "model_1.safetensors") == (False, 0)


def test_a_run_leaves_a_model_folder_koe_loads_and_its_checkpoints(base, clips, tmp_path):
    out = tmp_path / "mine"
    settings = TrainSettings(epochs=2, lr=1e-3, warmup_updates=1, frames_per_batch=120, max_clips=2, save_every=2, last_every=1)
    done = finetune(base, clips, out, settings)
    assert done.folder == out and done.updates > 0
    assert sorted(p.name for p in (out / "training").iterdir()) == sorted({"model_last.pt", *(f"model_{u}.pt" for u in range(2, done.updates + 1, 2))})
    exported = load_file(out / EXPORT_NAME)
    last = torch.load(out / "training" / "model_last.pt", weights_only=True)["ema_model_state_dict"]
    assert set(exported) == set(last) and all(torch.equal(exported[k], last[k]) for k in last)
    assert int(exported["step"]) == 1250000 + done.updates and bool(exported["initted"])
    engine = koe.load(out, device="cpu")
    try:
        assert engine.generate("Hello.", voice=engine.prepare_voice(str(clips[2].audio), ref_text="Three clips here."), seed=1, nfe_step=4).audio.size
    finally:
        engine.close()


RESUMABLE = TrainSettings(epochs=3, lr=1e-3, warmup_updates=2, frames_per_batch=120, max_clips=1, save_every=100, last_every=100, seed=4)


def _states(folder):
    last = torch.load(folder / "training" / "model_last.pt", weights_only=True)
    return {part: last[part] for part in ("model_state_dict", "ema_model_state_dict")}, last["optimizer_state_dict"]["state"], last["update"]


def _equal(a, b) -> bool:
    (sa, oa, ua), (sb, ob, ub) = a, b
    same_weights = all(torch.equal(sa[p][k], sb[p][k]) for p in sa for k in sa[p])
    same_optimizer = all(torch.equal(oa[i][k], ob[i][k]) for i in oa for k in oa[i])
    return ua == ub and same_weights and same_optimizer


@pytest.fixture(scope="module")
def uninterrupted(base, clips, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "run"
    losses = []
    finetune(base, clips, out, RESUMABLE, on_step=lambda r: losses.append(r.loss))
    return _states(out), losses


@pytest.mark.parametrize("stop_at", [4, 3], ids=["mid-epoch", "epoch-end"])  # 3 batches an epoch: update 3 ends epoch 0
def test_a_stopped_run_resumed_gives_the_uninterrupted_weights(base, clips, uninterrupted, tmp_path, stop_at):
    whole, whole_losses = uninterrupted
    out = tmp_path / "run"
    losses = []
    first = finetune(base, clips, out, RESUMABLE, on_step=lambda r: losses.append(r.loss), should_stop=lambda: len(losses) >= stop_at)
    assert first.updates == stop_at
    done = finetune(base, clips, out, RESUMABLE, on_step=lambda r: losses.append(r.loss))
    assert done.updates == whole[2] and losses == whole_losses
    assert _equal(_states(out), whole)
    again = finetune(base, clips, out, RESUMABLE)  # finished: exported again, nothing trained
    assert again.updates == done.updates and _equal(_states(out), whole)


def test_a_damaged_checkpoint_or_other_settings_or_data_are_refused(base, clips, tmp_path):
    out = tmp_path / "run"
    finetune(base, clips, out, RESUMABLE, should_stop=lambda: True)
    with pytest.raises(TrainingError, match="made with other settings \\(lr, seed\\)"):
        finetune(base, clips, out, TrainSettings(**{**RESUMABLE.__dict__, "lr": 2e-3, "seed": 5}))
    with pytest.raises(TrainingError, match="made on other data"):
        finetune(base, clips[:2], out, RESUMABLE)
    last = out / "training" / "model_last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # torn, as by a crash mid-write without koe's rename
    with pytest.raises(TrainingError, match="model_last.pt: a damaged checkpoint"):
        finetune(base, clips, out, RESUMABLE)


def test_gradient_checkpointing_keeps_the_bits(base, clips, uninterrupted, tmp_path):
    whole, whole_losses = uninterrupted
    out = tmp_path / "low-memory"
    losses = []
    finetune(base, clips, out, TrainSettings(**{**RESUMABLE.__dict__, "gradient_checkpointing": True}), on_step=lambda r: losses.append(r.loss))
    assert losses == whole_losses and _equal(_states(out), whole)
