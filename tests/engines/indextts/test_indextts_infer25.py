"""IndexTTS 2.5 end to end against upstream's `infer_v2_5.IndexTTS2.infer`, bit for bit
(goldens/infer25.npz: upstream on koe's tiny random release 2.5, its jobs in English, Chinese,
Japanese, Spanish, Arabic and zhen, speaker clips at 22.05, 48 and 16 kHz, mono and stereo, each after
`torch.manual_seed` and `random.seed` as upstream's first call with its clips): the clips' w2v-BERT
features, CAM++ style, mel and prompt condition, each segment's text ids (2.5's front end) and
language, emotion vector, codes, decoded codec frames, length-regulated condition, flow-matching mel
and waveform, the joined int16 audio, torch's draws and Python `random`'s state after the job (the
Japanese G2P's draws).
Also the release's loading (strict, its file list) and its config's checks."""

from __future__ import annotations

import functools
import hashlib
import json
import random
import shutil

import numpy as np
import pytest
import torch
import yaml
from goldens import check_state, inputs, load_golden, release_digests, written
from koe_indextts.beam import Sampling
from koe_indextts.config import ConfigError
from koe_indextts.config25 import Release25
from koe_indextts.fixtures25 import release_config
from koe_indextts.model25 import Emotion, IndexTTS25, Speaker25

G = inputs("infer25")


@pytest.fixture(scope="module")
def golden():
    return load_golden("infer25")


@pytest.fixture(scope="module")
def folder(golden):
    folder = written("infer25")
    for name, digest in release_digests("2.5").items():
        check_state(golden, digest, name=name.replace("/", ":"))
    return folder


@pytest.fixture(scope="module")
def model(folder):
    return IndexTTS25.load(folder / "model")


@pytest.fixture(scope="module")
def clips(model, folder):
    """The clips' readings, each once: each speaker clip's, and the emotion features of each clip."""
    speaker = functools.cache(lambda name: model.speaker(folder / name))
    emotion = functools.cache(lambda name: model.emotion_features(folder / name))
    return speaker, emotion


def speaker_of(job: dict) -> str:
    return job.get("speaker", "speaker.wav")


def random_state() -> str:
    """Python `random`'s state as the golden records it after a job."""
    return hashlib.sha256(json.dumps(random.getstate()).encode()).hexdigest()


def same(golden, name: str, value: torch.Tensor) -> bool:
    array = np.ascontiguousarray(value.numpy())
    if name + ".sha256" in golden:
        return tuple(golden[name + ".shape"]) == array.shape and hashlib.sha256(array.tobytes()).hexdigest() == str(golden[name + ".sha256"])
    return np.array_equal(array, golden[name])


def emotion_of(emotion_features, job: dict) -> Emotion:
    """What upstream's infer makes of a job's emotion arguments (its own: the job's speaker clip)."""
    vector = job.get("emo_vector")
    alpha = float(job.get("emo_alpha", 1.0))
    if vector is not None:
        scale = max(0.0, min(1.0, alpha))
        if scale != 1.0:
            vector = [int(x * scale * 10000) / 10000 for x in vector]
        return Emotion(emotion_features(speaker_of(job)), 1.0, tuple(vector))
    if "emo_audio_prompt" in job:
        return Emotion(emotion_features(job["emo_audio_prompt"]), alpha)
    return Emotion(emotion_features(speaker_of(job)), 1.0)


def recording(model, monkeypatch) -> dict[str, list[torch.Tensor]]:
    """What each segment's stages give, as the oracle records upstream's: the codec's decode, the
    length regulator, flow matching (before the prompt cut) and BigVGAN (its float output)."""
    seen: dict[str, list[torch.Tensor]] = {}

    def keep(name, value):
        seen.setdefault(name, []).append(value.detach().clone())
        return value

    def hook(name, pick):
        def record(module, args, out):
            keep(name, pick(out))

        return record

    decode, inference = model.codec.decode, model.s2mel.cfm.inference
    monkeypatch.setattr(model.codec, "decode", lambda *a, **k: keep("S_infer", decode(*a, **k)), raising=False)
    monkeypatch.setattr(model.s2mel.cfm, "inference", lambda *a, **k: keep("mel", inference(*a, **k)), raising=False)
    hooks = [
        model.s2mel.length_regulator.register_forward_hook(hook("cond", lambda out: out[0])),
        model.vocoder.register_forward_hook(hook("wav", lambda out: out)),
    ]
    seen["_hooks"] = hooks
    return seen


