"""The model store: import (copy / link), list, info, remove, resolve --model, and `pull` offline."""

import json
import shutil
import time

import pytest
from fixtures_models import model_folder

from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, Unavailable
from koe.service.storage import Database
from koe.service.store.hub import pull_model
from koe.service.store.models import ModelStore, detect_model, inspect_model


@pytest.fixture(scope="session")
def custom_voice(session_tmp):
    return model_folder(session_tmp, "custom_voice")


@pytest.fixture(scope="session")
def voice_design(session_tmp):
    return model_folder(session_tmp, "voice_design")


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))


def test_detect_and_inspect_read_only_files(custom_voice):
    ref = detect_model(custom_voice)
    assert (ref.family, ref.variant, ref.size) == ("qwen3_tts", "custom_voice", "0b6")
    d = inspect_model(ref)
    assert d.ok and d.parameters > 1_000_000 and "ryan" in d.speakers and "english" in d.languages
    assert d.memory_bytes("bfloat16") * 2 == d.memory_bytes("float32")
    assert ref.key == detect_model(custom_voice).key  # stable


def test_import_copy_list_info_remove(store, custom_voice):
    d = store.import_model(custom_voice, "cv")
    assert d.ref.installed and not d.linked and not (store.root / "cv").is_symlink()
    assert (store.root / "cv" / "speech_tokenizer" / "model.safetensors").is_file()
    assert [m.ref.name for m in store.list()] == ["cv"]
    assert store.get("CV").ref.variant == "custom_voice" and store.get("cv").origin == str(custom_voice.resolve())
    with pytest.raises(AlreadyExists):
        store.import_model(custom_voice, "cv")
    store.import_model(custom_voice, "cv", overwrite=True)
    store.remove("cv")
    assert store.list() == [] and not (store.root / "cv").exists()
    assert custom_voice.is_dir()
    with pytest.raises(NotFound, match="no model named 'cv'"):
        store.get("cv")


def test_import_link_keeps_the_source(store, voice_design):
    d = store.import_model(voice_design, link=True)
    assert d.linked and (store.root / d.ref.name).is_symlink() and d.ref.name == voice_design.name
    store.remove(d.ref.name)
    assert voice_design.is_dir() and (voice_design / "config.json").is_file()


def test_import_validates_the_folder(store, tmp_path, custom_voice):
    with pytest.raises(NotFound, match="not found"):
        store.import_model(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidRequest, match="no config.json"):
        store.import_model(tmp_path / "empty")
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(InvalidRequest, match="not supported"):
        store.import_model(other)
    broken = tmp_path / "broken"
    shutil.copytree(custom_voice, broken)
    shutil.rmtree(broken / "speech_tokenizer")
    with pytest.raises(InvalidRequest, match="missing speech_tokenizer/config.json"):
        store.import_model(broken)
    with pytest.raises(InvalidRequest, match="name"):
        store.import_model(custom_voice, "../escape")
    assert store.list() == []


def test_resolve_path_name_default_and_only_one(store, custom_voice, voice_design):
    with pytest.raises(InvalidRequest, match="no model given"):
        store.resolve(None)
    store.import_model(custom_voice, "cv")
    assert store.resolve(None).name == "cv"  # the only installed model
    assert store.resolve(str(voice_design)).variant == "voice_design"  # a path
    store.import_model(voice_design, "vd", link=True)
    with pytest.raises(InvalidRequest, match="installed: cv, vd"):
        store.resolve(None)
    assert store.resolve(None, default="vd").name == "vd"
    assert store.resolve("cv", default="vd").name == "cv"
    with pytest.raises(NotFound, match="no model named 'nope'"):
        store.resolve("nope")
    with pytest.raises(NotFound, match="model folder not found"):
        store.resolve("./nope")


def test_pull_fails_fast_and_clearly_offline(store, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    started = time.monotonic()
    with pytest.raises(Unavailable) as info:
        pull_model(store, "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", connect_timeout=3.0)
    assert time.monotonic() - started < 5.0
    message = str(info.value)
    assert "cannot reach the Hugging Face hub" in message or "HF_HUB_OFFLINE" in message
    assert "koe models import" in message and "--model" in message
    assert store.list() == [] and not any(store.root.iterdir())


def test_pull_respects_hf_hub_offline(store, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(Unavailable, match="HF_HUB_OFFLINE"):
        pull_model(store, "Qwen/Qwen3-TTS-12Hz-0.6B-Base")


def test_pull_checks_the_id(store):
    with pytest.raises(InvalidRequest, match="OWNER/NAME"):
        pull_model(store, "not-an-id")


def test_import_refuses_arch_and_vocoder_a_family_does_not_take(store, custom_voice, voice_design):
    with pytest.raises(InvalidRequest, match="unknown architecture 'Nope'; koe knows:"):
        store.import_model(custom_voice, arch="Nope")
    with pytest.raises(InvalidRequest, match=r"separate vocoder \(--vocoder\) does not apply"):
        store.import_model(custom_voice, vocoder=voice_design)
    with pytest.raises(NotFound, match="vocoder folder not found"):
        store.import_model(custom_voice, vocoder=voice_design / "nope")
    assert store.list() == []
