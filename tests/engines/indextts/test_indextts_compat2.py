"""The IndexTTS 2 drop-in (`koe.compat.indextts.IndexTTS2`) against upstream's `IndexTTS2` on the golden
`infer2` (upstream on koe's tiny random release 2): the five jobs, each with upstream's caches emptied
as the golden empties them, give upstream's int16 return value; later calls on one instance keep
upstream's caches (no w2v-BERT draws for a clip already read; `use_random`'s rows from Python's
`random`) and give upstream's samples and WAV file; the stream yields upstream's pieces; aux_paths
elsewhere load the same model. Then bad input: a clear error, and no file written."""

from __future__ import annotations

import hashlib
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from goldens import check_state, inputs, load_golden, release_digests, written

from koe.compat.indextts import IndexTTS, IndexTTS2
from koe.engines.base import EmptyText, InvalidOption, UnsupportedVoice

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.filterwarnings("ignore:generation stopped at max_mel_tokens")
CACHES = ("cache_spk_cond", "cache_s2mel_style", "cache_s2mel_prompt", "cache_spk_audio_prompt", "cache_emo_cond", "cache_emo_audio_prompt", "cache_mel")


G = inputs("infer2")


def sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


@pytest.fixture(scope="module")
def golden():
    return load_golden("infer2")


@pytest.fixture(scope="module")
def folder(golden):
    folder = written("infer2")
    for name, digest in release_digests("2").items():
        check_state(golden, digest, name=name.replace("/", ":"))
    return folder


def _aux(model: Path) -> dict[str, str]:
    return {
        "w2v_bert": str(model / "hf_cache/w2v-bert-2.0"),
        "semantic_codec": str(model / "hf_cache/semantic_codec_model.safetensors"),
        "campplus": str(model / "hf_cache/campplus_cn_common.bin"),
        "bigvgan": str(model / "hf_cache/bigvgan"),
    }


@pytest.fixture(scope="module")
def tts(folder):
    """Constructed as the golden constructs upstream's."""
    model = folder / "model"
    return IndexTTS2(cfg_path=str(model / "config.yaml"), model_dir=str(model), use_fp16=False, device="cpu", use_qwen_emo=False, aux_paths=_aux(model))


def _job(folder: Path, job: dict) -> tuple[int, str, dict]:
    job = dict(job)
    seed, text = job.pop("seed"), job.pop("text")
    job.pop("random_seed", None), job.pop("output", None)
    if "emo_audio_prompt" in job:
        job["emo_audio_prompt"] = str(folder / job["emo_audio_prompt"])
    return seed, text, {**job, "max_text_tokens_per_segment": G.SEGMENT_TOKENS, **G.GENERATION}


def _first_call(tts, folder, i: int, **extra):
    """Job i as the golden runs it: upstream's caches emptied, then `torch.manual_seed`."""
    for cache in CACHES:
        setattr(tts, cache, None)
    seed, text, kw = _job(folder, G.JOBS[i])
    torch.manual_seed(seed)
    return tts.infer(str(folder / "speaker.wav"), text, None, **{**kw, **extra})


@pytest.mark.parametrize("i", range(len(G.JOBS)))
def test_the_golden_jobs_return_upstreams_int16(tts, folder, golden, i):
    sr, wav = _first_call(tts, folder, i)
    assert sr == 22050 and wav.dtype == np.int16 and wav.ndim == 2 and wav.shape[1] == 1 and wav.shape[0] > 0
    assert sha(wav) == str(golden[f"j{i}.wav_sha256"])


def test_an_emotion_vector_drops_the_emotion_clip(tts, folder, golden):
    """Job 3 (an emotion vector with emo_alpha) with an emotion clip too: upstream ignores the clip."""
    sr, wav = _first_call(tts, folder, 3, emo_audio_prompt=str(folder / "emotion.wav"))
    assert sha(wav) == str(golden["j3.wav_sha256"])
    assert tts.cache_emo_audio_prompt == str(folder / "speaker.wav")


