"""Bad inputs get clear errors that say what is valid — never a crash deep inside the model."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile as sf
from fixtures_models import model_folder
from safetensors.torch import load_file, save_file

import koe
from koe.audio.errors import AudioError
from koe.engines.qwen3_tts.config import ConfigError
from koe.engines.qwen3_tts.engine import RequestError
from koe.runtime.weights import WeightsError


@pytest.fixture(scope="module")
def cv(tmp_path_factory):
    return koe.load(model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny"))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return koe.load(model_folder(tmp_path_factory.getbasetemp(), "base", "tiny"))


def test_empty_text(cv):
    with pytest.raises(RequestError, match="text is empty"):
        cv.generate("   ", speaker="ryan")


def test_unknown_speaker_lists_valid_ones(cv):
    with pytest.raises(RequestError, match="unknown speaker 'bob'.*'ryan'"):
        cv.generate("Hi there.", speaker="bob")


def test_unknown_language_lists_valid_ones(cv):
    with pytest.raises(RequestError, match="unsupported language 'klingon'.*'english'"):
        cv.generate("Hi there.", speaker="ryan", language="klingon")


def test_custom_voice_needs_a_speaker(cv):
    with pytest.raises(RequestError, match="needs a speaker"):
        cv.generate("Hi there.")


def test_instruction_on_small_custom_voice_warns(cv):
    with pytest.warns(UserWarning, match="ignores instructions"):
        cv.generate("Hi there.", speaker="ryan", instruct="Whisper.", max_new_tokens=3)


@pytest.mark.parametrize("value", [0, 1])
def test_max_new_tokens_below_two(cv, value):
    with pytest.raises(RequestError, match="max_new_tokens must be >= 2"):
        cv.generate("Hi there.", speaker="ryan", max_new_tokens=value)


def test_bad_sampling_values(cv):
    with pytest.raises(RequestError, match="top_p must be in"):
        cv.generate("Hi there.", speaker="ryan", top_p=1.5)
    with pytest.raises(RequestError, match="unknown sampling option"):
        cv.generate("Hi there.", speaker="ryan", topk=3)


def test_batch_size_mismatch(cv):
    with pytest.raises(RequestError, match="batch size mismatch"):
        cv.generate(["One.", "Two.", "Three."], speaker=["ryan", "vivian"])


@pytest.fixture()
def broken_copy(tmp_path, tmp_path_factory):
    src = model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny")
    dst = tmp_path / "model"
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize(
    "relpath, error, message",
    [
        ("config.json", Exception, "config.json"),
        ("model.safetensors", WeightsError, "no weights"),
        ("vocab.json", Exception, "vocab.json"),
        ("merges.txt", Exception, "merges.txt"),
        ("speech_tokenizer", FileNotFoundError, "speech_tokenizer"),
    ],
)
def test_missing_file_is_named(broken_copy, relpath, error, message):
    target = broken_copy / relpath
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(error, match=message):
        koe.load(broken_copy)


def _edit_weights(folder, edit):
    path = folder / "model.safetensors"
    state = load_file(str(path))
    edit(state)
    save_file(state, str(path))


def test_wrong_tensor_shape_is_named(broken_copy):
    _edit_weights(broken_copy, lambda s: s.__setitem__("talker.codec_head.weight", s["talker.codec_head.weight"][:, :-1].contiguous()))
    with pytest.raises(WeightsError, match=r"talker.codec_head.weight has shape"):
        koe.load(broken_copy)


def test_missing_and_unexpected_tensors_are_named(broken_copy):
    def edit(s):
        s.pop("talker.model.norm.weight")
        s["talker.extra.weight"] = s["talker.codec_head.weight"].clone()

    _edit_weights(broken_copy, edit)
    with pytest.raises(WeightsError, match=r"missing tensors: talker.model.norm.weight.*unexpected tensors: talker.extra.weight"):
        koe.load(broken_copy)


def test_unknown_tokenizer_type(broken_copy):
    cfg = json.loads((broken_copy / "config.json").read_text())
    cfg["tokenizer_type"] = "qwen3_tts_tokenizer_25hz"
    (broken_copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="only 'qwen3_tts_tokenizer_12hz'"):
        koe.load(broken_copy)


# -- cloning ------------------------------------------------------------------------------------


def tone(seconds: float, sr: int = 24000) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)


def test_custom_voice_cannot_clone(cv):
    with pytest.raises(RequestError, match="cannot clone.*Base model"):
        cv.prepare_voice((tone(2.0), 24000), ref_text="Hello.")


def test_icl_without_transcript_explains_x_vector_mode(base):
    with pytest.raises(RequestError, match="transcript.*x_vector_only=True"):
        base.prepare_voice((tone(2.0), 24000))


@pytest.mark.parametrize(
    "audio, message",
    [
        (np.zeros(0, dtype=np.float32), "empty"),
        (np.zeros(48000, dtype=np.float32), "silen"),
        (np.full(48000, np.nan, dtype=np.float32), "NaN"),
        (tone(0.5), "at least 1 s"),
        (tone(45.0), "maximum is 30 s.*trim"),
    ],
    ids=["empty", "silence", "nan", "too-short", "too-long"],
)
def test_bad_reference_arrays(base, audio, message):
    with pytest.raises(AudioError, match=message):
        base.prepare_voice((audio, 24000), ref_text="Hello.")


def test_long_reference_can_be_trimmed(base):
    voice = base.prepare_voice((tone(45.0), 24000), x_vector_only=True, trim=True)
    assert voice.info["ref_seconds"] == 30.0


def test_file_that_is_not_audio(base, tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("this is not audio at all")
    with pytest.raises(AudioError):
        base.prepare_voice(str(path), ref_text="Hello.")


def test_truncated_file(base, tmp_path):
    path = tmp_path / "cut.wav"
    sf.write(path, tone(3.0), 24000)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(AudioError, match="truncated"):
        base.prepare_voice(str(path), ref_text="Hello.")


def test_base_model_needs_a_voice(base):
    with pytest.raises(RequestError, match="cloned voice"):
        base.generate("Hello there.")


def test_prompt_for_another_model_is_refused(base, cv, tmp_path_factory):
    other = koe.load(model_folder(tmp_path_factory.getbasetemp(), "base", "tiny-proj"))
    voice = other.prepare_voice((tone(2.0), 24000), x_vector_only=True)
    with pytest.raises(RequestError, match="made for a qwen3_tts 1b7 model"):
        base.generate("Hello there.", voice=voice)
