"""IndexTTS 1.5 end to end against upstream's `IndexTTS.infer`, bit for bit (goldens/infer15.npz:
upstream on koe's tiny random release, cloning a stereo 22.05 kHz clip, four texts after
`torch.manual_seed`). Every stage is compared (the clip's mel, the text's segments, each segment's
conditioning, codes, kept codes, latent and waveform) and the engine's audio is upstream's."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
from goldens import check_recorded, check_state, inputs, load_golden, written
from koe_indextts.engine import IndexTTSEngine
from koe_indextts.fixtures import state_sha256
from koe_indextts.model import shrink_silence

from koe.engines.base import SynthesisRequest

G = inputs("infer15")


@pytest.fixture(scope="module")
def golden():
    return load_golden("infer15")


@pytest.fixture(scope="module")
def folder(tmp_path_factory, golden):
    folder = written("infer15")
    check_recorded(golden, folder)
    return folder


@pytest.fixture(scope="module")
def engine(folder):
    return IndexTTSEngine.load(folder / "model")


@pytest.fixture(scope="module")
def voice(engine, folder):
    return engine.prepare_voice(str(folder / "prompt.wav"))


def segments_of(golden, t: int) -> int:
    return len({k.split(".")[1] for k in golden if k.startswith(f"t{t}.s")})


@pytest.mark.parametrize("t", range(len(G.TEXTS)))
def test_every_stage_matches_upstream(engine, voice, golden, t):
    model = engine.model
    assert np.array_equal(voice.mel.numpy(), golden["cond_mel"])
    segments = engine.text.segments(G.TEXTS[t], G.SEGMENT_TOKENS)
    assert len(segments) == segments_of(golden, t)
    conditioning = model.voice(voice.mel)
    sampling = engine_sampling()
    torch.manual_seed(G.SEED)
    for j, ids in enumerate(segments):
        key = f"t{t}.s{j}."
        assert np.array_equal(np.asarray(ids, np.int32)[None], golden[key + "text_ids"])
        assert np.array_equal(conditioning.latents.numpy(), golden[key + "cond_latent"])
        wav, codes = model.segment(torch.tensor(ids, dtype=torch.int32), conditioning, sampling)
        assert np.array_equal(codes.numpy()[None], golden[key + "codes_raw"])
        kept = shrink_silence(codes, model.lm.cfg.stop_mel_token)
        assert np.array_equal(kept.numpy()[None], golden[key + "codes"])
        with torch.inference_mode():
            latent = model.lm.latent(conditioning.latents, torch.tensor(ids, dtype=torch.int32), kept)
        assert np.array_equal(latent.numpy(), golden[key + "latent"])
        expected = np.clip(np.float32(32767) * golden[key + "wav"], -32767, 32767)
        assert np.array_equal(wav.numpy(), expected)


def engine_sampling():
    from koe_indextts.beam import Sampling

    return Sampling(**G.GENERATION)


@pytest.mark.filterwarnings("ignore:speech was cut off")  # a segment that reaches max_mel_tokens, as upstream warns
@pytest.mark.parametrize("t", range(len(G.TEXTS)))
def test_engine_audio_is_upstreams(engine, voice, golden, t):
    request = SynthesisRequest(text=G.TEXTS[t], voice=voice, seed=G.SEED, options={**G.GENERATION, "max_text_tokens_per_segment": G.SEGMENT_TOKENS})
    chunks = list(engine.synthesize(request))
    audio = np.concatenate([c.samples for c in chunks])
    pcm = np.concatenate([np.clip(np.float32(32767) * golden[f"t{t}.s{j}.wav"][0], -32767, 32767) for j in range(segments_of(golden, t))])
    assert np.array_equal(audio, pcm / np.float32(32767))
    int16 = np.ascontiguousarray(np.trunc(pcm).astype(np.int16)[:, None])  # upstream's own int16 of that wave
    assert hashlib.sha256(int16.tobytes()).hexdigest() == str(golden[f"t{t}.wav_sha256"])
    assert chunks[-1].metadata["model"] == "IndexTTS-1.5"


def test_only_the_search_draws(golden):
    """Upstream's only draws from torch's generator are the search's multinomials, as koe's."""
    for t in range(len(G.TEXTS)):
        ops = {str(d).split()[0] for d in golden[f"t{t}.draws"]}
        assert ops == {"multinomial"}, ops


def test_fixture_weights_hash(folder, golden):
    gpt = torch.load(folder / "model" / "gpt.pth", weights_only=True)
    check_state(golden, state_sha256(gpt), name="gpt")
    job = json.loads((folder / "job.json").read_text())
    assert job["seed"] == G.SEED and int(golden["seed"]) == G.SEED
