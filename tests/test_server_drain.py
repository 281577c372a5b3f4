"""Shutting down with requests in flight: a real `koe serve` process and a real SIGTERM.

What finishes within server.shutdown_grace_s is answered in full; what cannot gets a JSON 503 with
Retry-After (one-shot), an `error` event (SSE) or a cut connection (raw audio: the client sees an
incomplete transfer, never a short file that looks whole); the process exits soon after the grace.
In-process tests cover the same paths without a process, and SSE streams ending with an `error`
event for any failure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from fixtures_models import model_folder
from test_server import TEXT, decode, long_request, make_home, wait_for

from koe.server import create_app
from koe.server.state import Drain
from koe.server.streams import sse_events
from koe.service.errors import InvalidRequest
from koe.service.synthesis.requests import StreamChunk

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")

GRACE = 5.0
LONG = {"max_new_tokens": 400}  # far longer than the grace on any CPU...
LONG_TEXT = " ".join(["A long sentence that keeps the model talking for a good while."] * 8)  # ...and than the runaway guard's cap


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path, session_tmp):
    """`koe serve` in its own process over a home with three CustomVoice models (three queues), so a
    one-shot request, an SSE stream and a raw stream all run at once. Yields (url, process)."""
    root = tmp_path / "home"
    home = make_home(root, session_tmp)
    for name in ("cv2", "cv3"):
        home.models.import_model(model_folder(session_tmp, "custom_voice"), name, link=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")}
    env |= {"KOE_HOME": str(root), "KOE_MODELS__DEFAULT": "cv", "KOE_MODELS__RESIDENT_LIMIT": "4", "KOE_SERVER__SHUTDOWN_GRACE_S": str(GRACE)}
    log = open(tmp_path / "serve.log", "w+b")  # noqa: SIM115 - read after the process ends
    proc = subprocess.Popen([sys.executable, "-m", "koe.cli.main", "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"koe serve exited: {(tmp_path / 'serve.log').read_text()}"
            assert time.monotonic() < deadline, "koe serve did not start"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url, proc, tmp_path / "serve.log"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


def lane(url: str, model: str) -> dict:
    return httpx.get(f"{url}/health", timeout=5).json()["queues"].get(model, {})


def test_sigterm_drains_finishes_what_it_can_and_refuses_the_rest_cleanly(served):
    url, proc, log_path = served
    results: dict[str, object] = {}
    sse_started, raw_started = threading.Event(), threading.Event()
    http = httpx.Client(timeout=60)

    def one_shot(key: str, text: str = TEXT, **body) -> None:
        try:
            results[key] = http.post(f"{url}/v1/audio/speech", json={"model": "cv", "input": text, "voice": "ryan", "response_format": "wav", **body})
        except httpx.HTTPError as e:
            results[key] = e

    def sse() -> None:
        events = []
        body = {"model": "cv2", "input": LONG_TEXT, "voice": "ryan", "response_format": "wav", "stream_format": "sse", **LONG}
        with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=60) as r:
            results["sse_status"] = r.status_code
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    sse_started.set()
        results["sse"] = events

    def raw() -> None:
        got = b""
        body = {"model": "cv3", "input": LONG_TEXT, "voice": "ryan", "response_format": "pcm", "stream_format": "audio", **LONG}
        try:
            with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=60) as r:
                results["raw_status"] = r.status_code
                for chunk in r.iter_raw():
                    got += chunk
                    raw_started.set()
            results["raw"] = ("complete", got)
        except httpx.RemoteProtocolError:
            results["raw"] = ("cut", got)

    threads = [threading.Thread(target=sse), threading.Thread(target=raw)]
    for t in threads:
        t.start()
    assert sse_started.wait(60) and raw_started.wait(60), "the streams did not start"
    # on the "cv" queue: a short request running, two long ones (seeded: never batched with it) waiting behind it
    threads.append(threading.Thread(target=one_shot, args=("short",), kwargs={"max_new_tokens": 10}))
    threads[-1].start()
    wait_for(lambda: lane(url, "cv").get("running") == 1, timeout=30)
    for key in ("long_running", "long_waiting"):
        threads.append(threading.Thread(target=one_shot, args=(key,), kwargs={"text": LONG_TEXT, "seed": 1, **LONG}))
        threads[-1].start()
    wait_for(lambda: sum(lane(url, "cv").get(k, 0) for k in ("running", "waiting", "completed")) == 3, timeout=30)  # all three queued

    os.kill(proc.pid, signal.SIGTERM)
    signalled = time.monotonic()
    time.sleep(0.5)
    with pytest.raises(httpx.TransportError):  # it stopped accepting
        httpx.get(f"{url}/health", timeout=2)
    proc.wait(GRACE + 15)
    exited = time.monotonic() - signalled
    for t in threads:
        t.join(30)
    log = log_path.read_text(errors="replace")
    http.close()

    assert exited < GRACE + 6, f"took {exited:.1f} s to exit"
    assert proc.returncode in (0, -signal.SIGTERM), log
    short = results["short"]
    assert isinstance(short, httpx.Response) and short.status_code == 200, short
    assert decode(short.content)[0] == "pcm_s16le" and float(short.headers["x-koe-duration"]) > 0
    for key in ("long_running", "long_waiting"):
        r = results[key]
        assert isinstance(r, httpx.Response), r
        assert r.status_code == 503 and r.headers["content-type"] == "application/json" and int(r.headers["retry-after"]) >= 1, r.text
        assert r.json()["error"] == {"message": r.json()["error"]["message"], "type": "server_error", "param": None, "code": "shutting_down"}
        assert "shutting down" in r.json()["error"]["message"]
    events = results["sse"]
    assert results["sse_status"] == 200 and events[-1]["type"] == "error", events[-1:]
    assert events[-1]["error"]["code"] == "shutting_down" and set(events[-1]["error"]) == {"message", "type", "param", "code"}
    assert {e["type"] for e in events[:-1]} == {"speech.audio.delta"}
    how, got = results["raw"]
    assert results["raw_status"] == 200 and how == "cut" and got, "a raw stream that could not finish must not look complete"
    assert "Internal Server Error" not in log and "Traceback" not in log, log


# -- in process ---------------------------------------------------------------------------------
def test_requests_during_the_drain_get_503_and_in_flight_ones_are_cancelled_at_its_end(tmp_path, session_tmp):
    home = make_home(tmp_path / "home", session_tmp)
    with TestClient(create_app(home)) as c:
        drain: Drain = c.app.state.drain
        scheduler = c.app.state.koe.scheduler
        blocker = scheduler.submit(long_request(LONG_TEXT))  # runs through the whole test
        wait_for(lambda: scheduler.stats()["cv"].running == 1)
        body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "max_new_tokens": 4}
        answers = {}
        threads = [
            threading.Thread(target=lambda k=k, extra=extra: answers.__setitem__(k, c.post("/v1/audio/speech", json={**body, **extra})))
            for k, extra in (("one_shot", {}), ("sse", {"stream_format": "sse"}))
        ]
        for t in threads:
            t.start()
        wait_for(lambda: scheduler.stats()["cv"].waiting == 2)
        drain.begin()
        refused = c.get("/health")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5" and refused.json()["error"]["code"] == "shutting_down"
        time.sleep(0.3)
        assert all(t.is_alive() for t in threads)  # in-flight requests keep going during the grace
        drain.expire()
        for t in threads:
            t.join(10)
        blocker.cancel()
        one_shot = answers["one_shot"]
        assert one_shot.status_code == 503 and int(one_shot.headers["retry-after"]) >= 1 and one_shot.json()["error"]["code"] == "shutting_down"
        # the SSE request had not started streaming: it gets the same JSON 503
        assert answers["sse"].status_code == 503 and answers["sse"].json()["error"]["code"] == "shutting_down"
        wait_for(lambda: scheduler.stats()["cv"].running == 0 and scheduler.stats()["cv"].waiting == 0)


class FakeStream:
    """A stream job whose second chunk raises `error`."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.cancelled = error, False

    def next_chunk(self, timeout=None):
        raise self.error

    def cancel(self) -> None:
        self.cancelled = True


