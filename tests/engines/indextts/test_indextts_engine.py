"""Bad input through the IndexTTS 1.5 engine, each a clear error naming the problem: clips (none, silent,
too short, too long unless trimmed, unreadable), text with nothing to speak, options out of range or
beyond the GPT's positions, damaged folders (`koe.load` and `koe models info` say what is wrong), and an
IndexTTS-2.5 folder with a 1.5 config, a release 2 folder with a 1.5 config. The tiny random release loads in well under a second."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import soundfile as sf
import torch
from koe_indextts.engine import IndexTTSEngine
from koe_indextts.fixtures import write_random_model
from koe_indextts.mel import reference_mel
from product_helpers import koe_command

import koe
from koe.engines.base import EmptyText, InvalidOption, RequestError, SynthesisRequest, UnsupportedVoice
from koe.engines.spec import SpecError

RATE = 24000
pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off")


def tone(seconds: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("indextts-engine")
    write_random_model(root / "model")
    sf.write(root / "ok.wav", tone(2.0), RATE)
    sf.write(root / "silent.wav", np.zeros(RATE, np.float32), RATE)
    sf.write(root / "short.wav", tone(0.3), RATE)
    sf.write(root / "long.wav", tone(51.0, 16000), 16000)
    (root / "notes.wav").write_text("not a clip")
    return root


@pytest.fixture(scope="module")
def engine(root):
    return IndexTTSEngine.load(root / "model")


@pytest.fixture(scope="module")
def voice(engine, root):
    return engine.prepare_voice(str(root / "ok.wav"))


def speak(engine, text: str, voice, **options):
    return list(engine.synthesize(SynthesisRequest(text=text, voice=voice, seed=1, options={"max_mel_tokens": 20, **options})))


def test_a_short_request_speaks(engine, voice):
    chunks = speak(engine, "Hello there.", voice)
    assert sum(c.samples.size for c in chunks) > 0 and chunks[-1].metadata["model"] == "IndexTTS-1.5"


@pytest.mark.parametrize(
    "clip, match",
    [
        ("silent.wav", "the voice clip is silent"),
        ("short.wav", "0.30 s long; IndexTTS clones from at least 0.5 s"),
        ("long.wav", "51.0 s.*at most 50 s"),
        ("notes.wav", "cannot be used: not a readable audio file"),
        ("missing.wav", "cannot be used: no such audio file"),
    ],
)
def test_clips_it_cannot_clone_from(engine, root, clip, match):
    with pytest.raises(UnsupportedVoice, match=match):
        engine.prepare_voice(str(root / clip))


def test_no_clip(engine):
    with pytest.raises(UnsupportedVoice, match="IndexTTS speaks in a cloned voice"):
        speak(engine, "Hello.", None)
    with pytest.raises(UnsupportedVoice, match="cannot be used"):
        engine.prepare_voice(None)


def test_trim_keeps_the_first_50_s_as_upstreams_infer_fast(engine, root):
    """The whole clip resampled, then cut at 50 s: `reference_mel`, which the golden `mel` checks against upstream."""
    voice = engine.prepare_voice(str(root / "long.wav"), trim=True)
    assert torch.equal(voice.mel, reference_mel(str(root / "long.wav"))) and voice.info["ref_seconds"] == 50.0
    assert voice.mel.shape[-1] == 50 * RATE // 256 + 1


@pytest.mark.parametrize(
    "text, error, match",
    [
        ("", EmptyText, "text is empty"),
        ("   ", EmptyText, "text is empty"),
        ("。，！", EmptyText, "only punctuation"),
        ("...", EmptyText, "only punctuation"),
        ("?! - '", EmptyText, "only punctuation"),
        ("☃☃☃", RequestError, "the tokenizer knows none of"),
    ],
)
def test_text_with_nothing_to_speak(engine, voice, text, error, match):
    with pytest.raises(error, match=match):
        speak(engine, text, voice)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"num_beams": 0}, "num_beams=0: must be in \\[1, 16\\]"),
        ({"top_p": 2}, "top_p=2.0: must be in \\[0.01, 1\\]"),
        ({"max_mel_tokens": 0}, "max_mel_tokens=0: must be in"),
        ({"max_mel_tokens": 10**6}, "max_mel_tokens=1000000: must be in"),
        ({"max_mel_tokens": 251}, "max_mel_tokens=251: this model's GPT has positions for at most 250"),
        ({"temperature": 0}, "temperature=0.0: must be in"),
        ({"max_text_tokens_per_segment": 0}, "max_text_tokens_per_segment=0: must be in"),
        ({"max_text_tokens_per_segment": 130}, None),  # fine while every segment fits the GPT's 120 text positions
        ({"top_k": -1}, "top_k=-1: must be in"),
        ({"beams": 2}, "unknown option"),
    ],
)
def test_absurd_options(engine, voice, options, match):
    if match is None:
        speak(engine, "Hello there.", voice, **options)
        return
    with pytest.raises(InvalidOption, match=match):
        speak(engine, "Hello there.", voice, **options)


def test_a_segment_longer_than_the_gpt_takes(engine, voice):
    text = " ".join(["word"] * 150)  # no place to cut: one run of 150 tokens
    with pytest.raises(InvalidOption, match="a segment of .* text tokens is more than this model's GPT takes \\(120\\)"):
        speak(engine, text, voice, max_text_tokens_per_segment=200)


def test_the_default_max_mel_tokens_is_capped_to_the_gpts_positions(engine, voice):
    checked = engine.check_request(SynthesisRequest(text="Hello.", voice=voice))
    assert checked.settings["max_mel_tokens"] == 250  # the tiny GPT's; the release's 800 leaves 600


# -- folders --------------------------------------------------------------------------------------


def _damaged(root, name: str, change) -> str:
    folder = root / "damaged" / name
    if not folder.exists():
        shutil.copytree(root / "model", folder)
        change(folder)
    return str(folder)


FOLDERS = {
    "no bpe.model": (lambda f: (f / "bpe.model").unlink(), FileNotFoundError, "missing bpe.model .*koe models pull IndexTeam/IndexTTS-1.5"),
    "broken yaml": (lambda f: (f / "config.yaml").write_text("gpt: [unclosed\n"), SpecError, "config.yaml: not valid YAML \\(line 2, column 1"),
    "no gpt section": (lambda f: (f / "config.yaml").write_text("dataset: {}\nbigvgan: {}\n"), SpecError, "config.yaml: no `gpt` section"),
    "a setting missing": (
        lambda f: (f / "config.yaml").write_text("dataset: {}\nbigvgan: {}\ngpt: {}\n"),
        SpecError,
        "config.yaml: the setting 'condition_module' is missing",
    ),
    "not text": (lambda f: (f / "config.yaml").write_bytes(b"\xff\xfe\x00garbage"), SpecError, "config.yaml: not text"),
}


@pytest.mark.parametrize("name", FOLDERS)
def test_damaged_folders_say_what_is_wrong(root, name):
    change, error, match = FOLDERS[name]
    folder = _damaged(root, name.replace(" ", "-"), change)
    with pytest.raises(error, match=match):
        koe.load(folder)


def test_a_release_25_folder_with_a_15_config_says_what_it_lacks(root):
    folder = root / "v25"
    folder.mkdir(exist_ok=True)
    for f in ("config.yaml", "gpt.pth", "bpe.model"):
        shutil.copy(root / "model" / f, folder / f)
    (folder / "codec.pth").write_bytes(b"")
    with pytest.raises(SpecError, match="no `semantic_codec` section"):
        koe.load(str(folder))


def test_a_release_2_folder_with_a_15_config_says_what_it_lacks(root):
    folder = root / "v2"
    folder.mkdir(exist_ok=True)
    for f in ("config.yaml", "gpt.pth", "bpe.model"):
        shutil.copy(root / "model" / f, folder / f)
    (folder / "s2mel.pth").write_bytes(b"")
    with pytest.raises(SpecError, match="no `semantic_codec` section"):
        koe.load(str(folder))


def test_koe_models_info_says_what_is_wrong(root, tmp_path, monkeypatch):
    run = koe_command(tmp_path, monkeypatch)
    nobpe = _damaged(root, "no-bpe.model", FOLDERS["no bpe.model"][0])
    assert "status: missing bpe.model" in run("models", "info", nobpe).stdout
    broken = run("models", "info", _damaged(root, "broken-yaml", FOLDERS["broken yaml"][0]), ok=False)
    assert broken.exit_code != 0 and "not valid YAML (line 2, column 1" in broken.stderr and "Traceback" not in broken.output
    v2 = root / "v2-info"
    v2.mkdir(exist_ok=True)
    for f in ("config.yaml", "gpt.pth"):
        shutil.copy(root / "model" / f, v2 / f)
    (v2 / "codec.pth").write_bytes(b"")
    r = run("models", "info", str(v2), ok=False)
    assert r.exit_code != 0 and "no `semantic_codec` section" in r.stderr
