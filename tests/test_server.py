"""The HTTP server in-process (`with TestClient(app)`): contract, errors, limits, auth, queueing.

Real tiny random-weight models in a real KOE_HOME; requests use a few frames (`max_new_tokens`).
The end-to-end tests against a real socket and the official client are in test_server_e2e.py.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient
from fixtures_models import model_folder

from koe.server import create_app, run
from koe.server.auth import check_binding, is_loopback
from koe.service import ConfigError, KoeHome, SpeechRequest, load_settings

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")

FRAMES = {"max_new_tokens": 4}
TEXT = "Hello there, how are you?"


def make_home(root: Path, session_tmp: Path, **server) -> KoeHome:
    """A KOE_HOME with a CustomVoice model "cv" (the default) and a Base model "base" installed."""
    settings = load_settings(root, flags={"models": {"default": "cv"}, "server": server}, environ={})
    home = KoeHome(settings)
    home.models.import_model(model_folder(session_tmp, "custom_voice"), "cv", link=True)
    home.models.import_model(model_folder(session_tmp, "base"), "base", link=True)
    return home


def wav_clip(seconds: float, rate: int = 24000) -> bytes:
    """A voiced-sounding test clip (harmonics with a syllable-like envelope) as WAV bytes."""
    t = np.arange(int(seconds * rate)) / rate
    x = sum(np.sin(2 * np.pi * f * t) / (i + 1) for i, f in enumerate((140, 280, 420, 560)))
    x = 0.3 * x * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) / np.abs(x).max()
    buf = io.BytesIO()
    sf.write(buf, x.astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def decode(data: bytes) -> tuple[str, int, float]:
    """(codec, sample rate, seconds) of an encoded file, decoded with PyAV."""
    with av.open(io.BytesIO(data)) as c:
        stream = c.streams.audio[0]
        n = sum(f.samples for f in c.decode(stream))
        return stream.codec_context.name, stream.codec_context.sample_rate, n / stream.codec_context.sample_rate


@pytest.fixture(scope="module")
def client(tmp_path_factory, session_tmp):
    home = make_home(tmp_path_factory.mktemp("home"), session_tmp, max_upload_bytes=200_000, max_reference_seconds=5.0, max_input_chars=200)
    with TestClient(create_app(home)) as c:
        yield c


def speech(client: TestClient, **body):
    return client.post("/v1/audio/speech", json={"model": "tts-1", "input": TEXT, "voice": "alloy", **FRAMES, **body})


def assert_error(r, status: int, *words: str, param: str | None = None) -> None:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    for w in words:
        assert w in err["message"], err["message"]
    if param is not None:
        assert err["param"] == param
    assert err["type"] == ("invalid_request_error" if status not in (401, 404, 429) else err["type"])


# -- contract ---------------------------------------------------------------------------------
def test_health_models_and_openapi(client):
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["models_loaded"] == ["cv"]  # the default model loads in the lifespan
    models = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert set(models) == {"cv", "base"} and models["cv"]["default"] and models["cv"]["loaded"]
    assert "serena" in models["cv"]["speakers"] and models["base"]["variant"] == "base"
    assert client.get("/v1/models/base").json()["id"] == "base"
    spec = client.get("/openapi.json").json()
    assert {"/v1/audio/speech", "/v1/models", "/v1/audio/voices", "/health"} <= set(spec["paths"])
    assert "multipart/form-data" in spec["paths"]["/v1/audio/voices"]["post"]["requestBody"]["content"]
    assert client.get("/docs").status_code == 200


def test_models_describe_voice_modes_and_options(client):
    cv = client.get("/v1/models/cv").json()
    assert cv["voice_modes"] == ["preset"] and cv["uses"]
    options = {o["name"]: o for o in cv["options"]}
    assert options["temperature"]["type"] == "float" and options["temperature"]["range"] == "> 0"
    assert client.get("/v1/models/base").json()["voice_modes"] == ["clone", "clone_without_transcript"]


def test_options_object_and_flat_aliases(client):
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "wav", "seed": 5}
    nested = client.post("/v1/audio/speech", json={**body, "options": {"max_new_tokens": 4, "subtalker_top_k": 3}})
    flat = client.post("/v1/audio/speech", json={**body, "max_new_tokens": 4, "subtalker_top_k": 3})
    assert nested.status_code == flat.status_code == 200 and nested.content == flat.content
    assert_error(client.post("/v1/audio/speech", json={**body, "options": {"max_new_tokens": 1}}), 400, "max_new_tokens=1", param="max_new_tokens")
    assert_error(client.post("/v1/audio/speech", json={**body, "options": {"topk": 3}}), 400, "'topk'", "top_k", param="topk")
    assert_error(client.post("/v1/audio/speech", json={**body, "top_k": 3, "options": {"top_k": 4}}), 400, "given both", param="top_k")


def test_speech_wav_with_openai_voice_and_koe_fields(client):
    r = speech(client, response_format="wav", seed=7, language="english")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav" and r.headers["x-koe-voice"] == "serena"  # alloy -> serena
    codec, rate, seconds = decode(r.content)
    assert (codec, rate) == ("pcm_s16le", 24000)
    assert seconds == pytest.approx(float(r.headers["x-koe-duration"]), abs=1e-3)
    again = speech(client, response_format="wav", seed=7, language="english")
    assert again.content == r.content  # a seeded request is reproducible (never batched)
    preset = speech(client, voice="ryan", response_format="pcm", seed=7)
    assert preset.headers["x-koe-voice"] == "ryan" and len(preset.content) % 2 == 0


@pytest.mark.parametrize(("fmt", "codec"), [("mp3", "mp3"), ("opus", "opus"), ("aac", "aac"), ("flac", "flac"), ("wav", "pcm_s16le"), ("m4a", "aac")])
def test_every_format_streams(client, fmt, codec):
    with client.stream(
        "POST",
        "/v1/audio/speech",
        json={"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": fmt, "stream_format": "audio", "max_new_tokens": 10},
    ) as r:
        assert r.status_code == 200 and "content-length" not in r.headers
        data = b"".join(r.iter_bytes())
    got, _, seconds = decode(data)
    assert got.startswith(codec) and seconds > 0.3


def test_speed_keeps_the_words_and_changes_the_length(client):
    slow = speech(client, response_format="wav", seed=3)
    fast = speech(client, response_format="wav", seed=3, speed=2.0)
    assert decode(fast.content)[2] == pytest.approx(decode(slow.content)[2] / 2, abs=0.03)


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "status", "words", "param"),
    [
        ({"input": "   "}, 400, ["input text is empty"], "input"),
        ({"voice": "nobody"}, 404, ["unknown voice 'nobody'", "serena"], "voice"),
        ({"voice": ""}, 400, ["voice is empty"], "voice"),
        ({"model": "nope"}, 404, ["no model named 'nope'", "cv"], "model"),
        ({"model": "../models/cv"}, 400, ["not a path"], "model"),
        ({"response_format": "ogg"}, 400, ["unsupported format 'ogg'", "mp3"], "response_format"),
        ({"speed": 0.1}, 400, ["speed", "greater than or equal to 0.25"], "speed"),
        ({"speed": 4.5}, 400, ["speed", "less than or equal to 4"], "speed"),
        ({"input": "word " * 60}, 413, ["at most 200"], "input"),
        ({"temperature": -1}, 400, ["temperature", "> 0"], "temperature"),
        ({"stream_format": "video"}, 400, ["stream_format"], "stream_format"),
        ({"colour": "blue"}, 400, ["colour: unknown field"], "colour"),
        ({"model": "base"}, 400, ["'alloy'", "library voice"], "voice"),
    ],
)
def test_bad_speech_requests_are_clear_4xx(client, body, status, words, param):
    assert_error(speech(client, **body), status, *words, param=param)


def test_bad_bodies(client):
    r = client.post("/v1/audio/speech", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(r, 400, "not valid JSON")
    assert_error(client.post("/v1/audio/speech", json={"input": "hi"}), 400, "model: Field required")
    big = client.post("/v1/audio/speech", content=b"x" * 300_000, headers={"content-type": "application/json"})
    assert_error(big, 413, "larger than")
    assert_error(client.get("/v1/nothing"), 404, "no such endpoint")


# -- voices -----------------------------------------------------------------------------------
def upload(client: TestClient, name: str, data: bytes, **fields):
    return client.post("/v1/audio/voices", data={"name": name, **fields}, files={"file": ("clip.wav", data, "audio/wav")})


def test_voice_upload_list_use_and_delete(client):
    r = upload(client, "Kim", wav_clip(2.0), transcript="Hello, this is my voice.")
    assert r.status_code == 201, r.text
    assert r.json()["transcript"] == "Hello, this is my voice." and r.json()["duration_s"] == pytest.approx(2.0)
    assert "Kim" in [v["name"] for v in client.get("/v1/audio/voices").json()["data"]]
    assert_error(upload(client, "Kim", wav_clip(2.0)), 409, "already exists")
    said = speech(client, model="base", voice="kim", response_format="flac")
    assert said.status_code == 200, said.text
    assert decode(said.content)[:2] == ("flac", 24000) and said.headers["x-koe-voice"] == "Kim"
    assert client.get("/health").json()["models_loaded"] == ["base"]  # models.resident_limit = 1: cv made room
    assert client.delete("/v1/audio/voices/kim").json() == {"id": "Kim", "object": "audio.voice.deleted", "deleted": True}  # OpenAI's VoiceDeleted
    assert_error(speech(client, model="base", voice="kim"), 404, "unknown voice 'kim'")
    assert_error(client.delete("/v1/audio/voices/kim"), 404, "no voice named 'kim'")


@pytest.mark.parametrize(
    ("name", "data", "status", "words"),
    [
        ("../x", wav_clip(1.0), 400, ["invalid voice name '../x'"]),
        (".hidden", wav_clip(1.0), 400, ["invalid voice name"]),
        ("corrupt", b"RIFF\x00\x00\x00\x00WAVEnot really audio" * 10, 400, ["reference audio"]),
        ("long", wav_clip(6.0, rate=8000), 400, ["at most 5 s"]),
        ("short", wav_clip(0.2), 400, ["at least"]),
        ("huge", wav_clip(5.0, rate=48000), 413, ["upload", "limit"]),
    ],
)
def test_bad_uploads_are_clear_4xx(client, name, data, status, words):
    assert_error(upload(client, name, data), status, *words)
    assert name not in [v["name"] for v in client.get("/v1/audio/voices").json()["data"]]


def test_voice_names_cannot_escape_the_data_folder(client):
    assert_error(client.delete("/v1/audio/voices/..%2Fx"), 400, "invalid voice name '../x'")
    assert_error(client.get("/v1/audio/voices/..%2F..%2Fkoe.db"), 400, "invalid voice name")
    assert_error(client.post("/v1/audio/voices", data={"name": "x"}), 400, "file")


# -- queue ------------------------------------------------------------------------------------
def long_request(text: str = "one two three four five six seven eight nine ten eleven twelve") -> SpeechRequest:
    return SpeechRequest(text=text, model="cv", speaker="ryan", options={"max_new_tokens": 400}, format="wav")


def wait_for(cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_full_queue_answers_429_with_retry_after(tmp_path, session_tmp):
    home = make_home(tmp_path / "home", session_tmp, queue_size=1)
    with TestClient(create_app(home)) as c:
        scheduler = c.app.state.koe.scheduler
        running = scheduler.submit(long_request())
        wait_for(lambda: scheduler.stats()["cv"].running == 1)
        waiting = scheduler.submit(long_request("another text to wait"))
        r = speech(c)
        assert_error(r, 429, "busy", "server.queue_size")
        assert r.json()["error"]["type"] == "rate_limit_error" and int(r.headers["retry-after"]) >= 1
        waiting.cancel()
        running.cancel()
        wait_for(lambda: scheduler.stats()["cv"].running == 0)
        assert speech(c).status_code == 200  # a slot is free again
        wait_for(lambda: scheduler.stats()["cv"].completed == 1)  # counted just after the answer is handed over
        assert scheduler.stats()["cv"].cancelled == 2


def test_compatible_requests_are_batched(tmp_path, session_tmp):
    home = make_home(tmp_path / "home", session_tmp)
    with TestClient(create_app(home, batch_window=0.05)) as c:
        scheduler = c.app.state.koe.scheduler
        blocker = scheduler.submit(long_request())
        wait_for(lambda: scheduler.stats()["cv"].running == 1)
        texts = ["Hi.", "Hello there.", "Good morning to you.", "Bye."]
        jobs = [scheduler.submit(SpeechRequest(text=t, model="cv", speaker="ryan", options=dict(FRAMES))) for t in texts]
        odd = scheduler.submit(SpeechRequest(text="Other voice.", model="cv", speaker="vivian", options=dict(FRAMES)))
        blocker.cancel()
        outputs = [j.future.result(60) for j in jobs]
        assert [o.metadata["batch_size"] for o in outputs] == [4, 4, 4, 4]
        assert odd.future.result(60).metadata.get("batch_size", 1) == 1  # another speaker: its own generation
        assert scheduler.stats()["cv"].largest_batch == 4


def test_concurrent_streamed_requests_are_batched(tmp_path, session_tmp):
    """Streamed HTTP requests that wait together share one generation; each response is its own
    complete stream. One with its own seed runs alone (kept reproducible), after them."""
    home = make_home(tmp_path / "home", session_tmp)
    with TestClient(create_app(home, batch_window=0.05)) as c:
        scheduler = c.app.state.koe.scheduler
        blocker = scheduler.submit(long_request())
        wait_for(lambda: scheduler.stats()["cv"].running == 1)
        texts = ["Hi.", "Hello there.", "Good morning to you.", "A seeded stream."]
        bodies: dict[int, bytes] = {}

        def client(i: int) -> None:
            body = {"model": "cv", "input": texts[i], "voice": "ryan", "response_format": "wav", "stream_format": "audio", "max_new_tokens": 10}
            if i == len(texts) - 1:
                body["seed"] = 11
            with c.stream("POST", "/v1/audio/speech", json=body) as r:
                assert r.status_code == 200
                bodies[i] = b"".join(r.iter_bytes())

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(texts))]
        for t in threads:
            t.start()
        wait_for(lambda: scheduler.stats()["cv"].waiting == len(texts))
        blocker.cancel()
        for t in threads:
            t.join(60)
        wait_for(lambda: scheduler.stats()["cv"].batches == 3)  # counted just after the streams end
        assert scheduler.stats()["cv"].largest_batch == len(texts) - 1  # the seeded stream was not in the batch
        for i in range(len(texts)):
            codec, rate, seconds = decode(bodies[i])
            assert codec == "pcm_s16le" and seconds == pytest.approx(9 * 0.08, abs=0.01)  # max_new_tokens=10: 9 frames


def test_the_batch_window_comes_from_the_settings(tmp_path, session_tmp):
    with TestClient(create_app(make_home(tmp_path / "a", session_tmp))) as c:
        assert c.app.state.koe.scheduler.batch_window == 0.05  # server.batch_window_ms's default
    with TestClient(create_app(make_home(tmp_path / "b", session_tmp, batch_window_ms=200))) as c:
        assert c.app.state.koe.scheduler.batch_window == 0.2


# -- safety -----------------------------------------------------------------------------------
def test_auth_on_and_off(tmp_path, session_tmp):
    home = make_home(tmp_path / "home", session_tmp, token="s3cret")
    with TestClient(create_app(home)) as c:
        assert_error(c.get("/v1/models"), 401, "missing access token")
        r = c.get("/v1/models", headers={"Authorization": "Bearer wrong"})
        assert_error(r, 401, "invalid access token")
        assert r.headers["www-authenticate"] == "Bearer"
        assert_error(c.get("/v1/models", headers={"Authorization": "Basic s3cret"}), 401, "invalid access token")
        assert_error(speech(c), 401)
        assert c.get("/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/health").status_code == 200  # liveness stays open
    # and without a token every endpoint is open (the module's client shows it)


def test_binding_beyond_loopback_needs_a_token(tmp_path):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    open_settings = load_settings(tmp_path, flags={"server": {"host": "0.0.0.0"}}, environ={})
    with pytest.raises(ConfigError, match="needs an access token"):
        check_binding(open_settings.server)
    with pytest.raises(ConfigError, match="needs an access token"):
        run(open_settings)  # refuses before anything listens
    with pytest.raises(ConfigError, match="weak access token"):
        check_binding(load_settings(tmp_path, flags={"server": {"host": "0.0.0.0", "token": "t"}}, environ={}).server)
    check_binding(load_settings(tmp_path, flags={"server": {"host": "0.0.0.0", "token": "a-strong-token-0123456789"}}, environ={}).server)
    check_binding(load_settings(tmp_path, environ={}).server)  # 127.0.0.1 by default


def test_conversions_take_uploads_to_the_limit_and_refuse_a_model_that_does_not_convert(client):
    """POST /v1/audio/conversions: each upload up to server.max_upload_bytes (the body may hold two,
    past a speech body's limit), a larger one 413 naming the field, and a model without
    `capabilities.conversion` a 400 naming it (the conversion itself: tests/test_toy_family.py)."""
    source, clip = wav_clip(3.0), wav_clip(2.0)  # 144 KB and 96 KB: together over one upload's 200 KB
    r = client.post("/v1/audio/conversions", files={"file": ("s.wav", source), "reference": ("r.wav", clip)}, data={"model": "tts-1"})
    assert_error(r, 400, "does not convert voices", param="model")
    big = client.post("/v1/audio/conversions", files={"file": ("s.wav", wav_clip(5.0))}, data={"voice": "x"})  # 240 KB
    assert_error(big, 413, "larger than 200000 bytes", param="file")
    missing = client.post("/v1/audio/conversions", files={"reference": ("r.wav", clip)}, data={"voice": "x"})
    assert_error(missing, 400, "file field 'file'", param="file")
