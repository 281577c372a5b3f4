"""F5-TTS fine-tuning's refusals and bookkeeping, without upstream: bad settings (every problem at
once, nothing written), a folder that is no F5-TTS model, the EMA counters a checkpoint carries (a
release has them; without them the EMA starts new), and the export a run leaves (a model folder
koe loads, the run's checkpoints beside it)."""

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
