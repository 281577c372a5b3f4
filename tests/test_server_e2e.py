"""End to end: a real uvicorn server on 127.0.0.1 (random free port) and the official `openai` client.

Tiny random-weight models; each request asks for a few frames (`extra_body={"max_new_tokens": N}`).
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import openai
import pytest
import uvicorn
from test_server import TEXT, decode, long_request, make_home, wait_for, wav_clip

from koe.server import create_app
from koe.server.app import uvicorn_config
from koe.service.config.settings import ServerSettings

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")

FEW = {"max_new_tokens": 6}


@dataclass
class LiveServer:
    url: str
    app: object
    server: uvicorn.Server

    @property
    def scheduler(self):
        return self.app.state.koe.scheduler

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/health").json()["queues"].get("cv", {})

    def client(self, **kw) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=kw.pop("api_key", "unused"), max_retries=0, **kw)


@contextlib.contextmanager
def live_server(app, settings: ServerSettings | None = None) -> Iterator[LiveServer]:
    """Serve `app` with uvicorn in a thread on a free loopback port; stop it at the end.

    With `settings`, uvicorn is configured as `koe serve` configures it (`uvicorn_config`: the
    guarded protocol with its header deadline and connection cap)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if settings is None:
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    else:
        config = uvicorn_config(app, settings)
        config.timeout_graceful_shutdown = 2
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), timeout=30)
        assert server.started, "the server did not start"
        yield LiveServer(f"http://127.0.0.1:{port}", app, server)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture(scope="module")
def live(tmp_path_factory, session_tmp):
    home = make_home(tmp_path_factory.mktemp("home"), session_tmp, queue_size=16)
    with live_server(create_app(home, first_chunk_s=0.16, chunk_s=0.32)) as s:
        yield s


# -- formats ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "codec", "rate"),
    [("mp3", "mp3", 24000), ("opus", "opus", 48000), ("aac", "aac", 24000), ("flac", "flac", 24000), ("wav", "pcm_s16le", 24000), ("pcm", None, 24000)],
)
def test_every_response_format_is_really_that_format(live, fmt, codec, rate):
    raw = live.client().audio.speech.with_raw_response.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt, extra_body=FEW)
    data = raw.content
    expected = float(raw.headers["x-koe-duration"])
    assert expected > 0
    if fmt == "pcm":  # raw s16le mono at 24 kHz, no header
        assert raw.headers["content-type"] == "audio/pcm" and len(data) % 2 == 0
        assert len(data) / 2 / 24000 == pytest.approx(expected, abs=1e-3)
        return
    got_codec, got_rate, seconds = decode(data)
    assert got_codec.startswith(codec) and got_rate == rate
    assert seconds == pytest.approx(expected, abs=0.08)  # encoders pad by up to a frame or two


# -- streaming --------------------------------------------------------------------------------
def test_streamed_bytes_arrive_before_synthesis_ends(live):
    client = live.client()
    chunks, first_at, busy_at_first = [], None, None
    started = time.monotonic()
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="echo", input=TEXT, response_format="mp3", stream_format="audio", extra_body={"max_new_tokens": 40, "seed": 1}
    ) as resp:  # seeded: unseeded, the random-weight model now and then ends the utterance early (0.53 s seen once)
        assert resp.headers["content-type"] == "audio/mpeg" and "content-length" not in resp.headers
        for chunk in resp.iter_bytes():
            if first_at is None:
                first_at = time.monotonic() - started
                busy_at_first = live.stats()["running"]  # the generation is still going
            chunks.append(chunk)
    total = time.monotonic() - started
    assert busy_at_first == 1, "the first bytes came only after the synthesis had finished"
    assert first_at < total
    codec, rate, seconds = decode(b"".join(chunks))
    assert codec.startswith("mp3") and rate == 24000 and seconds > 1.0  # ~40 frames of 80 ms


def test_sse_events(live):
    with live.client().audio.speech.with_streaming_response.create(
        model="tts-1", voice="nova", input=TEXT, response_format="wav", stream_format="sse", extra_body={"max_new_tokens": 12, "seed": 1}
    ) as resp:  # seeded: unseeded, the random-weight model now and then ends the utterance early (0.56 s seen once)
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: ") :]) for line in resp.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"} and len(kinds) >= 3
    assert events[-1]["usage"]["output_tokens"] > 0 and events[-1]["usage"]["input_tokens"] == len(TEXT)
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    codec, rate, seconds = decode(audio)
    assert (codec, rate) == ("pcm_s16le", 24000) and seconds == pytest.approx(12 * 0.08, abs=0.1)


# -- voices -----------------------------------------------------------------------------------
def test_voice_created_by_upload_then_used(live):
    r = httpx.post(
        f"{live.url}/v1/audio/voices",
        data={"name": "narrator", "transcript": "Hello, this is my voice."},
        files={"file": ("me.wav", wav_clip(2.0), "audio/wav")},
    )
    assert r.status_code == 201, r.text
    client = live.client()
    data = client.audio.speech.create(model="base", voice="narrator", input=TEXT, response_format="opus", extra_body=FEW).read()
    assert decode(data)[:2] == ("opus", 48000)
    # the voice object form {"id": ...} works too
    raw = client.audio.speech.with_raw_response.create(model="base", voice={"id": "narrator"}, input=TEXT, response_format="wav", extra_body=FEW)
    assert raw.headers["x-koe-voice"] == "narrator"
    assert httpx.delete(f"{live.url}/v1/audio/voices/narrator").status_code == 200