def test_later_calls_keep_upstreams_caches(tts, folder, golden, tmp_path):
    """After a first call with the speaker clip, the golden's later calls: no draws for the clips read
    already, rows by `random.randint` after `random.seed`, a new emotion clip read, its file written."""
    sr, wav = _first_call(tts, folder, 3)
    assert sha(wav) == str(golden["j3.wav_sha256"])
    speaker = str(folder / "speaker.wav")
    for k, job in enumerate(G.AGAIN):
        seed, text, kw = _job(folder, job)
        torch.manual_seed(seed)
        if "random_seed" in job:
            random.seed(job["random_seed"])
        if "output" in job:
            path = tmp_path / "nested" / job["output"]
            assert tts.infer(speaker, text, str(path), **kw) == str(path)
            pcm, rate = sf.read(path, dtype="int16", always_2d=True)
            assert rate == 22050 and sf.info(path).subtype == "PCM_16"
            assert sha(pcm) == str(golden[f"a{k}.file_pcm_sha256"])
            assert hashlib.sha256(path.read_bytes()).hexdigest() == str(golden[f"a{k}.file_sha256"])  # header included
            assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left beside it
        else:
            sr, wav = tts.infer(speaker, text, None, **kw)
            assert sha(wav) == str(golden[f"a{k}.wav_sha256"]), k
        assert tts.cache_spk_audio_prompt == speaker and tts.cache_emo_audio_prompt == kw.get("emo_audio_prompt", speaker)


def test_koes_model_gives_the_later_calls(folder, golden):
    """The same later calls through koe's model (no drop-in): w2v-BERT's draws only for the clip not
    read before, the emotion vector's rows from `random.randint`; codes and audio upstream's."""
    from koe_indextts.beam import Sampling
    from koe_indextts.model2 import Emotion
    from koe_indextts.model2 import IndexTTS2 as Model
    from koe_indextts.text import TextNormalizer, read_glossary
    from koe_indextts.text_tokenizer import TextTokenizer

    model = Model.load(folder / "model")
    tokenizer = TextTokenizer(folder / "model" / "bpe.model", TextNormalizer(read_glossary(folder / "model" / "glossary.yaml")))
    layers = model.w2v_layers
    speaker = model.speaker(folder / "speaker.wav")
    emotion_clip, emotion = "speaker.wav", model.emotion_features(folder / "speaker.wav")
    sampling = Sampling(temperature=0.8, **G.GENERATION)
    for k, job in enumerate(G.AGAIN):
        key = f"a{k}."
        torch.manual_seed(job["seed"])
        if "random_seed" in job:
            random.seed(job["random_seed"])
        vector, alpha, clip = job.get("emo_vector"), float(job.get("emo_alpha", 1.0)), job.get("emo_audio_prompt", "speaker.wav")
        rows = None
        if vector is not None:
            clip, alpha = "speaker.wav", 1.0
            if job.get("use_random"):
                rows = tuple(random.randint(0, n - 1) for n in model.release.emo_num)
        drawn = clip != emotion_clip
        if drawn:
            emotion_clip, emotion = clip, model.emotion_features(folder / clip)  # its draws, as upstream's first read
        ops = [str(d).split()[0] for d in golden[key + "draws"]]
        assert ops[:layers].count("rand") == (layers if drawn else 0) and "rand" not in ops[layers:]
        emovec = model.emotion_vector(speaker, Emotion(emotion, alpha, None if vector is None else tuple(vector)), rows)
        for s, ids in enumerate(tokenizer.segments(job["text"], G.SEGMENT_TOKENS)):
            wav, codes = model.segment(torch.tensor(ids, dtype=torch.int32), speaker, emovec, sampling)
            assert np.array_equal(codes[None].numpy(), golden[f"{key}s{s}.codes"]), (k, s)
        assert s == 0  # short texts: one segment each
        assert sha(wav.type(torch.int16).numpy().T) == str(golden[key + "wav_sha256"])


def test_the_stream_yields_upstreams_pieces(tts, folder, golden, tmp_path):
    """Job 4 (four segments, 100 ms between them): each segment's wave at 16-bit scale, then the
    silence (the same zeros after each, the last one included); joined, upstream's audio. With an
    output_path the file is written once the stream is exhausted."""
    for cache in CACHES:
        setattr(tts, cache, None)
    seed, text, kw = _job(folder, G.JOBS[4])
    torch.manual_seed(seed)
    path = tmp_path / "stream.wav"
    stream = tts.infer(str(folder / "speaker.wav"), text, str(path), stream_return=True, **kw)
    assert not path.exists()
    pieces = list(stream)
    segments = sum(1 for name in golden if name.startswith("j4.s") and name.endswith(".codes"))
    assert segments == 4 and len(pieces) == 2 * segments and path.is_file()
    waves, silences = pieces[0::2], pieces[1::2]
    assert all(s is silences[0] for s in silences) and torch.equal(silences[0], torch.zeros(1, 2205))
    assert all(w.dtype == torch.float32 and w.shape[0] == 1 and w.abs().max() <= 32767 for w in waves)
    joined = torch.cat(pieces[:-1], dim=1)
    assert sha(joined.type(torch.int16).numpy().T) == str(golden["j4.wav_sha256"])
    pcm, _ = sf.read(path, dtype="int16", always_2d=True)
    assert pcm.shape == (joined.shape[1], 1) and np.abs(pcm.astype(int) - joined.numpy().T).max() <= 2  # libsndfile's rounding at its scale