def events_of(job, drain: Drain | None = None) -> list[dict]:
    first = StreamChunk(data=b"\x00\x01" * 8, samples=np.zeros(8, np.float32), sample_rate=24000)

    async def collect():
        return [json.loads(e[len(b"data: ") :]) async for e in sse_events(job, first, 5, drain or Drain())]

    return asyncio.run(collect())


@pytest.mark.parametrize(
    ("error", "status", "kind", "code"),
    [
        (RuntimeError("engine bug"), 500, "server_error", "internal_error"),
        (MemoryError("out of memory"), 500, "server_error", "internal_error"),
        (InvalidRequest("bad text", param="input"), 400, "invalid_request_error", "invalid_request"),
    ],
)
def test_an_sse_stream_ends_with_an_error_event_for_any_failure(error, status, kind, code, caplog):
    job = FakeStream(error)
    with caplog.at_level(logging.ERROR, logger="koe.server.streams"):
        events = events_of(job)
    assert [e["type"] for e in events] == ["speech.audio.delta", "error"]
    assert base64.b64decode(events[0]["audio"]) == b"\x00\x01" * 8
    err = events[-1]["error"]
    assert (err["type"], err["code"]) == (kind, code) and str(error) in err["message"]
    assert job.cancelled  # the generation is stopped
    if status == 500:
        assert "an SSE stream failed" in caplog.text and type(error).__name__ in caplog.text


def test_an_sse_stream_cut_by_the_drain_ends_with_a_503_event():
    drain = Drain(0.0)
    drain.expire()
    events = events_of(FakeStream(AssertionError("never read")), drain)
    assert [e["type"] for e in events] == ["speech.audio.delta", "error"]
    assert events[-1]["error"]["code"] == "shutting_down" and events[-1]["error"]["type"] == "server_error"
