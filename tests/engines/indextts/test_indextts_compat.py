"""The IndexTTS 1.5 drop-in (`koe.compat.indextts.IndexTTS`) against upstream's `IndexTTS` on the golden
`infer15` (upstream on koe's tiny random release, a stereo 22.05 kHz clip, four texts, each after
`torch.manual_seed`): `infer`'s int16 return value, `infer_fast`'s (as upstream runs it on the CPU:
shortest segment searched first, the vocoder over pairs of segments) and the WAV file `infer` writes
(its samples, and the whole file) are upstream's, bit for bit. Then bad input: a clear error, and
no file written."""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pytest
import soundfile as sf
import torch
from goldens import array_sha256 as sha
from goldens import check_recorded, inputs, load_golden, written

from koe.compat.indextts import IndexTTS
from koe.engines.base import EmptyText, InvalidOption, RequestError, UnsupportedVoice

pytestmark = pytest.mark.filterwarnings("ignore:generation stopped at max_mel_tokens", "ignore:speech was cut off")

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
def tts(folder):
    return IndexTTS(model_dir=str(folder / "model"), device="cpu")


def _call(tts, folder, t: int, fast: bool = False, output_path=None):
    torch.manual_seed(G.SEED)
    run = tts.infer_fast if fast else tts.infer
    return run(str(folder / "prompt.wav"), G.TEXTS[t], output_path, max_text_tokens_per_segment=G.SEGMENT_TOKENS, **G.GENERATION)


@pytest.mark.parametrize("t", range(len(G.TEXTS)))
def test_infer_returns_upstreams_int16(tts, folder, golden, t):
    sr, wav = _call(tts, folder, t)
    assert sr == 24000 and wav.dtype == np.int16 and wav.ndim == 2 and wav.shape[1] == 1 and wav.shape[0] > 0
    assert sha(wav) == str(golden[f"t{t}.wav_sha256"])


@pytest.mark.parametrize("t", range(len(G.TEXTS)))
def test_infer_fast_returns_upstreams_int16(tts, folder, golden, t):
    sr, wav = _call(tts, folder, t, fast=True)
    assert sr == 24000 and wav.dtype == np.int16 and wav.shape[1] == 1
    assert sha(wav) == str(golden[f"t{t}.fast_wav_sha256"])


def test_infer_fast_differs_from_infer_where_upstreams_does(golden):
    """Several segments: upstream's infer_fast searches them in another order and vocodes pairs."""
    several = [t for t in range(len(G.TEXTS)) if f"t{t}.s1.codes" in golden]
    assert several, "the golden has a text of several segments"
    for t in range(len(G.TEXTS)):
        same = str(golden[f"t{t}.fast_wav_sha256"]) == str(golden[f"t{t}.wav_sha256"])
        assert same == (t not in several), t