@pytest.mark.parametrize("i", range(len(G.JOBS)))
def test_every_stage_matches_upstream(model, clips, golden, monkeypatch, i):
    job = G.JOBS[i]
    speakers, emotion_features = clips
    speaker = speakers(speaker_of(job))
    emotion = emotion_of(emotion_features, job)
    key = f"j{i}."
    assert same(golden, key + "emb0", speaker.features)
    assert same(golden, key + "emb1", speaker.features)  # S_ref: the same features again, unused
    assert same(golden, key + "emb2", emotion.features)
    assert f"{key}emb3" not in golden
    assert same(golden, key + "style", speaker.style)
    assert same(golden, key + "ref_mel", speaker.mel)
    assert same(golden, key + "prompt", speaker.prompt)
    sampling = Sampling(temperature=0.8, **G.GENERATION)
    duration = job.get("duration_factor", 1.0)
    seen = recording(model, monkeypatch)
    try:
        torch.manual_seed(job["seed"])
        random.seed(job["seed"])
        model.layer_drop_draws()
        emovec = model.emotion_vector(speaker, emotion)
        waves = []
        segments, language = model.text_segments(job["text"], job["lang"], job.get("max_text_tokens_per_segment", 120))
        for k, ids in enumerate(segments):
            assert same(golden, f"{key}s{k}.text", ids[None]), k
            assert same(golden, f"{key}s{k}.lang", torch.LongTensor([language])), k
            assert same(golden, f"{key}s{k}.emovec", emovec), k
            wav, codes = model.segment(ids, language, speaker, emovec, sampling, duration)
            assert same(golden, f"{key}s{k}.codes", codes[None]), k
            for stage in ("S_infer", "cond", "mel", "wav"):
                assert same(golden, f"{key}s{k}.{stage}", seen[stage][k]), (k, stage)
            waves.append(wav)
    finally:
        for hook in seen["_hooks"]:
            hook.remove()
    assert f"{key}s{len(waves)}.codes" not in golden
    assert random_state() == str(golden[key + "random"])
    gap = torch.zeros(1, int(22050 * job.get("interval_silence", 200) / 1000.0))
    joined = torch.cat([w for k, wav in enumerate(waves) for w in ([wav, gap] if k < len(waves) - 1 else [wav])], dim=1)
    int16 = np.ascontiguousarray(joined.type(torch.int16).numpy().T)
    assert hashlib.sha256(int16.tobytes()).hexdigest() == str(golden[key + "wav_sha256"])


def test_upstreams_draws_are_koes(golden, model):
    """w2v-BERT's LayerDrop draws (the speaker clip twice, the emotion clip once, × its layers), then
    only the searches' and flow matching's: the codec's decode draws nothing."""
    for i in range(len(G.JOBS)):
        ops = [str(d).split()[0] for d in golden[f"j{i}.draws"]]
        layers = 3 * model.w2v_layers
        assert ops[:layers] == ["rand"] * layers
        assert set(ops[layers:]) == {"multinomial", "randn"}
        assert ops.count("randn") == sum(f"j{i}.s{k}.codes" in golden for k in range(3))


def test_the_lm_runs_on_the_exact_kernel_where_it_applies(model):
    """The goldens above ran the LM's products on koe's exact CPU kernel where it gives torch's bits
    here (koe.runtime.exact), else on torch's."""
    from koe_indextts.gpt import Conv1D

    from koe.runtime import exact

    layers = [m for m in model.lm.modules() if isinstance(m, (exact.ExactLinear, Conv1D, torch.nn.Linear))]
    kernel = [m for m in layers if isinstance(m, exact.ExactLinear)]
    assert len(layers) >= 4 * len(model.lm.gpt.h) + 2
    assert len(kernel) == (len(layers) if exact.summation_orders() is not None else 0)


def test_speaker_holds_no_codec_frames(clips):
    speakers, _ = clips
    speaker = speakers("speaker.wav")
    assert isinstance(speaker, Speaker25)
    assert not hasattr(speaker, "semantic")


def test_the_jobs_cover_the_languages_and_clips(folder, golden):
    """The languages 2.5 speaks and clips at other rates and channel counts, as the golden ran them;
    Japanese drew from `random` (its state after differs from the seed's), the others did not."""
    import soundfile as sf

    assert {job["lang"].lower() for job in G.JOBS} == {"zh", "en", "ja", "es", "ar", "zhen"}
    assert any("<" in job["text"] and job["lang"] == "ja" for job in G.JOBS)
    clips = {(info.samplerate, info.channels, info.subtype) for info in (sf.info(folder / speaker_of(job)) for job in G.JOBS)}
    assert clips == {(22050, 1, "PCM_16"), (48000, 1, "PCM_24"), (16000, 2, "PCM_16")}
    for i, job in enumerate(G.JOBS):
        random.seed(job["seed"])
        assert (random_state() != str(golden[f"j{i}.random"])) == (job["lang"] == "ja"), i


# -- the folder and its config -----------------------------------------------------------------------
def test_release_files_and_config(folder, model):
    release = Release25.read(folder / "model")
    assert release.variant == "IndexTTS-2.5" and release.version == 2.5
    assert release.missing(folder / "model") == ()
    assert {"codec.pth", "multilingual_zh_ja_yue_char_del.tiktoken", "hf_cache/campplus_cn_common.bin"} <= set(release.files)
    assert not any("semantic_codec" in f or f.endswith("bpe.model") for f in release.files)
    assert model.front.text_positions == model.lm.cfg.text_positions
    assert not hasattr(model.s2mel, "gpt_layer")


