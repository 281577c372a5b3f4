"""The voice library's files and voice design over HTTP (koe's extensions beside OpenAI's routes):
`GET /v1/audio/voices/{name}/reference`, `GET .../{name}/export`, `POST /v1/audio/voices/import`
and `POST /v1/audio/voices/design`.

A real KOE_HOME with tiny random-weight models (CustomVoice "cv", the default; Base "base";
VoiceDesign "design"). A designed voice is at least MIN_REFERENCE_SECONDS long, so a design speaks
16 frames (1.28 s); everything else a few.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import zipfile
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from fixtures_models import model_folder
from test_server import FRAMES, assert_error, decode, make_home, wait_for, wav_clip
from test_server_e2e import live_server

from koe.server import create_app
from koe.service import KoeHome, SpeechRequest

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off", "ignore:.*cut off:UserWarning")

DESIGN_FRAMES = {"max_new_tokens": 16}  # 1.28 s: a library voice needs at least 1 s
CALM = "a calm, low voice, speaking slowly"


def design_home(root: Path, session_tmp: Path, **server) -> KoeHome:
    """`make_home` plus a VoiceDesign model "design"."""
    home = make_home(root, session_tmp, **server)
    home.models.import_model(model_folder(session_tmp, "voice_design"), "design", link=True)
    return home


@pytest.fixture(scope="module")
def home(tmp_path_factory, session_tmp):
    return design_home(tmp_path_factory.mktemp("home"), session_tmp, max_upload_bytes=300_000, max_reference_seconds=5.0)


@pytest.fixture(scope="module")
def client(home):
    with TestClient(create_app(home)) as c:
        r = upload(c, "Kim", wav_clip(2.0), transcript="Hello, this is my voice.")
        assert r.status_code == 201, r.text
        yield c


def upload(client: TestClient, name: str, data: bytes, **fields):
    return client.post("/v1/audio/voices", data={"name": name, **fields}, files={"file": ("clip.wav", data, "audio/wav")})


def import_archive(client: TestClient, data: bytes, filename: str = "voice.zip", **fields):
    return client.post("/v1/audio/voices/import", data=fields, files={"file": (filename, data, "application/octet-stream")})


def design(client: TestClient, **body):
    """POST a design body (ASCII-escaped JSON, so it may carry a lone surrogate as a client could)."""
    body = {"model": "design", "description": CALM, "seed": 3, "options": DESIGN_FRAMES, **body}
    return client.post("/v1/audio/voices/design", content=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def library(client: TestClient) -> dict[str, dict]:
    return {v["name"]: v for v in client.get("/v1/audio/voices", params={"kind": "library"}).json()["data"]}


def leftovers(root: Path) -> list[str]:
    """Everything in the voices folder that is not a voice's folder (temp folders, stray files)."""
    return sorted(p.name for p in (root / "voices").iterdir() if p.name.startswith(".") or not p.is_dir())


def clip_bytes(wav: bytes) -> bytes:
    """A stored reference's bytes with the write time that libsndfile puts in a float WAV's PEAK
    chunk zeroed (the only bytes two writes of the same samples differ in; none without the chunk)."""
    at = wav.find(b"PEAK", 12)
    if at < 0:
        return wav
    return wav[: at + 12] + bytes(4) + wav[at + 16 :]  # "PEAK", size, version, then the timestamp


def exports_in_tmp() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("koe-export-*")}


# -- the reference clip -------------------------------------------------------------------------
def test_reference_is_the_stored_clip(client, home):
    r = client.get("/v1/audio/voices/kim/reference")  # names are case-insensitive
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav" and r.headers["cache-control"] == "no-store"
    assert r.headers["content-disposition"] == 'inline; filename="Kim.wav"'
    voice = home.voices.get("Kim")
    assert r.content == voice.reference_path.read_bytes()
    codec, rate, seconds = decode(r.content)
    assert (codec, rate) == ("pcm_f32le", 24000) and seconds == pytest.approx(voice.duration_s, abs=1e-3)


def test_reference_of_an_unknown_or_invalid_voice(client):
    assert_error(client.get("/v1/audio/voices/nobody/reference"), 404, "no voice named 'nobody'", "Kim", param="voice")
    assert_error(client.get("/v1/audio/voices/..%2Fx/reference"), 400, "invalid voice name")