@pytest.mark.parametrize("t", range(len(G.TEXTS)))
def test_the_wav_file_is_upstreams(tts, folder, golden, tmp_path, t):
    path = tmp_path / "nested" / f"t{t}.wav"
    assert _call(tts, folder, t, output_path=str(path)) == str(path)
    pcm, rate = sf.read(path, dtype="int16", always_2d=True)
    assert rate == 24000 and sf.info(path).subtype == "PCM_16"
    assert sha(pcm) == str(golden[f"t{t}.file_pcm_sha256"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == str(golden[f"t{t}.file_sha256"])  # header included
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left beside it


def test_the_file_rounds_where_the_return_value_truncates(tts, folder, tmp_path):
    sr, wav = _call(tts, folder, 1)
    pcm, _ = sf.read(_call(tts, folder, 1, output_path=str(tmp_path / "a.wav")), dtype="int16", always_2d=True)
    assert pcm.shape == wav.shape and not np.array_equal(pcm, wav)
    assert np.abs(pcm.astype(int) - wav).max() <= 2  # libsndfile rounds (wave / 32767) * 32767; the return value truncates


def test_upstreams_attributes(tts, folder):
    assert tts.device == "cpu" and tts.use_fp16 is False and tts.model_version == 1.5 and tts.stop_mel_token == 8193
    assert tts.model_dir == str(folder / "model") and tts.cache_audio_prompt is None or isinstance(tts.cache_audio_prompt, str)
    seen = []
    tts.gr_progress = lambda value, desc=None: seen.append((value, desc))
    try:
        _call(tts, folder, 0)
    finally:
        tts.gr_progress = None
    assert seen[0][0] == 0 and seen[-1][0] == 0.9 and all(isinstance(d, str) for _, d in seen)


# -- bad input ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    rate = 24000
    t = np.arange(int(60 * rate)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32)
    d = tmp_path_factory.mktemp("clips")
    sf.write(d / "silent.wav", np.zeros(rate, np.float32), rate)
    sf.write(d / "short.wav", tone[: int(0.3 * rate)], rate)
    sf.write(d / "long.wav", tone[: int(51 * rate)], rate)
    (d / "notes.wav").write_text("not a clip")
    return d


def _fails(tts, tmp_path, call, error, match: str) -> None:
    out = tmp_path / "out" / "speech.wav"
    with pytest.raises(error, match=match):
        call(out)
    assert not out.exists() and (not out.parent.exists() or not any(out.parent.iterdir()))


@pytest.mark.parametrize("fast", [False, True], ids=["infer", "infer_fast"])
def test_bad_clips(tts, folder, clips, tmp_path, fast):
    run = tts.infer_fast if fast else tts.infer
    for clip, error, match in (
        (None, ValueError, "audio_prompt is needed"),
        ("", ValueError, "audio_prompt is needed"),
        (str(clips / "missing.wav"), FileNotFoundError, "audio_prompt: no such file"),
        (str(clips / "notes.wav"), UnsupportedVoice, "cannot be used: not a readable audio file"),
        (str(clips / "silent.wav"), UnsupportedVoice, "silent"),
        (str(clips / "short.wav"), UnsupportedVoice, "0.30 s long; IndexTTS clones from at least 0.5 s"),
    ):
        _fails(tts, tmp_path, lambda out, c=clip: run(c, "Hello there.", str(out)), error, match)
    if not fast:
        _fails(tts, tmp_path, lambda out: run(str(clips / "long.wav"), "Hello.", str(out)), UnsupportedVoice, "at most 50 s")


def test_infer_fast_keeps_the_first_50_s_of_a_long_clip(tts, clips, folder):
    from koe_indextts.mel import reference_mel

    torch.manual_seed(1)
    sr, wav = tts.infer_fast(str(clips / "long.wav"), "Hello.", None, max_mel_tokens=10)
    assert wav.shape[0] > 0 and torch.equal(tts._voice[2].mel, reference_mel(str(clips / "long.wav")))


@pytest.mark.parametrize(
    "text, error, match",
    [
        ("", EmptyText, "text is empty"),
        ("  \n", EmptyText, "text is empty"),
        ("。，！", EmptyText, "nothing to speak \\(only punctuation"),
        ("...?!", EmptyText, "nothing to speak \\(only punctuation"),
        ("☃☃☃", RequestError, "the tokenizer knows none of"),
        (3, TypeError, "text must be a string"),
    ],
)
def test_text_with_nothing_to_speak(tts, folder, tmp_path, text, error, match):
    _fails(tts, tmp_path, lambda out: tts.infer(str(folder / "prompt.wav"), text, str(out)), error, match)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"num_beams": 0}, "num_beams=0: must be in \\[1, 16\\]"),
        ({"top_p": 2}, "top_p=2.0: must be in"),
        ({"max_mel_tokens": 0}, "max_mel_tokens=0: must be in"),
        ({"max_mel_tokens": 10**6}, "max_mel_tokens=1000000: must be in"),
        ({"max_mel_tokens": 300}, "positions for at most 250 mel codes"),
        ({"temperature": 0}, "temperature=0.0: must be in"),
        ({"max_text_tokens_per_segment": 0}, "max_text_tokens_per_segment=0: must be in"),
    ],
)
def test_absurd_options(tts, folder, tmp_path, kw, match):
    for run in (tts.infer, tts.infer_fast):
        _fails(tts, tmp_path, lambda out, r=run: r(str(folder / "prompt.wav"), "Hello there.", str(out), **kw), InvalidOption, match)


def test_other_misuse(tts, folder, tmp_path):
    prompt = str(folder / "prompt.wav")
    _fails(tts, tmp_path, lambda out: tts.infer(prompt, "Hello.", str(out), typical_p=0.5), TypeError, "typical_p are not supported")
    _fails(tts, tmp_path, lambda out: tts.infer(prompt, "Hello.", str(out.with_suffix(".mp4"))), ValueError, "ending in .wav")
    _fails(tts, tmp_path, lambda out: tts.infer_fast(prompt, "Hello.", str(out), segments_bucket_max_size=0), ValueError, "segments_bucket_max_size")
    with pytest.raises(ValueError, match="on the CPU"):
        IndexTTS(model_dir=str(folder / "model"), device="cuda:0")
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        IndexTTS(model_dir=str(folder / "nothing-here"))


def test_an_old_file_is_kept_when_the_call_fails(tts, folder, tmp_path):
    out = tmp_path / "kept.wav"
    out.write_bytes(b"before")
    with pytest.raises(InvalidOption):
        tts.infer(str(folder / "prompt.wav"), "Hello.", str(out), num_beams=0)
    assert out.read_bytes() == b"before"


def test_cfg_path(folder, tmp_path):
    model = folder / "model"
    assert IndexTTS(cfg_path=str(model / "config.yaml"), model_dir=str(model)).model_dir == str(model)
    same = tmp_path / "same.yaml"
    same.write_text((model / "config.yaml").read_text())
    IndexTTS(cfg_path=str(same), model_dir=str(model))
    other = tmp_path / "other.yaml"
    other.write_text((model / "config.yaml").read_text().replace("version: 1.5", "version: 1.0"))
    with pytest.raises(ValueError, match="differs from .*config.yaml"):
        IndexTTS(cfg_path=str(other), model_dir=str(model))
    with pytest.raises(FileNotFoundError, match="cfg_path .*no such file"):
        IndexTTS(cfg_path=str(tmp_path / "none.yaml"), model_dir=str(model))


def test_without_the_family_package_the_import_error_says_how_to_install_it(monkeypatch, folder):
    monkeypatch.setitem(sys.modules, "koe_indextts", None)  # as if it were not installed
    with pytest.raises(ImportError, match="pip install -e families/indextts"):
        IndexTTS(model_dir=str(folder / "model"))