# -- concurrency ------------------------------------------------------------------------------
def test_sixteen_concurrent_requests_all_answered(live):
    client = live.client()
    before = live.stats().get("completed", 0)

    def one(i: int) -> tuple[int, str, bytes]:
        raw = client.audio.speech.with_raw_response.create(
            model="tts-1", voice="alloy", input=f"Request number {i}.", response_format="wav", extra_body={"max_new_tokens": 4}
        )
        return i, raw.headers["x-koe-batch-size"], raw.content

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    assert sorted(i for i, _, _ in results) == list(range(16))
    for _, _, data in results:
        assert decode(data)[:2] == ("pcm_s16le", 24000)
    assert max(int(b) for _, b, _ in results) > 1, "no requests were batched"
    wait_for(lambda: live.stats()["completed"] - before == 16, timeout=5)  # counted just after the answers are handed over
    assert live.stats()["failed"] == 0


def test_full_queue_gives_429_with_retry_after(live):
    scheduler = live.scheduler
    running = scheduler.submit(long_request())
    wait_for(lambda: live.stats()["running"] == 1)
    waiting = [scheduler.submit(long_request(f"waiting number {i}")) for i in range(16)]
    try:
        with pytest.raises(openai.RateLimitError) as e:
            live.client().audio.speech.create(model="tts-1", voice="alloy", input=TEXT, extra_body=FEW)
        assert e.value.status_code == 429 and int(e.value.response.headers["retry-after"]) >= 1
        assert "busy" in e.value.message
    finally:
        for job in [running, *waiting]:
            job.cancel()
    wait_for(lambda: live.stats()["running"] == 0 and live.stats()["waiting"] == 0)


def test_client_disconnect_cancels_generation(live):
    # seeded, so how long the random-weight model speaks (~14 s of audio, ~2 s of work) is the same every run:
    # it must still be speaking when the client hangs up
    body = {"model": "tts-1", "voice": "alloy", "input": "one two three four five six seven eight nine ten", "max_new_tokens": 400, "seed": 7}
    # streaming: read the first bytes, then hang up
    cancelled = live.stats().get("cancelled", 0)
    with httpx.Client(timeout=30) as http, http.stream("POST", f"{live.url}/v1/audio/speech", json={**body, "stream_format": "audio"}) as r:
        assert r.status_code == 200
        next(r.iter_raw())
        hung_up = time.monotonic()
    # "cancelled" (not "completed") means the engine stopped before the utterance's last frame
    wait_for(lambda: live.stats()["cancelled"] == cancelled + 1 and live.stats()["running"] == 0, timeout=20)
    assert time.monotonic() - hung_up < 5
    # one-shot: the client gives up while waiting; the server notices and stops the engine
    with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=httpx.Timeout(30, read=0.5)) as http:
        http.post(f"{live.url}/v1/audio/speech", json=body)
    hung_up = time.monotonic()
    wait_for(lambda: live.stats()["cancelled"] == cancelled + 2 and live.stats()["running"] == 0, timeout=20)
    assert time.monotonic() - hung_up < 5


# -- errors and auth --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"input": ""}, openai.BadRequestError, "input text is empty"),
        ({"voice": "nobody"}, openai.NotFoundError, "unknown voice 'nobody'"),
        ({"model": "nope"}, openai.NotFoundError, "no model named 'nope'"),
        ({"response_format": "ogg"}, openai.BadRequestError, "unsupported format 'ogg'"),
        ({"speed": 5.0}, openai.BadRequestError, "speed"),
        ({"input": "x" * 5000}, openai.APIStatusError, "at most 4096"),
    ],
)
def test_bad_inputs_through_the_openai_client(live, kwargs, error, words):
    args = {"model": "tts-1", "voice": "alloy", "input": TEXT, "extra_body": FEW, **kwargs}
    with pytest.raises(error) as e:
        live.client().audio.speech.create(**args)
    assert 400 <= e.value.status_code < 500 and words in e.value.message


def test_bad_uploads_over_the_socket(live):
    def post(name: str, data: bytes) -> httpx.Response:
        return httpx.post(f"{live.url}/v1/audio/voices", data={"name": name}, files={"file": ("x.wav", data, "audio/wav")})

    bad_name = post("../x", wav_clip(1.0))
    assert bad_name.status_code == 400 and "invalid voice name '../x'" in bad_name.json()["error"]["message"]
    corrupt = post("broken", b"\x00\x01garbage" * 100)
    assert corrupt.status_code == 400 and "reference audio" in corrupt.json()["error"]["message"]


def test_auth_with_a_real_client(tmp_path, session_tmp):
    home = make_home(tmp_path / "home", session_tmp, token="s3cret")
    with live_server(create_app(home)) as s:
        for key in ("unused", "wrong"):
            with pytest.raises(openai.AuthenticationError) as e:
                s.client(api_key=key).models.list()
            assert e.value.status_code == 401
        assert httpx.get(f"{s.url}/v1/models").status_code == 401
        assert {m.id for m in s.client(api_key="s3cret").models.list()} == {"cv", "base"}
        data = s.client(api_key="s3cret").audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav", extra_body=FEW)
        assert decode(data.read())[0] == "pcm_s16le"
