"""Fish Speech S2 end to end against upstream's server engine, bit for bit (goldens/infer.npz:
`TTSInferenceEngine.inference(ServeTTSRequest(...))` on koe's tiny random release, in float32):
the reference clip's codes, every batch's codes and the final audio of five requests (a clone from a
44.1 kHz clip at the server's defaults, a clone from a 24 kHz stereo clip with other settings, the
model's own voice, two speakers in one text, a dialogue over several batches with the iterative
prompt), each koe request with the same text, clip, transcript, seed and settings."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from fish_goldens import array_sha256, check_state, fixtures, inputs
from koe_fish_speech.engine import FishSpeechEngine
from koe_fish_speech.prompt import text_batches

from koe.engines.base import SynthesisRequest

G = inputs("infer")
JOBS = {job["name"]: job for job in G.JOBS}
EDGE, voice_of = G.EDGE, G.voice_of


golden, folder = fixtures("infer")


@pytest.fixture(scope="module")
def engine(folder):
    torch.set_num_threads(1)
    return FishSpeechEngine.load(folder)


@pytest.fixture(scope="module")
def voices(engine, folder):
    return {name: engine.prepare_voice(str(folder / f"{name}.wav"), G.TRANSCRIPTS[name]) for name in G.CLIPS}


def test_fixture_is_the_goldens(golden, folder):
    G.check_fixture(golden, folder, check_state)


@pytest.mark.parametrize("name", JOBS)
def test_request_is_upstreams(engine, voices, golden, name):
    job = JOBS[name]
    voice = voice_of(voices, job)
    for i, ref in enumerate(job["references"]):
        assert np.array_equal(voices[ref].clips[0].codes.numpy(), golden[f"{name}.reference{i}.codes"])
    request = SynthesisRequest(text=job["text"], voice=voice, seed=job["seed"], options=job["options"])
    chunks = list(engine.synthesize(request))
    batches = int(golden[f"{name}.batches"])
    assert len(text_batches(job["text"], job["options"].get("chunk_length", 200))) == batches
    audio = np.concatenate([c.samples for c in chunks]).astype(np.float32)
    G.assert_audio(golden, name, audio)
    assert chunks[-1].metadata["model"] == "s2-pro"


@pytest.mark.parametrize("name", JOBS)
def test_batches_codes_are_upstreams(engine, voices, golden, name):
    """Each batch's codes, the ones upstream decodes: the engine's generation after the request's seed."""
    job = JOBS[name]
    voice = voice_of(voices, job)
    settings = engine.check_request(SynthesisRequest(text=job["text"], voice=voice, options=job["options"])).settings
    torch.manual_seed(job["seed"])
    codes = list(engine.batch_codes(job["text"], voice, settings))
    assert len(codes) == int(golden[f"{name}.batches"])
    for i, c in enumerate(codes):
        assert np.array_equal(c.numpy(), golden[f"{name}.batch{i}.codes"]), f"batch {i}"


@pytest.mark.parametrize("name", ["clone44k", "long_dialogue"])
def test_streamed_requests_are_upstreams_or_named_as_frames(engine, voices, golden, name):
    """Streamed, a request yields a chunk per batch with the one-shot's bits (upstream's server
    streams so); with `stream_frames` its frames are decoded as they come, in chunks of `chunk_s`,
    within float32 rounding of upstream's audio, and the chunks say so."""
    job = JOBS[name]
    request = SynthesisRequest(text=job["text"], voice=voice_of(voices, job), seed=job["seed"], options=job["options"], stream=True)
    chunks = list(engine.synthesize(request))
    audio = np.concatenate([c.samples for c in chunks]).astype(np.float32)
    assert array_sha256(audio) == str(golden[f"{name}.audio_sha256"])
    assert len([c for c in chunks if c.samples.size]) == len([i for i in range(int(golden[f"{name}.batches"])) if golden[f"{name}.batch{i}.codes"].size])
    framed = replace(request, options={**job["options"], "stream_frames": True}, first_chunk_s=0.1, chunk_s=0.2)
    chunks = list(engine.synthesize(framed))
    audio = np.concatenate([c.samples for c in chunks]).astype(np.float32)
    assert audio.shape == tuple(golden[f"{name}.audio_shape"])
    np.testing.assert_allclose(audio[:EDGE], golden[f"{name}.audio_head"], atol=1e-5)
    assert len(chunks) > int(golden[f"{name}.batches"]) + 1
    assert all(c.metadata.get("stream") == "frames" for c in chunks if c.samples.size)