def test_the_suffix_routes_leave_show_and_delete_alone(client):
    assert client.get("/v1/audio/voices/kim").json()["name"] == "Kim"
    assert upload(client, "reference", wav_clip(1.5)).status_code == 201  # a voice may be called "reference"
    assert client.get("/v1/audio/voices/reference").json()["name"] == "reference"
    assert client.get("/v1/audio/voices/reference/reference").status_code == 200
    assert client.delete("/v1/audio/voices/reference").json()["deleted"] is True
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/audio/voices/{name}/reference", "/v1/audio/voices/{name}/export", "/v1/audio/voices/import", "/v1/audio/voices/design"} <= set(paths)
    assert "multipart/form-data" in paths["/v1/audio/voices/import"]["post"]["requestBody"]["content"]


# -- export and import --------------------------------------------------------------------------
@pytest.mark.parametrize(("fmt", "media_type"), [("zip", "application/zip"), ("tar.gz", "application/gzip")])
def test_export_then_import_under_another_name(client, home, fmt, media_type):
    before = exports_in_tmp()
    params = {} if fmt == "zip" else {"format": fmt}
    r = client.get("/v1/audio/voices/kim/export", params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == media_type and r.headers["content-disposition"] == f'attachment; filename="Kim.{fmt}"'
    assert int(r.headers["content-length"]) == len(r.content)
    assert exports_in_tmp() <= before  # the temporary archive is gone
    if fmt == "zip":
        assert sorted(zipfile.ZipFile(io.BytesIO(r.content)).namelist()) == ["Kim/reference.wav", "Kim/transcript.txt", "Kim/voice.json"]
    else:
        assert sorted(tarfile.open(fileobj=io.BytesIO(r.content)).getnames()) == ["Kim/reference.wav", "Kim/transcript.txt", "Kim/voice.json"]
    copy = f"kim-{fmt.replace('.', '-')}"
    made = import_archive(client, r.content, f"Kim.{fmt}", name=copy)
    assert made.status_code == 201, made.text
    card = made.json()
    assert card["name"] == copy and card["source"] == "import" and card["transcript"] == "Hello, this is my voice."
    assert "base" in card["models"]
    assert clip_bytes(client.get(f"/v1/audio/voices/{copy}/reference").content) == clip_bytes(client.get("/v1/audio/voices/Kim/reference").content)
    assert_error(import_archive(client, r.content, name=copy), 409, "already exists")
    again = import_archive(client, r.content, name=copy, overwrite="true")
    assert again.status_code == 201, again.text


def test_import_keeps_the_exported_name_unless_told(client):
    archive = client.get("/v1/audio/voices/Kim/export").content
    assert_error(import_archive(client, archive), 409, "voice 'Kim' already exists")
    renamed = zipfile.ZipFile(io.BytesIO(archive))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for member in renamed.namelist():
            zf.writestr(member.replace("Kim/", ""), renamed.read(member).replace(b'"name": "Kim"', b'"name": "Kimmy"'))
    r = import_archive(client, buf.getvalue())
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "Kimmy"
    client.delete("/v1/audio/voices/Kimmy")


def test_export_of_an_unknown_voice_is_404(client):
    assert_error(client.get("/v1/audio/voices/nobody/export"), 404, "no voice named 'nobody'", param="voice")
    assert_error(client.get("/v1/audio/voices/Kim/export", params={"format": "rar"}), 400, "format")


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("data", "fields", "status", "words"),
    [
        (b"this is not an archive at all", {"name": "bad"}, 400, ["not a voice archive"]),
        (_zip({"bad/voice.json": b'{"name": "bad"}'}), {}, 400, ["holds no reference.wav"]),
        (_zip({"../../evil/reference.wav": wav_clip(1.5)}), {"name": "bad"}, 400, ["unsafe path"]),
        (_zip({"bad/reference.wav": b"RIFF not audio" * 20}), {"name": "bad"}, 400, ["reference audio"]),
        (_zip({"bad/reference.wav": wav_clip(1.5), "bad/voice.json": b'{"source": "alien"}'}), {"name": "bad"}, 400, ["'source' must be one of"]),
        (_zip({"reference.wav": wav_clip(1.5)}), {}, 400, ["no name in voice.json"]),
        (_zip({"reference.wav": wav_clip(1.5)}), {"name": "../bad"}, 400, ["invalid voice name"]),
        (b"", {"name": "bad"}, 400, ["archive is empty"]),
        (b"\0" * 400_000, {"name": "bad"}, 413, ["upload", "limit"]),  # the upload limit covers this path too
    ],
)
def test_a_bad_archive_is_a_clear_4xx_and_leaves_nothing(client, home, data, fields, status, words):
    before = set(library(client))
    assert_error(import_archive(client, data, **fields), status, *words)
    assert set(library(client)) == before and "bad" not in before
    assert leftovers(home.root) == []


