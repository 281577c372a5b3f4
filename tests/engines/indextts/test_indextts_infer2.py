"""IndexTTS 2 end to end against upstream's `IndexTTS2.infer`, bit for bit (goldens/infer2.npz:
upstream on koe's tiny random release 2, five jobs after `torch.manual_seed`, each as upstream's first
call with its clips): the clips' w2v-BERT features, CAM++ style and mel, each segment's codes,
latent, flow-matching mel and waveform, the joined int16 audio, and the draws."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from goldens import check_state, inputs, load_golden, release_digests, written
from koe_indextts.beam import Sampling
from koe_indextts.model2 import Emotion, IndexTTS2
from koe_indextts.text import TextNormalizer, read_glossary
from koe_indextts.text_tokenizer import TextTokenizer

HERE = Path(__file__).resolve().parent


G = inputs("infer2")


@pytest.fixture(scope="module")
def golden():
    return load_golden("infer2")


@pytest.fixture(scope="module")
def folder(golden):
    folder = written("infer2")
    for name, digest in release_digests("2").items():
        check_state(golden, digest, name=name.replace("/", ":"))
    return folder


@pytest.fixture(scope="module")
def model(folder):
    return IndexTTS2.load(folder / "model")


@pytest.fixture(scope="module")
def tokenizer(folder):
    return TextTokenizer(folder / "model" / "bpe.model", TextNormalizer(read_glossary(folder / "model" / "glossary.yaml")))


def same(golden, name: str, value: torch.Tensor) -> bool:
    array = np.ascontiguousarray(value.numpy())
    if name + ".sha256" in golden:
        return tuple(golden[name + ".shape"]) == array.shape and hashlib.sha256(array.tobytes()).hexdigest() == str(golden[name + ".sha256"])
    return np.array_equal(array, golden[name])


def emotion_of(model: IndexTTS2, folder: Path, job: dict) -> Emotion:
    """What upstream's infer makes of a job's emotion arguments."""
    vector = job.get("emo_vector")
    alpha = float(job.get("emo_alpha", 1.0))
    if vector is not None:
        scale = max(0.0, min(1.0, alpha))
        if scale != 1.0:
            vector = [int(x * scale * 10000) / 10000 for x in vector]
        return Emotion(model.emotion_features(folder / "speaker.wav"), 1.0, tuple(vector))
    if "emo_audio_prompt" in job:
        return Emotion(model.emotion_features(folder / job["emo_audio_prompt"]), alpha)
    return Emotion(model.emotion_features(folder / "speaker.wav"), 1.0)


@pytest.mark.parametrize("i", range(len(G.JOBS)))
def test_every_stage_matches_upstream(model, tokenizer, folder, golden, i):
    job = G.JOBS[i]
    speaker = model.speaker(folder / "speaker.wav")
    emotion = emotion_of(model, folder, job)
    key = f"j{i}."
    assert same(golden, key + "spk_cond", speaker.features)
    assert same(golden, key + "emo_cond", emotion.features)
    assert same(golden, key + "style", speaker.style)
    assert same(golden, key + "ref_mel", speaker.mel)
    sampling = Sampling(temperature=0.8, **G.GENERATION)
    segments = tokenizer.segments(job["text"], G.SEGMENT_TOKENS)
    torch.manual_seed(job["seed"])
    model.layer_drop_draws()
    emovec = model.emotion_vector(speaker, emotion)
    waves = []
    for k, ids in enumerate(segments):
        wav, codes = model.segment(torch.tensor(ids, dtype=torch.int32), speaker, emovec, sampling)
        assert same(golden, f"{key}s{k}.codes", codes[None]), k
        waves.append(wav)
    assert f"{key}s{len(segments)}.codes" not in golden
    gap = torch.zeros(1, int(22050 * job.get("interval_silence", 200) / 1000.0))
    joined = torch.cat([w for k, wav in enumerate(waves) for w in ([wav, gap] if k < len(waves) - 1 else [wav])], dim=1)
    int16 = np.ascontiguousarray(joined.type(torch.int16).numpy().T)
    assert hashlib.sha256(int16.tobytes()).hexdigest() == str(golden[key + "wav_sha256"])


def test_the_lm_runs_on_the_exact_kernel_where_it_applies(model):
    """The goldens above ran the LM's products on koe's exact CPU kernel where it gives torch's bits
    here (koe.runtime.exact), else on torch's: each GPT layer and the heads, one or the other whole."""
    from koe_indextts.gpt import Conv1D

    from koe.runtime import exact

    layers = [m for m in model.lm.modules() if isinstance(m, (exact.ExactLinear, Conv1D, torch.nn.Linear))]
    kernel = [m for m in layers if isinstance(m, exact.ExactLinear)]
    assert len(layers) >= 4 * len(model.lm.gpt.h) + 2  # each block's four, the two heads, the emotion layers
    assert len(kernel) == (len(layers) if exact.summation_orders() is not None else 0)


def test_upstreams_draws_are_koes(golden, model):
    """w2v-BERT's LayerDrop draws (two clips × its layers), then only the searches' and flow matching's."""
    for i in range(len(G.JOBS)):
        ops = [str(d).split()[0] for d in golden[f"j{i}.draws"]]
        layers = 2 * model.w2v_layers
        assert ops[:layers] == ["rand"] * layers
        assert set(ops[layers:]) == {"multinomial", "randn"}


ENGINE_JOBS = [0, 1, 2, 3, 4]  # every job: job 1's emotion clip is the request's emotion reference (SynthesisRequest.emotion)


@pytest.fixture(scope="module")
def engine(folder):
    from koe_indextts.engine import IndexTTSEngine

    return IndexTTSEngine.load(folder / "model")


@pytest.mark.filterwarnings("ignore:speech was cut off")  # a segment that reaches max_mel_tokens, as upstream warns
@pytest.mark.parametrize("i", ENGINE_JOBS)
def test_engine_audio_is_upstreams(engine, folder, golden, i):
    from koe_indextts.spec import EMOTION_OPTIONS

    from koe.engines.base import SynthesisRequest

    job = G.JOBS[i]
    options = {**G.GENERATION, "max_text_tokens_per_segment": G.SEGMENT_TOKENS}
    if "emo_vector" in job:
        options |= {name: value for name, value in zip(EMOTION_OPTIONS, job["emo_vector"], strict=True) if value}
        options["emo_alpha"] = job.get("emo_alpha", 1.0)
    if "interval_silence" in job:
        options["interval_silence"] = job["interval_silence"]
    emotion = None
    if "emo_audio_prompt" in job:
        emotion = engine.prepare_voice(str(folder / job["emo_audio_prompt"]))
        options["emo_alpha"] = job["emo_alpha"]
    voice = engine.prepare_voice(str(folder / "speaker.wav"))
    chunks = list(engine.synthesize(SynthesisRequest(text=job["text"], voice=voice, seed=job["seed"], options=options, emotion=emotion)))
    audio = np.concatenate([c.samples for c in chunks])
    pcm = torch.from_numpy(audio) * 32767  # the engine's samples are upstream's wave / 32767: scaling back is exact to the int16 cut
    int16 = np.ascontiguousarray(pcm.type(torch.int16).numpy()[:, None])
    assert hashlib.sha256(int16.tobytes()).hexdigest() == str(golden[f"j{i}.wav_sha256"])
    assert chunks[-1].sample_rate == 22050 and chunks[-1].metadata["model"] == "IndexTTS-2"
