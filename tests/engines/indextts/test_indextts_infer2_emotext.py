"""IndexTTS 2 with the emotion read from a text, end to end against upstream's `IndexTTS2.infer(...,
use_emo_text=True)`, bit for bit (goldens/infer2_emotext.npz: upstream on koe's tiny random release 2
with a tiny emotion LM, four jobs after `torch.manual_seed`): the emotion LM's ids and weights, each
segment's codes and the int16 audio, which hold only if koe draws in upstream's order (the emotion
LM's sampling, then w2v-BERT's LayerDrop, the search and flow matching); an answer upstream cannot
parse is a request error."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from goldens import check_recorded, inputs, load_golden, written

from koe.engines.base import RequestError, SynthesisRequest

G = inputs("infer2_emotext")


@pytest.fixture(scope="module")
def golden():
    return load_golden("infer2_emotext")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return written("infer2_emotext")


@pytest.fixture(scope="module")
def engine(folder):
    from koe_indextts.engine import IndexTTSEngine

    return IndexTTSEngine.load(folder / "model")


def test_fixture_is_the_goldens(golden, folder):
    check_recorded(golden, folder)


def request(engine, folder, job: dict) -> SynthesisRequest:
    """The job as a koe request: upstream's emo_text as the instructions, the text itself by the option."""
    options = {**G._infer2().GENERATION, "max_text_tokens_per_segment": G._infer2().SEGMENT_TOKENS}
    if "emo_alpha" in job:
        options["emo_alpha"] = job["emo_alpha"]
    if job.get("emo_text") is None:
        options["emo_text"] = True
    emotion = engine.prepare_voice(str(folder / job["emo_audio_prompt"])) if "emo_audio_prompt" in job else None
    voice = engine.prepare_voice(str(folder / "speaker.wav"))
    return SynthesisRequest(text=job["text"], voice=voice, seed=job["seed"], options=options, instruct=job.get("emo_text"), emotion=emotion)


@pytest.mark.filterwarnings("ignore:speech was cut off")
@pytest.mark.parametrize("i", range(len(G.JOBS)))
def test_engine_audio_is_upstreams(engine, folder, golden, i):
    job = G.JOBS[i]
    reader = engine.emotion_lm()
    torch.manual_seed(job["seed"])
    generated = reader.lm.generate(reader.prompt_ids(job.get("emo_text") or job["text"]), reader.settings)
    assert generated == golden[f"j{i}.generated"].tolist()
    if f"j{i}.error" in golden:
        with pytest.raises(RequestError, match="not an object of scores"):
            list(engine.synthesize(request(engine, folder, job)))
        return
    chunks = list(engine.synthesize(request(engine, folder, job)))
    audio = np.concatenate([c.samples for c in chunks])
    int16 = np.ascontiguousarray((torch.from_numpy(audio) * 32767).type(torch.int16).numpy()[:, None])
    assert hashlib.sha256(int16.tobytes()).hexdigest() == str(golden[f"j{i}.wav_sha256"])
    (segment,) = chunks[-1].metadata["segments"]
    read = segment["emotion_from_text"]  # the weights read, before emo_alpha scales them (as upstream prints them)
    assert list(read) == ["happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm"]
    assert np.array_equal(np.array(list(read.values())), golden[f"j{i}.emotion"])


def test_the_drop_in_reads_the_emotion_as_upstream(folder, golden):
    """Upstream's own calls on the drop-in (`use_emo_text=True`, `emo_text` or the text itself): its
    int16 return value, the weights `qwen_emo.inference` gives, and upstream's error where it raises."""
    from koe.compat.indextts import IndexTTS2

    tts = IndexTTS2(model_dir=str(folder / "model"))
    generation = {**G._infer2().GENERATION, "max_text_tokens_per_segment": G._infer2().SEGMENT_TOKENS}
    for i, job in enumerate(G.JOBS):
        job = dict(job)
        seed, text = job.pop("seed"), job.pop("text")
        if "emo_audio_prompt" in job:
            job["emo_audio_prompt"] = str(folder / job["emo_audio_prompt"])
        tts.cache_spk_cond = tts.cache_emo_cond = None  # upstream's first call with the clips
        torch.manual_seed(seed)
        if f"j{i}.error" in golden:
            with pytest.raises(ValueError, match="not an object of scores"):
                tts.infer(str(folder / "speaker.wav"), text, None, **job, **generation)
            continue
        rate, wav = tts.infer(str(folder / "speaker.wav"), text, None, **job, **generation)
        assert rate == 22050 and hashlib.sha256(np.ascontiguousarray(wav).tobytes()).hexdigest() == str(golden[f"j{i}.wav_sha256"]), i
    torch.manual_seed(G.JOBS[0]["seed"])
    read = tts.qwen_emo.inference(G.JOBS[0]["text"])
    assert list(read) == ["happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm"]
    assert np.array_equal(np.array(list(read.values())), golden["j0.emotion"])


@pytest.mark.filterwarnings("ignore:speech was cut off")
def test_a_release_without_the_emotion_lm(folder, tmp_path):
    """Every other request runs; one asking for an emotion from a text is refused, naming the folder."""
    import os
    import shutil

    from koe_indextts.engine import IndexTTSEngine

    model = tmp_path / "model"
    shutil.copytree(folder / "model", model, ignore=shutil.ignore_patterns("qwen0.6bemo4-merge"), copy_function=os.symlink)
    engine = IndexTTSEngine.load(model)
    voice = engine.prepare_voice(str(folder / "speaker.wav"))
    options = {"max_mel_tokens": 4}
    assert list(engine.synthesize(SynthesisRequest(text="Hello.", voice=voice, seed=1, options=options)))
    with pytest.raises(RequestError, match=r"qwen0\.6bemo4-merge \(qwen_emo_path\) is missing") as e:
        list(engine.synthesize(SynthesisRequest(text="Hello.", voice=voice, seed=1, options={**options, "emo_text": True})))
    assert e.value.param == "emo_text"
    with pytest.raises(RequestError, match="Qwen emotion model") as e:
        list(engine.synthesize(SynthesisRequest(text="Hello.", voice=voice, seed=1, options=options, instruct="angrily")))
    assert e.value.param == "instructions"
