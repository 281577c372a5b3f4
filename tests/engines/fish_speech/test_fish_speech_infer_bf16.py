"""Fish Speech S2 in bfloat16 against upstream's server engine in bfloat16, bit for bit
(goldens/infer_bf16.npz: `TTSInferenceEngine` as `ModelManager(half=False)` builds it on a CPU, the
transformer in bfloat16 and its float32 codec decoding under bfloat16 autocast): the reference clips'
codes, every batch's codes and the final audio of three requests (a clone, the model's own voice,
a dialogue of two speakers in two batches), koe loaded with precision="bf16"."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fish_goldens import array_sha256, check_recorded, check_state, inputs, load_golden, written
from koe_fish_speech.engine import FishSpeechEngine
from koe_fish_speech.fixtures_codec import random_codec_state
from koe_fish_speech.fixtures_lm import lm_config_json, lm_state
from koe_fish_speech.prompt import text_batches
from koe_fish_speech.voice import FishSpeechVoice

from koe.engines.base import SynthesisRequest
from koe.runtime.weights import files_sha256

G = inputs("infer_bf16")
JOBS = {job["name"]: job for job in G.JOBS}
EDGE = 256


@pytest.fixture(scope="module")
def golden():
    return load_golden("infer_bf16")


@pytest.fixture(scope="module")
def folder(tmp_path_factory, golden):
    folder = written(tmp_path_factory, "infer_bf16")
    check_recorded(golden, folder)
    return folder


@pytest.fixture(scope="module")
def engine(folder):
    torch.set_num_threads(1)
    return FishSpeechEngine.load(folder, precision="bf16")


@pytest.fixture(scope="module")
def voices(engine, folder):
    return {name: engine.prepare_voice(str(folder / f"{name}.wav"), G.TRANSCRIPTS[name]) for name in G.CLIPS}


def voice_of(voices: dict, job: dict) -> FishSpeechVoice | None:
    refs = [voices[r] for r in job["references"]]
    return FishSpeechVoice.joined(*refs) if refs else None


def test_fixture_is_the_goldens(golden, folder):
    check_state(golden, lm_state(lm_config_json("tiny"), G.SEED), name="lm")
    check_state(golden, random_codec_state("tiny", G.SEED), name="codec")
    check_state(golden, files_sha256([folder / "tokenizer.json", folder / "tokenizer_config.json"]), name="tokenizer")


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
    assert audio.shape == tuple(golden[f"{name}.audio_shape"])
    assert np.array_equal(audio[:EDGE], golden[f"{name}.audio_head"])
    assert np.array_equal(audio[-EDGE:], golden[f"{name}.audio_tail"])
    assert array_sha256(audio) == str(golden[f"{name}.audio_sha256"])
    assert chunks[-1].metadata["precision"] == "bfloat16"
