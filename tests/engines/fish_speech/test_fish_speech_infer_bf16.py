"""Fish Speech S2 in bfloat16 against upstream's server engine in bfloat16, bit for bit
(goldens/infer_bf16.npz: `TTSInferenceEngine` as `ModelManager(half=False)` builds it on a CPU, the
transformer in bfloat16 and its float32 codec decoding under bfloat16 autocast): the reference clips'
codes, every batch's codes and the final audio of three requests (a clone, the model's own voice,
a dialogue of two speakers in two batches), koe loaded with precision="bf16"."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fish_goldens import check_state, fixtures, inputs
from koe_fish_speech.engine import FishSpeechEngine
from koe_fish_speech.prompt import text_batches

from koe.engines.base import SynthesisRequest

G = inputs("infer_bf16")
JOBS = {job["name"]: job for job in G.JOBS}
voice_of = G.infer.voice_of


golden, folder = fixtures("infer_bf16")


@pytest.fixture(scope="module")
def engine(folder):
    torch.set_num_threads(1)
    return FishSpeechEngine.load(folder, precision="bf16")


@pytest.fixture(scope="module")
def voices(engine, folder):
    return {name: engine.prepare_voice(str(folder / f"{name}.wav"), G.TRANSCRIPTS[name]) for name in G.CLIPS}


def test_fixture_is_the_goldens(golden, folder):
    G.infer.check_fixture(golden, folder, check_state)


def test_loaded_as_upstreams_server(engine):
    assert engine.lm.dtype == torch.bfloat16 and engine.codec.dtype == torch.float32
    assert engine.codec.decode_autocast == torch.bfloat16
    assert engine.result_metadata()["precision"] == "bfloat16"


@pytest.mark.parametrize("name", JOBS)
def test_request_is_upstreams(engine, voices, golden, name):
    job = JOBS[name]
    voice = voice_of(voices, job)
    for i, ref in enumerate(job["references"]):
        assert np.array_equal(voices[ref].clips[0].codes.numpy(), golden[f"{name}.reference{i}.codes"])
    settings = engine.check_request(SynthesisRequest(text=job["text"], voice=voice, options=job["options"])).settings
    torch.manual_seed(job["seed"])
    codes = list(engine.batch_codes(job["text"], voice, settings))
    assert len(codes) == int(golden[f"{name}.batches"]) == len(text_batches(job["text"], job["options"].get("chunk_length", 200)))
    for i, c in enumerate(codes):
        assert np.array_equal(c.numpy(), golden[f"{name}.batch{i}.codes"]), f"batch {i}"
    chunks = list(engine.synthesize(SynthesisRequest(text=job["text"], voice=voice, seed=job["seed"], options=job["options"])))
    audio = np.concatenate([c.samples for c in chunks]).astype(np.float32)
    G.infer.assert_audio(golden, name, audio)
    assert chunks[-1].metadata["precision"] == "bfloat16"