def test_upstreams_attributes(tts, folder):
    assert tts.device == "cpu" and tts.use_fp16 is False and tts.dtype is None and tts.model_version == 2.0
    assert tts.stop_mel_token == tts.engine.model.lm.cfg.stop_mel_token and tts.emo_num == [3, 17, 2, 8, 4, 5, 10, 24]
    assert tts.qwen_emo is None and tts.model_dir == str(folder / "model")
    seen = []
    tts.gr_progress = lambda value, desc=None: seen.append((value, desc))
    try:
        _first_call(tts, folder, 3)
    finally:
        tts.gr_progress = None
    assert seen[0][0] == 0 and seen[-1][0] == 0.9 and all(isinstance(d, str) for _, d in seen)
    assert tts.normalize_emo_vec([0.8, 0, 0, 0, 0, 0, 0, 0.8]) == pytest.approx([0.8 * 0.9375 / 1.2 * 0.8, 0, 0, 0, 0, 0, 0, 0.8 * 0.5625 / 1.2 * 0.8])
    assert tts.normalize_emo_vec([0.1] * 8, apply_bias=False) == [0.1] * 8


def test_aux_paths_elsewhere(folder, golden, tmp_path):
    """The auxiliary models outside the model folder (upstream's aux_paths): the same samples."""
    model, bare = folder / "model", tmp_path / "bare"
    bare.mkdir()
    for entry in model.iterdir():
        if entry.name != "hf_cache":
            os.symlink(entry, bare / entry.name)
    with pytest.raises(FileNotFoundError, match="missing hf_cache"):
        IndexTTS2(model_dir=str(bare))
    tts = IndexTTS2(model_dir=str(bare), aux_paths=_aux(model))
    sr, wav = _first_call(tts, folder, 3)
    assert sha(wav) == str(golden["j3.wav_sha256"])
    with pytest.raises(FileNotFoundError, match="aux_paths\\['bigvgan'\\]: no .*config.json"):
        IndexTTS2(model_dir=str(bare), aux_paths={**_aux(model), "bigvgan": str(tmp_path)})
    with pytest.raises(ValueError, match="aux_paths lacks campplus"):
        IndexTTS2(model_dir=str(bare), aux_paths={k: v for k, v in _aux(model).items() if k != "campplus"})


# -- bad input ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    rate = 22050
    t = np.arange(int(2 * rate)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32)
    d = tmp_path_factory.mktemp("clips")
    sf.write(d / "silent.wav", np.zeros(rate, np.float32), rate)
    sf.write(d / "short.wav", tone[: int(0.3 * rate)], rate)
    (d / "notes.wav").write_text("not a clip")
    return d


def _fails(tmp_path, call, error, match: str) -> None:
    out = tmp_path / "out" / "speech.wav"
    with pytest.raises(error, match=match):
        call(out)
    assert not out.exists() and (not out.parent.exists() or not any(out.parent.iterdir()))


def test_bad_clips(tts, folder, clips, tmp_path):
    for clip, error, match in (
        (None, ValueError, "spk_audio_prompt is needed"),
        ("", ValueError, "spk_audio_prompt is needed"),
        (str(clips / "missing.wav"), FileNotFoundError, "spk_audio_prompt: no such file"),
        (str(clips / "notes.wav"), UnsupportedVoice, "spk_audio_prompt cannot be used: .*not a readable audio file"),
        (str(clips / "silent.wav"), UnsupportedVoice, "spk_audio_prompt cannot be used: audio is all silence"),
        (str(clips / "short.wav"), UnsupportedVoice, "spk_audio_prompt is 0.30 s long; IndexTTS 2 reads a voice from at least 0.5 s"),
    ):
        _fails(tmp_path, lambda out, c=clip: tts.infer(c, "Hello there.", str(out)), error, match)
    speaker = str(folder / "speaker.wav")
    for clip, error, match in (
        (str(clips / "missing.wav"), FileNotFoundError, "emo_audio_prompt: no such file"),
        (str(clips / "short.wav"), UnsupportedVoice, "emo_audio_prompt is 0.30 s long"),
    ):
        _fails(tmp_path, lambda out, c=clip: tts.infer(speaker, "Hello there.", str(out), emo_audio_prompt=c), error, match)


