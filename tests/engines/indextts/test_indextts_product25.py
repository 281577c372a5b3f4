"""IndexTTS 2.5 through the product, with the tiny random release 2.5: `koe speak --ref --language` (the
CLI), the server (`POST /v1/audio/speech` in a library voice made from a clip, with a language and
2.5's options; `GET /v1/models`), the library (`koe.load(...).generate`, the language guessed from the
text), bad input (an unknown language, `duration_factor=0`, a silent clip), and `koe models pull
IndexTeam/IndexTTS-2.5` from the tests' fake hub: the licence asked for, the release's own files and
release 2's auxiliary models (no MaskGCT codec) and the emotion model's folder where upstream keeps them."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient
from koe_indextts.spec import EMOTION_LM, FILES_25, LICENSE, REPO_25, SPEC
from product_helpers import folder_files, install_fake_hub, koe_command
from shared_folders import fixture as shared_fixture

import koe
from koe.engines.base import InvalidOption, UnsupportedLanguage, UnsupportedVoice
from koe.server import create_app
from koe.service import KoeHome, load_settings

RATE = 22050
pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")


def clip_bytes(seconds: float = 2.0, rate: int = RATE, silent: bool = False) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    x = sum(np.sin(2 * np.pi * f * t) / (i + 1) for i, f in enumerate((140, 280, 420)))
    x = np.zeros_like(t) if silent else 0.3 * x * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) / np.abs(x).max()
    buf = io.BytesIO()
    sf.write(buf, x.astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@pytest.fixture(scope="module")
def release():
    return shared_fixture("indextts", "IndexTTS-2.5")


def test_koe_speak_in_a_language(release, tmp_path, monkeypatch):
    run = koe_command(tmp_path, monkeypatch)
    (tmp_path / "ref.wav").write_bytes(clip_bytes())
    out, again = tmp_path / "out.wav", tmp_path / "again.wav"
    args = ("speak", "你好，欢迎使用语音合成。", "-m", release, "--ref", tmp_path / "ref.wav", "--seed", "3", "--language", "zh", "--opt", "max_mel_tokens=12")
    run(*args, "--opt", "duration_factor=1.25", "-o", out)
    audio, rate = sf.read(out)
    assert rate == RATE and audio.size > 0 and np.abs(audio).max() > 0
    run(*args, "--opt", "duration_factor=1.25", "-o", again)
    assert out.read_bytes() == again.read_bytes()  # a seed repeats the samples
    refused = run(*args[:-2], "--language", "klingon", "-o", tmp_path / "x.wav", ok=False)
    assert refused.exit_code != 0 and "unsupported language 'klingon'" in refused.output and "Traceback" not in refused.output
    refused = run(*args, "--opt", "duration_factor=0", "-o", tmp_path / "x.wav", ok=False)
    assert refused.exit_code != 0 and "duration_factor=0" in refused.output and "Traceback" not in refused.output
    assert not (tmp_path / "x.wav").exists()


def test_the_server_speaks_25_in_a_voice_from_a_clip(release, tmp_path):
    settings = load_settings(tmp_path / "home", flags={"models": {"default": "indextts25"}}, environ={})
    home = KoeHome(settings)
    home.models.import_model(release, "indextts25", link=True)
    with TestClient(create_app(home)) as client:
        card = client.get("/v1/models").json()["data"][0]
        assert card["id"] == "indextts25" and card["license"]["id"] == LICENSE.id
        r = client.post("/v1/audio/voices", data={"name": "kim"}, files={"file": ("clip.wav", clip_bytes(), "audio/wav")})
        assert r.status_code == 201, r.text
        body = {
            "model": "indextts25",
            "input": "Hello there, this is a test.",
            "voice": "kim",
            "language": "english",
            "response_format": "wav",
            "seed": 5,
            "options": {"max_mel_tokens": 12, "text_normalization": False},
        }
        r = client.post("/v1/audio/speech", json=body)
        assert r.status_code == 200, r.text
        audio, rate = sf.read(io.BytesIO(r.content))
        assert rate == RATE and audio.size > 0
        assert client.post("/v1/audio/speech", json=body).content == r.content
        bad = client.post("/v1/audio/speech", json={**body, "language": "xx"})
        assert bad.status_code == 400 and "unsupported language 'xx'" in bad.text
        bad = client.post("/v1/audio/speech", json={**body, "options": {"duration_factor": 0}})
        assert bad.status_code == 400 and "duration_factor=0" in bad.text
        empty = client.post("/v1/audio/speech", json={**body, "input": "。，！"})
        assert empty.status_code == 400 and "nothing to speak" in empty.text
        silent = client.post("/v1/audio/voices", data={"name": "mute"}, files={"file": ("clip.wav", clip_bytes(silent=True), "audio/wav")})
        assert silent.status_code == 400 and "audio is all silence" in silent.text


def test_the_library_guesses_the_language(release, tmp_path):
    tts = koe.load(str(release))
    assert tts.engine.capabilities.languages[:7] == ("auto", "zh", "en", "ja", "es", "ar", "zhen")
    voice = tts.prepare_voice(clip_bytes())
    result = tts.generate("Hello there.", voice=voice, seed=2, max_mel_tokens=12)
    assert result.sample_rate == RATE and result.audio.size > 0 and result.metadata["segments"][0]["language"] == "en"
    assert result.metadata["model"] == "IndexTTS-2.5"
    with pytest.raises(InvalidOption, match="duration_factor=0.0: must be in \\[0.5, 2\\]"):
        tts.generate("Hello there.", voice=voice, duration_factor=0)
    with pytest.raises(UnsupportedVoice, match="silent"):
        tts.prepare_voice(clip_bytes(silent=True))
    from koe.engines.base import SynthesisRequest

    with pytest.raises(UnsupportedLanguage, match="unsupported language 'xx'"):
        list(tts.engine.synthesize(SynthesisRequest(text="Hello.", voice=voice, language="xx")))
    chunks = list(tts.engine.synthesize(SynthesisRequest(text="Hola, ¿cómo estás?", voice=voice, language="Spanish", seed=1, options={"max_mel_tokens": 8})))
    assert chunks[-1].metadata["segments"][0]["language"] == "es"


def test_pull_asks_for_the_licence_and_writes_the_release(release, tmp_path, monkeypatch):
    run = koe_command(tmp_path, monkeypatch)
    own = folder_files(release)
    (released,) = [r for r in SPEC.released if r.repo_id == REPO_25]

    def placeholder(repo: str, name: str) -> bytes:  # each file's own bytes (the store keeps downloads by content)
        return f"{repo}/{name}".encode()

    repos = {
        REPO_25: {
            **{name: own[name] if name == "config.yaml" else placeholder(REPO_25, name) for name in FILES_25},
            f"{EMOTION_LM}/config.json": placeholder(REPO_25, "emotion config"),
            f"{EMOTION_LM}/model.safetensors": placeholder(REPO_25, "emotion weights"),
            "README.md": b"not pulled",
        },
        "facebook/w2v-bert-2.0": {name: placeholder("w2v", name) for name in ("config.json", "preprocessor_config.json", "model.safetensors")},
        "funasr/campplus": {"campplus_cn_common.bin": placeholder("campplus", "")},
        "nvidia/bigvgan_v2_22khz_80band_256x": {name: placeholder("bigvgan", name) for name in ("config.json", "bigvgan_generator.pt")},
        "amphion/MaskGCT": {"semantic_codec/model.safetensors": placeholder("maskgct", "")},
    }
    assert {s.repo for s in released.sources} == set(repos) - {"amphion/MaskGCT"}
    hub = install_fake_hub(monkeypatch, repos)
    try:
        refused = run("models", "pull", REPO_25, ok=False)
        assert refused.exit_code != 0 and "--accept-license" in refused.stderr and LICENSE.title in refused.stderr
        assert hub.hits == []
        run("models", "pull", REPO_25, "--accept-license")
    finally:
        hub.close()
    folder = run.home / "models" / "IndexTTS-2.5"
    pulled = {name for name in folder_files(folder) if not name.startswith(".")}
    expected = {
        *FILES_25,
        "hf_cache/w2v-bert-2.0/config.json",
        "hf_cache/w2v-bert-2.0/preprocessor_config.json",
        "hf_cache/w2v-bert-2.0/model.safetensors",
        "hf_cache/campplus_cn_common.bin",
        "hf_cache/bigvgan/config.json",
        "hf_cache/bigvgan/bigvgan_generator.pt",
        f"{EMOTION_LM}/config.json",
        f"{EMOTION_LM}/model.safetensors",
    }
    assert pulled == expected
    info = run("models", "info", "IndexTTS-2.5").stdout
    assert "indextts IndexTTS-2.5" in info and "license accepted: yes" in info and "missing" not in info
