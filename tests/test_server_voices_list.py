"""`GET /v1/audio/voices`: every voice a speech request may name, with the models it works with.

A real KOE_HOME with random-weight models (Qwen3-TTS CustomVoice "cv", the default, and Base
"base"; F5-TTS "f5" and VoxCPM2 "vox" where a test needs another kind of model) and real library
voices; each listed pairing is then spoken through the real server, so the list says what works.
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from fixtures_models import model_folder
from shared_folders import fixture as shared_fixture
from test_server import FRAMES, make_home, wav_clip

from koe.engines.qwen3_tts.spec import OPENAI_SPEAKERS
from koe.server import create_app
from koe.server.openai_compat import OPENAI_VOICES
from koe.service import KoeHome, load_settings

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")

SPEAKERS = ("aiden", "dylan", "eric", "ono_anna", "ryan", "serena", "sohee", "uncle_fu", "vivian")


def upload(client: TestClient, name: str, transcript: str | None = None):
    data = {"name": name, **({"transcript": transcript} if transcript else {})}
    r = client.post("/v1/audio/voices", data=data, files={"file": ("clip.wav", wav_clip(1.5), "audio/wav")})
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture(scope="module")
def client(tmp_path_factory, session_tmp):
    home = make_home(tmp_path_factory.mktemp("home"), session_tmp)
    with TestClient(create_app(home)) as c:
        upload(c, "kim", "Hello, this is my voice.")
        upload(c, "quiet")  # no transcript: Base clones from the clip alone
        yield c


def by_id(listing: dict) -> dict[tuple[str, str], dict]:
    return {(v["kind"], v["id"]): v for v in listing["data"]}


def test_the_list_has_library_voices_preset_speakers_and_openai_names(client):
    listing = client.get("/v1/audio/voices").json()
    assert listing["object"] == "list" and listing["default_model"] == "cv"
    kinds = [v["kind"] for v in listing["data"]]
    assert kinds == sorted(kinds, key=["library", "speaker", "openai"].index)  # library first, as before
    for v in listing["data"]:
        assert v["object"] == "audio.voice" and v["id"] == v["name"] and isinstance(v["created_at"], int), v
    voices = by_id(listing)
    kim = voices["library", "kim"]
    # a library voice keeps every field it had, and says which models clone it
    assert {"source", "transcript", "description", "language", "duration_s", "sample_rate"} <= set(kim)
    assert kim["transcript"] == "Hello, this is my voice." and kim["type"] == "audio_sample" and kim["models"] == ["base"]
    assert voices["library", "quiet"]["models"] == ["base"] and voices["library", "quiet"]["transcript"] is None
    assert {i for k, i in voices if k == "speaker"} == set(SPEAKERS)
    for s in SPEAKERS:
        assert voices["speaker", s]["models"] == ["cv"] and voices["speaker", s]["type"] == "preset"
    for alias in OPENAI_VOICES:  # Base gives them no meaning; on cv each is a preset speaker
        entry = voices["openai", alias]
        assert entry["models"] == ["cv"] and entry["means"] == {"cv": f"speaker {OPENAI_SPEAKERS[alias]}"}


def test_each_listed_pairing_speaks_and_an_unlisted_one_is_refused(client):
    voices = by_id(client.get("/v1/audio/voices").json())
    pairs = [(v["id"], m) for k in ("library", "speaker") for (kind, _), v in voices.items() if kind == k for m in v["models"]]
    pairs = sorted(set(pairs))[:4] + [("kim", "base"), ("quiet", "base"), ("alloy", "cv")]
    for voice, model in pairs:
        r = client.post("/v1/audio/speech", json={"model": model, "input": "Hi there.", "voice": voice, "response_format": "wav", "seed": 1, **FRAMES})
        assert r.status_code == 200, (voice, model, r.text)
    for voice, model in (("kim", "cv"), ("ryan", "base"), ("alloy", "base")):  # not listed: each is a clear 4xx
        assert model not in voices[("library" if voice == "kim" else "speaker" if voice == "ryan" else "openai", voice)]["models"]
        r = client.post("/v1/audio/speech", json={"model": model, "input": "Hi there.", "voice": voice, "response_format": "wav", **FRAMES})
        assert 400 <= r.status_code < 500, (voice, model, r.text)


def test_filters_by_model_and_kind(client):
    def ids(**params):
        return [(v["kind"], v["id"]) for v in client.get("/v1/audio/voices", params=params).json()["data"]]

    assert ids(model="base") == [("library", "kim"), ("library", "quiet")]
    assert ids(model="tts-1") == ids(model="cv")  # OpenAI's model names mean the default
    assert {k for k, _ in ids(model="cv")} == {"speaker", "openai"}
    assert ids(kind="library") == [("library", "kim"), ("library", "quiet")]
    assert [i for _, i in ids(kind="openai", model="cv")] == list(OPENAI_VOICES)
    r = client.get("/v1/audio/voices", params={"model": "nope"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    assert client.get("/v1/audio/voices", params={"kind": "robot"}).status_code == 400


def test_one_voice_and_a_new_voice_say_their_models(client):
    assert client.get("/v1/audio/voices/kim").json()["models"] == ["base"]
    card = upload(client, "temp", "Just for a moment.")
    assert card["object"] == "audio.voice" and card["kind"] == "library" and card["models"] == ["base"]
    assert client.delete("/v1/audio/voices/temp").json() == {"id": "temp", "object": "audio.voice.deleted", "deleted": True}


def test_the_list_is_fast_and_loads_no_model(tmp_path, session_tmp):
    home = KoeHome(load_settings(tmp_path / "home", environ={}))  # no default model: nothing is preloaded
    home.models.import_model(model_folder(session_tmp, "custom_voice"), "cv", link=True)
    home.models.import_model(model_folder(session_tmp, "base"), "base", link=True)
    with TestClient(create_app(home)) as c:
        upload(c, "kim", "Hello, this is my voice.")
        c.get("/v1/audio/voices")
        t0 = time.perf_counter()
        for _ in range(10):
            listing = c.get("/v1/audio/voices").json()
        per_call = (time.perf_counter() - t0) / 10
        assert c.get("/health").json()["models_loaded"] == []
    assert listing["default_model"] is None and {v["kind"] for v in listing["data"]} == {"library", "speaker", "openai"}
    assert per_call < 0.25, f"{per_call * 1000:.0f} ms per list"


def test_shadowed_names_and_other_families(tmp_path, session_tmp):
    """A library voice named like an OpenAI voice replaces it; F5-TTS clones only with a transcript;
    VoxCPM2's own voice is what OpenAI's names mean there."""
    home = make_home(tmp_path / "home", session_tmp)
    home.models.import_model(shared_fixture("f5_tts"), "f5", link=True)
    home.models.import_model(shared_fixture("voxcpm"), "vox", link=True)
    with TestClient(create_app(home)) as c:
        upload(c, "alloy", "My own alloy.")
        upload(c, "quiet")
        voices = by_id(c.get("/v1/audio/voices").json())
        assert ("openai", "alloy") not in voices and voices["library", "alloy"]["models"] == ["base", "f5", "vox"]
        assert voices["library", "quiet"]["models"] == ["base", "vox"]  # F5-TTS needs the transcript
        echo = voices["openai", "echo"]
        assert echo["models"] == ["cv", "vox"] and echo["means"]["vox"].startswith("the model's own voice")
        r = c.post("/v1/audio/speech", json={"model": "cv", "input": "Hi.", "voice": "alloy", "response_format": "wav", "seed": 1, **FRAMES})
        assert r.status_code == 400 and r.json()["error"]["param"] == "model"  # the library voice, which cv cannot clone


def test_models_show_sizes_from_the_parameter_count_and_flag_random_weights(client):
    cards = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert set(cards) == {"cv", "base"}  # ids unchanged
    # the tiny fixtures keep the 0.6B release's tag ("0b6") in their config; their size is their own parameter count
    assert cards["cv"]["size"] == "11M" and 10_000_000 < cards["cv"]["parameters"] < 12_000_000
    assert cards["base"]["size"] == "11M" and cards["cv"]["random_weights"] is True and cards["base"]["random_weights"] is True
    card = client.get("/v1/models/cv").json()
    assert card["size"] == "11M" and card["random_weights"] is True


def test_a_model_without_the_marker_is_not_random(tmp_path, session_tmp):
    """A folder made from a real release has no marker: `random_weights` is false (the fixture's files, less the marker)."""
    import shutil

    from koe.engines.spec import RANDOM_WEIGHTS_FILE

    folder = shutil.copytree(model_folder(session_tmp, "custom_voice"), tmp_path / "release")
    (folder / RANDOM_WEIGHTS_FILE).unlink()
    home = KoeHome(load_settings(tmp_path / "home", environ={}))
    home.models.import_model(folder, "real", link=True)
    with TestClient(create_app(home)) as c:
        card = c.get("/v1/models/real").json()
    assert card["random_weights"] is False and card["size"] == "11M"


def test_a_default_model_outside_the_store_is_listed_under_its_folder_name(tmp_path, session_tmp):
    folder = model_folder(session_tmp, "custom_voice")  # the operator's folder: clients reach it as tts-1
    home = KoeHome(load_settings(tmp_path / "home", flags={"models": {"default": str(folder)}}, environ={}))
    home.models.import_model(model_folder(session_tmp, "base"), "base", link=True)
    with TestClient(create_app(home)) as c:
        upload(c, "kim", "Hello, this is my voice.")
        listing = c.get("/v1/audio/voices").json()
        assert listing["default_model"] == folder.name
        voices = by_id(listing)
        assert voices["speaker", "ryan"]["models"] == [folder.name] and voices["library", "kim"]["models"] == ["base"]
        assert {k for k, _ in by_id(c.get("/v1/audio/voices", params={"model": "tts-1"}).json())} == {"speaker", "openai"}
        r = c.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi.", "voice": "ryan", "response_format": "wav", "seed": 1, **FRAMES})
        assert r.status_code == 200, r.text


def test_the_official_client_creates_and_deletes_a_voice(tmp_path, session_tmp):
    """openai's `audio.voices.create` (audio_sample + consent) and `delete` parse koe's answers as
    their own types: `Voice` (object audio.voice) and `VoiceDeleted` (audio.voice.deleted)."""
    from openai import OpenAI
    from test_server_e2e import live_server

    home = make_home(tmp_path / "home", session_tmp)
    with live_server(create_app(home), home.settings.server) as server:
        client = OpenAI(base_url=server.url + "/v1", api_key="unused")
        voice = client.audio.voices.create(
            name="sdk", audio_sample=("clip.wav", wav_clip(1.5), "audio/wav"), consent="cons_local", extra_body={"transcript": "Hello there."}
        )
        assert (type(voice).__name__, voice.id, voice.name, voice.object, voice.type) == ("Voice", "sdk", "sdk", "audio.voice", "audio_sample")
        assert voice.model_extra["models"] == ["base"] and voice.model_extra["transcript"] == "Hello there."
        gone = client.audio.voices.delete("sdk")
        assert (type(gone).__name__, gone.id, gone.deleted, gone.object) == ("VoiceDeleted", "sdk", True, "audio.voice.deleted")