def test_use_emo_text_without_the_qwen_model(tts, folder, tmp_path):
    speaker = str(folder / "speaker.wav")
    _fails(tmp_path, lambda out: tts.infer(speaker, "Hello.", str(out), use_emo_text=True), RuntimeError, r"it was not loaded \(use_qwen_emo=False\)")
    default = IndexTTS2(model_dir=str(folder / "model"))  # use_qwen_emo=True: the model is loaded on its first use
    assert default.qwen_emo is not None
    # this release folder has no emotion model: the call that needs it fails, naming it, and writes nothing
    missing = r"qwen0\.6bemo4-merge \(qwen_emo_path\) is missing"
    _fails(tmp_path, lambda out: default.infer(speaker, "Hello.", str(out), use_emo_text=True, emo_text="so happy"), ValueError, missing)
    _fails(tmp_path, lambda out: default.infer(speaker, "Hello.", str(out), use_emo_text=True, emo_text=3), TypeError, "emo_text must be a string")


@pytest.mark.parametrize(
    "kw, error, match",
    [
        ({"typical_p": 0.5}, TypeError, "typical_p are not supported"),
        ({"num_beams": 0}, InvalidOption, "num_beams=0: must be in \\[1, 16\\]"),
        ({"top_p": 2}, InvalidOption, "top_p=2.0: must be in"),
        ({"max_mel_tokens": 10**6}, InvalidOption, "max_mel_tokens=1000000: must be in"),
        ({"max_text_tokens_per_segment": 0}, InvalidOption, "max_text_tokens_per_segment=0: must be in"),
        ({"emo_vector": [0.5] * 7}, ValueError, "give 8 numbers"),
        ({"emo_vector": "happy"}, ValueError, "give 8 numbers"),
        ({"emo_vector": [float("nan")] + [0.0] * 7}, ValueError, "give 8 numbers"),
        ({"emo_alpha": "strong"}, ValueError, "emo_alpha='strong': must be a number"),
        ({"interval_silence": None}, ValueError, "interval_silence=None"),
        ({"more_segment_before": -1}, ValueError, "more_segment_before=-1"),
    ],
)
def test_bad_options(tts, folder, tmp_path, kw, error, match):
    _fails(tmp_path, lambda out: tts.infer(str(folder / "speaker.wav"), "Hello there.", str(out), **kw), error, match)


@pytest.mark.parametrize(
    "text, error, match",
    [("", EmptyText, "text is empty"), ("。，！", EmptyText, "nothing to speak"), (3, TypeError, "text must be a string")],
)
def test_text_with_nothing_to_speak(tts, folder, tmp_path, text, error, match):
    _fails(tmp_path, lambda out: tts.infer(str(folder / "speaker.wav"), text, str(out)), error, match)


def test_other_misuse(tts, folder, tmp_path):
    speaker, model = str(folder / "speaker.wav"), str(folder / "model")
    _fails(tmp_path, lambda out: tts.infer(speaker, "Hello.", str(out.with_suffix(".mp4"))), ValueError, "ending in .wav")
    _fails(tmp_path, lambda out: tts.infer(speaker, "Hello.", str(out), stream_return=True, typical_p=1), TypeError, "typical_p")  # at the call
    with pytest.raises(ValueError, match="on the CPU"):
        IndexTTS2(model_dir=model, device="cuda:0")
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        IndexTTS2(model_dir=str(folder / "nothing-here"))
    with pytest.raises(ValueError, match="use koe.compat.indextts.IndexTTS2"):
        IndexTTS(model_dir=model)


def test_without_the_family_package_the_import_error_says_how_to_install_it(monkeypatch, folder):
    monkeypatch.setitem(sys.modules, "koe_indextts", None)  # as if it were not installed
    with pytest.raises(ImportError, match="pip install -e families/indextts"):
        IndexTTS2(model_dir=str(folder / "model"))