def test_import_needs_a_file(client):
    assert_error(client.post("/v1/audio/voices/import", data={"name": "x"}), 400, "file", param="file")


# -- design -------------------------------------------------------------------------------------
def test_design_keeps_a_voice_that_clones_and_the_seed_repeats_it(client, home):
    r = design(client, name="calm", input="Good evening. This is the voice you asked for.", language="english")
    assert r.status_code == 201, r.text
    card = r.json()
    assert card["source"] == "design" and card["type"] == "prompt" and card["description"] == CALM
    assert card["transcript"] == "Good evening. This is the voice you asked for." and card["language"] == "english"
    listed = library(client)["calm"]
    assert listed["source"] == "design" and "base" in listed["models"] and listed["duration_s"] >= 1.0
    first = clip_bytes(client.get("/v1/audio/voices/calm/reference").content)
    again = design(client, name="calm", input="Good evening. This is the voice you asked for.", language="english", overwrite=True)
    assert again.status_code == 201, again.text
    assert clip_bytes(client.get("/v1/audio/voices/calm/reference").content) == first  # same seed, same voice
    other = design(client, name="calm", input="Good evening. This is the voice you asked for.", language="english", overwrite=True, seed=4)
    assert other.status_code == 201 and clip_bytes(client.get("/v1/audio/voices/calm/reference").content) != first
    said = client.post("/v1/audio/speech", json={"model": "base", "input": "Hi.", "voice": "calm", "response_format": "wav", **FRAMES})
    assert said.status_code == 200, said.text


def test_design_without_a_sample_text_speaks_the_standard_one(client):
    r = design(client, name="plain", input=None, seed=4)
    assert r.status_code == 201, r.text
    assert r.json()["transcript"].startswith("Hello! This is the voice I was given.")


@pytest.mark.parametrize("model", ["cv", "tts-1"])  # tts-1 means the default model, cv
def test_design_on_a_model_that_cannot_is_400_naming_those_that_can(client, model):
    assert_error(design(client, name="nope", model=model), 400, "designs voices", "'cv' is a custom_voice model", "design", param="model")
    assert "nope" not in library(client)


@pytest.mark.parametrize(
    ("body", "status", "words", "param"),
    [
        ({"name": "Kim"}, 409, ["voice 'Kim' already exists"], None),
        ({"name": "../x"}, 400, ["invalid voice name"], "name"),
        ({"name": "x", "description": "  "}, 400, ["description is empty"], "description"),
        ({"name": "x", "description": "deep " * 300}, 400, ["at most 1000"], "description"),
        ({"name": "x", "model": "nope"}, 404, ["no model named 'nope'"], "model"),
        ({"name": "x", "model": "../models/design"}, 400, ["not a path"], "model"),
        ({"name": "x", "input": "   "}, 400, ["input text is empty"], "input"),
        ({"name": "x", "input": "bad \ud800 text"}, 400, ["surrogate"], "input"),
        ({"name": "x", "options": {"topk": 3}}, 400, ["'topk'"], "topk"),
        ({"name": "x", "seed": -1}, 400, ["seed"], "seed"),
        ({"name": "x", "colour": "blue"}, 400, ["colour: unknown field"], "colour"),
    ],
)
def test_bad_designs_are_clear_4xx_before_any_work(client, body, status, words, param):
    done = client.get("/health").json()["queues"].get("design", {}).get("completed", 0)
    assert_error(design(client, **body), status, *words, param=param)
    assert client.get("/health").json()["queues"].get("design", {}).get("completed", 0) == done
    assert "x" not in library(client)