def test_a_missing_file_is_named(folder, tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(folder / "model", copy, ignore=shutil.ignore_patterns("*.safetensors", "*.pt", "*.bin"))
    with pytest.raises(FileNotFoundError, match="hf_cache/w2v-bert-2.0/model.safetensors"):
        IndexTTS25.load(copy)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.pop("s2mel"), "no `s2mel` section"),
        (lambda c: c.update(emo_num=[1, 2]), "emo_num must list 8"),
        (lambda c: c.update(version="2.5"), "not a number"),
        (lambda c: c.update(gpt_checkpoint="../gpt.pth"), "must name a file in the model folder"),
        (lambda c: c.update(qwen_emo_path="../elsewhere"), "qwen_emo_path '../elsewhere' must name a folder in the model folder"),
    ],
)
def test_config_checks(tmp_path, change, message):
    config = release_config()
    change(config)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=message):
        Release25.read(tmp_path)


def test_real_config_reads(tmp_path):
    """The real size's config (its weights are not written here: gigabytes) reads, with 2.5's codec."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(release_config("real")))
    release = Release25.read(tmp_path)
    assert release.semantic_codec["codebook_size"] == 8192 and release.gpt["model_dim"] == 1280
    assert "condition_module" not in release.gpt


# -- the engine: koe's contract on the same jobs -----------------------------------------------------
@pytest.fixture(scope="module")
def engine(folder):
    from koe_indextts.engine import IndexTTSEngine

    return IndexTTSEngine.load(folder / "model")


def engine_request(engine, folder, job: dict, stream: bool = False):
    """A golden job as a koe request: its language, the emotion as options or an emotion reference."""
    from koe_indextts.spec import EMOTION_OPTIONS

    from koe.engines.base import SynthesisRequest

    options = dict(G.GENERATION)
    for key in ("max_text_tokens_per_segment", "duration_factor", "interval_silence"):
        if key in job:
            options[key] = job[key]
    if "emo_vector" in job:
        options |= {name: value for name, value in zip(EMOTION_OPTIONS, job["emo_vector"], strict=True) if value}
    if "emo_alpha" in job:
        options["emo_alpha"] = job["emo_alpha"]
    emotion = engine.prepare_voice(str(folder / job["emo_audio_prompt"])) if "emo_audio_prompt" in job else None
    voice = engine.prepare_voice(str(folder / speaker_of(job)))
    return SynthesisRequest(text=job["text"], language=job["lang"], voice=voice, seed=job["seed"], options=options, emotion=emotion, stream=stream)


def int16_sha256(chunks) -> str:
    audio = np.concatenate([c.samples for c in chunks])
    pcm = torch.from_numpy(audio) * 32767  # the engine's samples are upstream's wave / 32767: scaling back is exact to the int16 cut
    return hashlib.sha256(np.ascontiguousarray(pcm.type(torch.int16).numpy()[:, None]).tobytes()).hexdigest()


@pytest.mark.filterwarnings("ignore:speech was cut off")  # a segment that reaches max_mel_tokens, as upstream warns
@pytest.mark.parametrize("i", range(len(G.JOBS)))
def test_engine_audio_is_upstreams(engine, folder, golden, i):
    """Each job through koe's engine contract (an emotion clip as the request's emotion reference, a
    vector as the emo_* options, job 3 in two segments with its silence, each job's language and
    speaker clip) gives upstream's int16 audio, and Python `random`'s state after it is upstream's."""
    job = G.JOBS[i]
    request = engine_request(engine, folder, job)
    random.seed(job["seed"])
    chunks = list(engine.synthesize(request))
    assert int16_sha256(chunks) == str(golden[f"j{i}.wav_sha256"])
    assert random_state() == str(golden[f"j{i}.random"])
    meta = chunks[-1].metadata
    assert chunks[-1].sample_rate == 22050 and meta["model"] == "IndexTTS-2.5"


@pytest.mark.filterwarnings("ignore:speech was cut off")
def test_engine_streams_each_segment_then_its_silence(engine, folder, golden):
    """The two-segment job streamed: the same audio, the first segment's chunk ending in the 100 ms of zeros."""
    job = G.JOBS[3]
    chunks = [c for c in engine.synthesize(engine_request(engine, folder, job, stream=True)) if c.samples.size]
    assert int16_sha256(chunks) == str(golden["j3.wav_sha256"])
    assert len(chunks) >= 2 and not np.any(chunks[0].samples[-int(22050 * 0.1) :])


@pytest.mark.filterwarnings("ignore:speech was cut off")
def test_engine_guesses_the_language_when_none_is_given(engine, folder, golden):
    """Job 0 (Chinese, lang "ZH") without a language: guessed zh from its script, the same audio."""
    from dataclasses import replace as with_

    request = with_(engine_request(engine, folder, G.JOBS[0]), language=None)
    chunks = list(engine.synthesize(request))
    assert int16_sha256(chunks) == str(golden["j0.wav_sha256"])
    assert chunks[-1].metadata["segments"][0]["language"] == "zh"
