"""Fish Speech S2 through the product, with the tiny random release: what the spec says of a folder,
`koe speak` with a clip and its transcript, the server (a library voice from a clip and transcript,
`GET /v1/models` with the Fish Audio licence), `koe models pull fishaudio/s2-pro` from the tests' fake
hub (the licence asked for first), voice prompts saved and read back, and bad input refused with a
clear error and nothing written."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch
from fastapi.testclient import TestClient
from koe_fish_speech import spec
from koe_fish_speech.engine import FishSpeechEngine
from koe_fish_speech.fixtures import write_random_model
from koe_fish_speech.prompt import PromptTooLong
from koe_fish_speech.tokenizer import SpecialTokenInText
from koe_fish_speech.voice import FishSpeechVoice
from product_helpers import folder_files, install_fake_hub, koe_command

from koe.engines.base import EmptyText, RequestError, SynthesisRequest, UnsupportedVoice, VoicePromptMismatch
from koe.engines.spec import SpecError
from koe.server import create_app
from koe.service import KoeHome, load_settings

RATE = 44100
TRANSCRIPT = "This is the voice I would like you to use."


def clip_bytes(seconds: float = 1.5, rate: int = 24000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    x = sum(np.sin(2 * np.pi * f * t) / (i + 1) for i, f in enumerate((150, 300, 450)))
    x = 0.3 * x * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) / np.abs(x).max()
    buf = io.BytesIO()
    sf.write(buf, x.astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("fish-product") / "s2-pro")


@pytest.fixture(scope="module")
def engine(release):
    return FishSpeechEngine.load(release)


@pytest.fixture(scope="module")
def voice(engine, tmp_path_factory):
    path = tmp_path_factory.mktemp("fish-clip") / "ref.wav"
    path.write_bytes(clip_bytes())
    return engine.prepare_voice(str(path), TRANSCRIPT)


def test_the_spec_reads_the_release_folder(release, tmp_path):
    info = spec.SPEC.probe(release)
    assert (info.family, info.variant) == ("fish_speech", "s2-pro")
    d = spec.SPEC.describe(release)
    assert d.missing == () and d.license == spec.LICENSE and d.capabilities.sample_rate == RATE
    assert d.random_weights and "config.json" in d.required_files and "codec.pth" in d.required_files
    assert spec.SPEC.probe(tmp_path) is None
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    (copy / "codec.pth").unlink()
    assert spec.SPEC.describe(copy).missing == ("codec.pth",)
    with pytest.raises(FileNotFoundError, match="missing codec.pth"):
        FishSpeechEngine.load(copy)
    config = json.loads((copy / "config.json").read_text())
    del config["audio_decoder_config"]
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecError, match="audio_decoder_config"):
        spec.SPEC.describe(copy)


def test_a_sharded_release_is_described_with_its_shards(release, tmp_path):
    copy = tmp_path / "sharded"
    shutil.copytree(release, copy)
    (copy / "model.safetensors").rename(copy / "model-00001-of-00001.safetensors")
    (copy / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "model-00001-of-00001.safetensors"}}))
    d = spec.SPEC.describe(copy)
    assert "model-00001-of-00001.safetensors" in d.required_files and d.missing == ()
    (copy / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../elsewhere.safetensors"}}))
    with pytest.raises(SpecError, match="outside the model folder"):
        spec.SPEC.describe(copy)


def test_a_voice_needs_its_transcript_and_a_clip_of_speech(engine, tmp_path):
    path = tmp_path / "ref.wav"
    path.write_bytes(clip_bytes())
    with pytest.raises(UnsupportedVoice, match="transcript"):
        engine.prepare_voice(str(path))
    with pytest.raises(UnsupportedVoice, match="transcript"):
        engine.prepare_voice(str(path), "   ")
    with pytest.raises(SpecialTokenInText, match="<\\|im_end\\|>"):
        engine.prepare_voice(str(path), "Hello <|im_end|> there")
    with pytest.raises(UnsupportedVoice, match="silent"):
        engine.prepare_voice((np.zeros(44100, np.float32), 44100), "Nothing at all.")
    with pytest.raises(UnsupportedVoice, match="at least"):
        engine.prepare_voice((np.ones(4410, np.float32) * 0.1, 44100), "Too short.")


def test_a_voice_prompt_is_saved_and_read_back(engine, voice, tmp_path):
    both = FishSpeechVoice.joined(voice, voice)
    both.save(tmp_path / "v")
    loaded = engine.load_voice(tmp_path / "v")
    assert [c.text for c in loaded.clips] == [TRANSCRIPT, TRANSCRIPT]
    assert all(torch.equal(a.codes, b.codes) for a, b in zip(loaded.clips, both.clips, strict=True))
    meta = json.loads((tmp_path / "v" / "prompt.json").read_text())
    meta["texts"] = [TRANSCRIPT]  # one text for two clips' codes: damaged
    (tmp_path / "v" / "prompt.json").write_text(json.dumps(meta))
    with pytest.raises(VoicePromptMismatch, match="damaged"):
        engine.load_voice(tmp_path / "v")


def test_bad_requests_are_refused_with_clear_errors(engine, voice):
    def speak(text, **kw):
        return list(engine.synthesize(SynthesisRequest(text=text, seed=1, options={"max_new_tokens": 4}, **kw)))

    with pytest.raises(RequestError, match="<\\|speaker:1\\|>, which no reference clip voices"):
        speak("<|speaker:0|>Hi.<|speaker:1|>Hello.", voice=voice)
    with pytest.raises(RequestError, match="words before its first speaker tag"):
        speak("Hello <|speaker:0|>there.", voice=voice)
    with pytest.raises(SpecialTokenInText):
        speak("Say <|voice|> now.")
    with pytest.raises(EmptyText):
        speak("   ")
    with pytest.raises(RequestError, match="top_p"):
        list(engine.synthesize(SynthesisRequest(text="Hi.", options={"top_p": 0.01})))
    chunks = speak("<|speaker:0|>Hi.<|speaker:5|>Hello.")  # without a voice the model voices every speaker
    assert chunks[-1].metadata["model"] == "s2-pro"


def test_a_text_longer_than_the_context_is_refused(release, tmp_path):
    small = tmp_path / "small"
    shutil.copytree(release, small)
    config = json.loads((small / "config.json").read_text())
    config["text_config"]["max_seq_len"] = 2048 + 64  # 64 positions for the prompt
    (small / "config.json").write_text(json.dumps(config))
    engine = FishSpeechEngine.load(small)
    with pytest.raises(PromptTooLong, match="prompt is .* tokens long"):
        list(engine.synthesize(SynthesisRequest(text="A sentence that goes on. " * 20, options={"max_new_tokens": 4})))


def test_koe_speak_with_a_clip_and_its_transcript(release, tmp_path, monkeypatch):
    koe = koe_command(tmp_path, monkeypatch)
    (tmp_path / "ref.wav").write_bytes(clip_bytes())
    out = tmp_path / "out.wav"
    args = ("speak", "Hello there.", "-m", release, "--ref", tmp_path / "ref.wav", "--ref-text", TRANSCRIPT, "--seed", "3", "--max-new-tokens", "12")
    koe(*args, "-o", out)
    audio, rate = sf.read(out)
    assert rate == RATE and audio.size > 0 and np.abs(audio).max() > 0
    again = tmp_path / "again.wav"
    koe(*args, "-o", again)
    assert out.read_bytes() == again.read_bytes()  # a seed repeats the samples
    bad = tmp_path / "bad.wav"
    refused = koe("speak", "<|speaker:0|>Hi.<|speaker:1|>Yo.", *args[2:], "-o", bad, ok=False)
    assert refused.exit_code != 0 and "no reference clip voices" in refused.output and "Traceback" not in refused.output
    assert not bad.exists()  # nothing half-written
    notext = koe("speak", "Hello.", "-m", release, "--ref", tmp_path / "ref.wav", "-o", bad, ok=False)
    assert notext.exit_code != 0 and "transcript" in notext.output and not bad.exists()


def test_the_server_speaks_in_a_library_voice_and_lists_the_licence(release, tmp_path):
    settings = load_settings(tmp_path / "home", flags={"models": {"default": "fish"}}, environ={})
    home = KoeHome(settings)
    home.models.import_model(release, "fish", link=True)
    with TestClient(create_app(home)) as client:
        card = client.get("/v1/models").json()["data"][0]
        assert card["id"] == "fish" and card["license"]["id"] == spec.LICENSE.id and card["license"]["needs_acceptance"] is True
        r = client.post("/v1/audio/voices", data={"name": "kim", "transcript": TRANSCRIPT}, files={"file": ("clip.wav", clip_bytes(), "audio/wav")})
        assert r.status_code == 201, r.text
        body = {"model": "fish", "input": "Hello there.", "voice": "kim", "response_format": "wav", "seed": 5, "options": {"max_new_tokens": 10}}
        r = client.post("/v1/audio/speech", json=body)
        assert r.status_code == 200, r.text
        audio, rate = sf.read(io.BytesIO(r.content))
        assert rate == RATE and audio.size > 0
        assert client.post("/v1/audio/speech", json=body).content == r.content
        bad = client.post("/v1/audio/speech", json={**body, "options": {"temperature": 3}})
        assert bad.status_code == 400 and "temperature" in bad.text
        tag = client.post("/v1/audio/speech", json={**body, "input": "<|speaker:0|>Hi.<|speaker:1|>Hello."})
        assert tag.status_code == 400 and "no reference clip voices" in tag.text
        own = client.post("/v1/audio/speech", json={**body, "voice": "alloy"})
        assert own.status_code == 200, own.text  # OpenAI's voices: the model's own (it picks one itself)


def test_pull_asks_for_the_licence_and_writes_the_release(release, tmp_path, monkeypatch):
    koe = koe_command(tmp_path, monkeypatch)
    files = folder_files(release)
    files.pop("RANDOM_WEIGHTS.txt", None)
    hub = install_fake_hub(monkeypatch, {spec.REPO: files})
    try:
        refused = koe("models", "pull", spec.REPO, ok=False)
        assert refused.exit_code != 0 and "--accept-license" in refused.stderr and spec.LICENSE.title in refused.stderr
        assert hub.hits == []
        koe("models", "pull", spec.REPO, "--accept-license")
    finally:
        hub.close()
    folder = koe.home / "models" / "Fish-Speech-S2-Pro"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(files)
    info = koe("models", "info", "Fish-Speech-S2-Pro").stdout
    assert "fish_speech s2-pro" in info and "license accepted: yes" in info and spec.LICENSE.title in info