# -- the queue: 429 when full, cancelled when the client hangs up ---------------------------------
def long_design(text: str = "one two three four five six seven eight nine ten eleven twelve") -> SpeechRequest:
    return SpeechRequest(text=text, model="design", design=CALM, options={"max_new_tokens": 400}, format="wav")


@pytest.fixture(scope="module")
def live(tmp_path_factory, session_tmp):
    home = design_home(tmp_path_factory.mktemp("live-home"), session_tmp, queue_size=1)
    with live_server(create_app(home)) as server:
        yield server


def design_stats(live) -> dict:
    return httpx.get(f"{live.url}/health").json()["queues"].get("design", {})


def test_design_with_a_full_queue_is_429_with_retry_after(live):
    running = live.scheduler.submit(long_design())
    waiting = None
    try:
        wait_for(lambda: design_stats(live).get("running") == 1, timeout=60)
        waiting = live.scheduler.submit(long_design("another text to wait"))
        body = {"name": "busy", "model": "design", "description": CALM, "options": DESIGN_FRAMES}
        r = httpx.post(f"{live.url}/v1/audio/voices/design", json=body, timeout=30)
        assert_error(r, 429, "busy", "server.queue_size")
        assert r.json()["error"]["type"] == "rate_limit_error" and int(r.headers["retry-after"]) >= 1
    finally:
        for job in (running, waiting):
            if job is not None:
                job.cancel()
    wait_for(lambda: design_stats(live)["running"] == 0 and design_stats(live)["waiting"] == 0)
    assert "busy" not in {v.name for v in live.app.state.koe.home.voices.list()}


def test_a_client_that_hangs_up_cancels_its_design(live):
    cancelled = design_stats(live).get("cancelled", 0)
    # seeded, so the random-weight model speaks the same long utterance every run (400 frames, a few s of work)
    body = {
        "name": "gone",
        "model": "design",
        "description": CALM,
        "seed": 7,
        "options": {"max_new_tokens": 400},
        "input": "one two three four five six seven eight nine ten",
    }
    with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=httpx.Timeout(30, read=0.5)) as http:
        http.post(f"{live.url}/v1/audio/voices/design", json=body)
    wait_for(lambda: design_stats(live).get("cancelled", 0) == cancelled + 1 and design_stats(live)["running"] == 0, timeout=30)
    assert "gone" not in {v.name for v in live.app.state.koe.home.voices.list()}  # nothing was kept


# -- auth ---------------------------------------------------------------------------------------
def test_every_new_route_needs_the_token(tmp_path, session_tmp):
    home = design_home(tmp_path / "home", session_tmp, token="s3cret-token-long-enough")
    home.voices.add("Kim", wav_clip(1.5), "Hello, this is my voice.")
    auth = {"Authorization": "Bearer s3cret-token-long-enough"}
    with TestClient(create_app(home)) as c:
        archive = c.get("/v1/audio/voices/Kim/export", headers=auth)
        assert archive.status_code == 200
        calls = [
            ("GET", "/v1/audio/voices/Kim/reference", {}),
            ("GET", "/v1/audio/voices/Kim/export", {}),
            ("POST", "/v1/audio/voices/import", {"data": {"name": "copy"}, "files": {"file": ("k.zip", archive.content)}}),
            ("POST", "/v1/audio/voices/design", {"json": {"name": "made", "model": "design", "description": CALM, "seed": 1, "options": DESIGN_FRAMES}}),
        ]
        for method, path, kw in calls:
            assert_error(c.request(method, path, **kw), 401, "missing access token")
            assert_error(c.request(method, path, headers={"Authorization": "Bearer wrong"}, **kw), 401, "invalid access token")
        for method, path, kw in calls:
            r = c.request(method, path, headers=auth, **kw)
            assert r.status_code in (200, 201), (path, r.text)
        assert {"copy", "made"} <= {v.name for v in home.voices.list()}
