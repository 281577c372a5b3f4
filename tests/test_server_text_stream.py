"""`WS /v1/audio/speech/stream`: streamed text in, audio out, on a real `koe serve` with a real WebSocket client.

The toy sine family (tests/plugins/koe_sine, installed for real: tests/toy_family.py) has no
streamed-text decoding of its own, so each sentence is spoken once it is complete: audio must
arrive before the text ends. Then the metadata at the end, the error message and close code for
bad start messages and bad text, and the guards a WebSocket must pass like any HTTP request:
Host, Origin, the access token, the whole text's length, the idle timeout, the queue limit, a
client that goes away (its generation is cancelled) and the shutdown's drain.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import socket
import time

import httpx
import pytest
from toy_family import koe, start_sine_serve
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from koe.server.routes.speech_stream import PATH

pytest_plugins = ["toy_family"]  # sine_site, sine_model
pytestmark = pytest.mark.slow  # pip, and koe serve in real processes (about 45 s in all)

RATE = 16000  # the sine model's sample rate; pcm is s16le mono at it
WORD_S = 0.2  # the sine model speaks one 0.2 s tone per word
HEADER_TIMEOUT = 1.0  # the HTTP header deadline must not cut a WebSocket once it is upgraded
START = {"type": "start", "model": "sine", "voice": "low", "response_format": "pcm", "seed": 7}


@pytest.fixture(scope="module")
def server(sine_site, sine_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("ws-serve")
    s = start_sine_serve(sine_site, sine_model, root, header_timeout_s=HEADER_TIMEOUT, body_timeout_s=2.0, max_input_chars=120)
    yield s
    s.stop()


def ws_url(server, path: str = PATH) -> str:
    return server.url.replace("http://", "ws://") + path


def open_stream(server, **kw) -> ClientConnection:
    return connect(ws_url(server), open_timeout=10, additional_headers=kw.pop("headers", server.headers()), **kw)


def receive(ws: ClientConnection, timeout: float = 10.0) -> bytes | dict:
    message = ws.recv(timeout=timeout)
    return message if isinstance(message, bytes) else json.loads(message)


def rest_of(ws: ClientConnection) -> tuple[bytes, list[dict]]:
    """Everything the server sends until it closes: the audio, and the JSON messages."""
    audio, events = b"", []
    try:
        while True:
            message = receive(ws)
            if isinstance(message, bytes):
                audio += message
            else:
                events.append(message)
    except ConnectionClosed:
        pass
    return audio, events


def refused(ws: ClientConnection) -> tuple[dict, int]:
    """The error message a stream ends with, and the close code after it."""
    _, events = rest_of(ws)
    assert [e["type"] for e in events][-1:] == ["error"], events
    return events[-1], ws.close_code


def send(ws: ClientConnection, **message) -> None:
    ws.send(json.dumps(message))


# -- speaking ----------------------------------------------------------------------------------
def test_each_sentence_is_spoken_as_soon_as_it_is_complete_and_the_metadata_comes_at_the_end(server, sine_site):
    with open_stream(server) as ws:
        send(ws, **START)
        started = receive(ws)
        assert started == {
            "type": "speech.started",
            "model": "sine",
            "voice": "low",
            "seed": 7,
            "response_format": "pcm",
            "media_type": "audio/pcm",
            "sample_rate": RATE,
            "text_stream": False,
        }
        send(ws, type="text", text="Hello there")
        send(ws, type="text", text=". How ")  # the next sentence has begun with a whole word: the first is complete
        first = receive(ws)
        assert isinstance(first, bytes) and first  # before the text has ended
        time.sleep(HEADER_TIMEOUT + 0.5)  # a pause in the text, past the header deadline (not the idle timeout)
        send(ws, type="text", text="are you today?")
        send(ws, type="end")
        audio, events = rest_of(ws)
        assert ws.close_code == 1000
    audio = first + audio
    assert [e["type"] for e in events] == ["speech.audio.done"]
    done = events[0]
    text = "Hello there. How are you today?"
    assert done["usage"]["input_tokens"] == len(text) and done["seed"] == 7 and done["warnings"] == []
    assert len(audio) % 2 == 0 and done["duration"] == pytest.approx(len(audio) / 2 / RATE, abs=1e-3)
    assert done["duration"] >= 6 * WORD_S  # six words, and the pause between the sentences
    stats = server.stats("sine")
    assert stats["completed"] >= 1 and stats["running"] == 0
    newest = json.loads(koe(sine_site, server.home, "history", "list", "--json", "-n", "1").stdout)[0]
    assert newest["text"] == text and newest["seconds"] == pytest.approx(done["duration"], abs=1e-3)  # the history has the whole text


def test_the_same_seed_gives_the_same_audio_and_another_format_streams_as_one_file(server):
    def speak(fmt: str, pieces: list[str]) -> bytes:
        with open_stream(server) as ws:
            send(ws, **{**START, "response_format": fmt})
            for piece in pieces:
                send(ws, type="text", text=piece)
            send(ws, type="end")
            audio, events = rest_of(ws)
        assert events[0]["type"] == "speech.started" and events[-1]["type"] == "speech.audio.done"
        return audio

    assert speak("pcm", ["One. Two ", "three."]) == speak("pcm", ["One. ", "Two three", "."])  # where the pieces break does not matter
    wav = speak("wav", ["One. Two three."])
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"


def test_the_start_message_may_carry_the_first_text_and_flat_family_options(server):
    with open_stream(server) as ws:
        send(ws, **START, input="Hi. ", pitch_shift=12)
        send(ws, type="end")
        audio, events = rest_of(ws)
    assert events[-1]["type"] == "speech.audio.done" and events[-1]["usage"]["input_tokens"] == 4
    assert len(audio) / 2 / RATE == pytest.approx(WORD_S, abs=1e-3)


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("first", "param", "kind"),
    [
        ("not json", None, "invalid_request_error"),
        (json.dumps({"type": "text", "text": "Hello."}), "type", "invalid_request_error"),
        (json.dumps({**START, "model": "no-such-model"}), "model", "not_found_error"),
        (json.dumps({**START, "voice": "nobody"}), "voice", "not_found_error"),
        (json.dumps({**START, "response_format": "tiff"}), "response_format", "invalid_request_error"),
        (json.dumps({**START, "speed": 9}), "speed", "invalid_request_error"),
        (json.dumps({**START, "stream_format": "sse"}), "stream_format", "invalid_request_error"),
        (json.dumps({**START, "loudness": 3}), "loudness", "invalid_request_error"),
        (json.dumps({k: v for k, v in START.items() if k != "voice"}), "voice", "invalid_request_error"),
    ],
)
def test_a_bad_start_message_gets_an_error_in_the_http_apis_shape_and_a_policy_close(server, first, param, kind):
    with open_stream(server) as ws:
        ws.send(first)
        error, code = refused(ws)
    assert set(error) == {"type", "error"} and set(error["error"]) == {"message", "type", "param", "code"}
    assert error["error"]["type"] == kind and error["error"]["param"] == param and code == 1008


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"type": "text", "text": 5}, "text"),
        ({"type": "text", "text": "bad \x00 byte"}, "text"),
        ({"type": "text"}, "text"),
        ({"type": "start", **START}, "type"),
        ({"type": "flush"}, "type"),
    ],
)
def test_a_bad_message_in_the_stream_ends_it_with_an_error(server, message, param):
    with open_stream(server) as ws:
        send(ws, **START)
        assert receive(ws)["type"] == "speech.started"
        send(ws, **message)
        error, code = refused(ws)
    assert error["error"]["param"] == param and code == 1008


def test_text_with_nothing_to_speak_is_a_client_error(server):
    with open_stream(server) as ws:
        send(ws, **START)
        send(ws, type="text", text="   ")
        send(ws, type="end")
        error, code = refused(ws)
    assert error["error"]["type"] == "invalid_request_error" and "nothing to speak" in error["error"]["message"] and code == 1008


def test_text_longer_than_max_input_chars_is_refused_as_too_large(server):
    with open_stream(server) as ws:
        send(ws, **START)
        send(ws, type="text", text="Word " * 20)
        send(ws, type="text", text="Word " * 10)  # 150 characters in all; the server takes 120
        _, events = rest_of(ws)
        code = ws.close_code
    error = events[-1]
    assert error["error"]["code"] == "too_large" and "max_input_chars" in error["error"]["message"] and code == 1009


def test_a_client_that_stops_sending_text_is_timed_out(server):
    with open_stream(server) as ws:
        send(ws, **START)
        send(ws, type="text", text="Hello there. ")
        began = time.monotonic()
        error, code = refused(ws)
    assert error["error"]["code"] == "timeout" and "server.body_timeout_s" in error["error"]["message"] and code == 1008
    assert 1.5 < time.monotonic() - began < 8


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def idle(server) -> dict:
    """The sine model's queue stats once nothing runs or waits there."""
    deadline = time.monotonic() + 10
    while (stats := server.stats("sine")) and (stats["running"] or stats["waiting"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return stats


def test_a_client_that_goes_away_cancels_its_generation(server):
    before = idle(server).get("cancelled", 0)
    with open_stream(server) as ws:
        send(ws, **START)
        send(ws, type="text", text="Hello there. How ")
        assert receive(ws)["type"] == "speech.started" and isinstance(receive(ws), bytes)
        assert server.stats("sine")["running"] == 1  # the stream holds the model, waiting for more text
    stats = idle(server)
    assert stats["cancelled"] == before + 1 and stats["running"] == 0
    r = httpx.post(f"{server.url}/v1/audio/speech", json={"model": "sine", "voice": "low", "input": "Free again.", "response_format": "pcm"}, timeout=30)
    assert r.status_code == 200 and r.content  # the model's lane is free


# -- guards --------------------------------------------------------------------------------------
def denial(url: str, **kw) -> tuple[int, dict]:
    """The HTTP status and JSON body a refused handshake gets."""
    with pytest.raises(InvalidStatus) as e:
        connect(url, open_timeout=10, **kw)
    response = e.value.response
    return response.status_code, json.loads(response.body)


def test_a_hostile_origin_is_refused_and_the_servers_own_origin_passes(server):
    status, body = denial(ws_url(server), origin="http://evil.example")
    assert status == 403 and body["error"]["code"] == "origin_not_allowed"
    status, body = denial(ws_url(server), origin="null")
    assert status == 403 and "opaque origin" in body["error"]["message"]
    with open_stream(server, origin=server.url) as ws:  # the web page's own origin
        send(ws, **START, input="Hi.")
        send(ws, type="end")
        assert rest_of(ws)[1][-1]["type"] == "speech.audio.done"


def test_a_host_name_the_server_does_not_answer_for_is_refused(server):
    port = int(server.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        status, body = denial(f"ws://rebound.example:{port}{PATH}", sock=sock)  # a page whose DNS name now points here
    finally:
        sock.close()
    assert status == 421 and body["error"]["code"] == "host_not_allowed"


TOKEN = "a-long-enough/test+token=0123456789"  # '/', '+' and '=' cannot be a subprotocol's: base64url carries them
MAX_STREAM_S = 4.0


def b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.fixture(scope="module")
def token_server(sine_site, sine_model, tmp_path_factory):
    """A server with an access token, and a cap on a stream's time (server.max_stream_s) short enough to test."""
    s = start_sine_serve(sine_site, sine_model, tmp_path_factory.mktemp("ws-token"), token=TOKEN, max_stream_s=MAX_STREAM_S, body_timeout_s=2.0)
    yield s
    s.stop()


def speaks(ws: ClientConnection) -> bool:
    send(ws, **START, input="Hi.")
    send(ws, type="end")
    _, events = rest_of(ws)
    return [e["type"] for e in events] == ["speech.started", "speech.audio.done"] and ws.close_code == 1000


def test_the_access_token_is_required_when_the_server_has_one(token_server):
    s = token_server
    status, body = denial(ws_url(s))
    assert status == 401 and body["error"]["code"] == "invalid_api_key" and "missing access token" in body["error"]["message"]
    assert "koe.bearer." in body["error"]["message"]  # says how a browser sends it
    status, body = denial(ws_url(s), additional_headers={"Authorization": "Bearer wrong"})
    assert status == 401 and body["error"]["message"] == "invalid access token"
    with open_stream(s) as ws:  # s.headers(): the right token
        assert ws.subprotocol is None and speaks(ws)


def test_a_browser_sends_the_token_as_a_subprotocol_and_the_server_selects_koe_never_the_token(token_server):
    s = token_server
    with connect(ws_url(s), open_timeout=10, subprotocols=["koe", f"koe.bearer.{b64url(TOKEN)}"]) as ws:
        assert ws.subprotocol == "koe" and ws.response.headers.get_all("Sec-WebSocket-Protocol") == ["koe"]
        assert speaks(ws)
    with connect(ws_url(s), open_timeout=10, subprotocols=[f"koe.bearer.{b64url(TOKEN)}", "koe"]) as ws:
        assert ws.subprotocol == "koe" and speaks(ws)  # in either order
    # a request with the header and the subprotocol: the header decides
    with connect(ws_url(s), open_timeout=10, additional_headers=s.headers(), subprotocols=["koe", f"koe.bearer.{b64url('wrong')}"]) as ws:
        assert speaks(ws)
    status, body = denial(ws_url(s), additional_headers={"Authorization": "Bearer wrong"}, subprotocols=["koe", f"koe.bearer.{b64url(TOKEN)}"])
    assert status == 401 and body["error"]["message"] == "invalid access token"
    log = s.log()
    assert TOKEN not in log and b64url(TOKEN) not in log  # never logged


@pytest.mark.parametrize(
    ("protocols", "status", "code", "says"),
    [
        (["koe", f"koe.bearer.{b64url('not-the-token-at-all')}"], 401, "invalid_api_key", "invalid access token"),
        (["koe", "koe.bearer.a.raw.token"], 401, "invalid_api_key", "base64url"),  # a token as it is: not base64url
        (["koe", "koe.bearer.%%%"], 401, "invalid_api_key", "base64url"),
        (["koe", "koe.bearer."], 401, "invalid_api_key", "invalid access token"),
        (["koe"], 401, "invalid_api_key", "missing access token"),
        ([f"koe.bearer.{b64url(TOKEN)}"], 400, "invalid_protocol", "offer the subprotocol 'koe'"),  # the right token, but nothing to select
        (["koe", f"koe.bearer.{b64url(TOKEN)}", f"koe.bearer.{b64url(TOKEN)}"], 400, "invalid_protocol", "at most one"),
    ],
)
def test_a_bad_subprotocol_token_is_refused_before_the_handshake(token_server, protocols, status, code, says):
    got, body = denial(ws_url(token_server), additional_headers={"Sec-WebSocket-Protocol": ", ".join(protocols)})
    assert got == status and body["error"]["code"] == code and says in body["error"]["message"], body
    assert TOKEN not in body["error"]["message"]


def test_a_server_without_a_token_selects_koe_when_it_is_offered(server):
    with connect(ws_url(server), open_timeout=10, subprotocols=["koe"]) as ws:
        assert ws.subprotocol == "koe" and speaks(ws)
    with connect(ws_url(server), open_timeout=10, subprotocols=["koe", f"koe.bearer.{b64url('anything')}"]) as ws:
        assert ws.subprotocol == "koe" and speaks(ws)  # a token the server does not ask for is ignored, as the header is


def test_a_stream_that_outlasts_max_stream_s_is_ended(token_server):
    """Text trickled just inside the pause limit (body_timeout_s, 2 s here) would hold the model for
    as long as the client likes: server.max_stream_s ends the stream, and frees the model."""
    s = token_server
    with open_stream(s) as ws:
        send(ws, **START)
        began = time.monotonic()
        assert receive(ws)["type"] == "speech.started"
        audio, error = b"", None
        while error is None and time.monotonic() - began < 3 * MAX_STREAM_S:
            with contextlib.suppress(ConnectionClosed):  # ended meanwhile: its error message is still to be read
                send(ws, type="text", text="More. ")  # a sentence a second: never a pause the idle timeout would cut
            try:
                while True:
                    message = receive(ws, timeout=1.0)
                    if isinstance(message, bytes):
                        audio += message
                    else:
                        error = message
                        break
            except TimeoutError:
                continue
        took = time.monotonic() - began
        with pytest.raises(ConnectionClosed):
            receive(ws)
        code = ws.close_code
    assert error is not None and error["type"] == "error" and error["error"]["code"] == "stream_too_long", error
    assert "server.max_stream_s" in error["error"]["message"] and code == 1008
    assert audio and MAX_STREAM_S <= took < MAX_STREAM_S + 3
    stats = idle(s)
    assert stats["running"] == 0 and stats["waiting"] == 0  # the model is free


def test_a_full_queue_is_busy_with_a_retry_hint(sine_site, sine_model, tmp_path):
    s = start_sine_serve(sine_site, sine_model, tmp_path, queue_size=1)
    try:
        with open_stream(s) as holding, open_stream(s) as waiting, open_stream(s) as third:
            send(holding, **START)  # runs: holds the lane while it waits for text
            assert receive(holding)["type"] == "speech.started"
            wait_for(lambda: s.stats("sine").get("running") == 1)  # taken off the queue
            send(waiting, **START)  # waits in the queue's one slot
            assert receive(waiting)["type"] == "speech.started"
            send(third, **START)
            error, code = refused(third)
            assert error["error"]["code"] == "busy" and error["retry_after"] >= 1 and code == 1013
            for ws in (holding, waiting):
                send(ws, type="text", text="Done.")
                send(ws, type="end")
                assert rest_of(ws)[1][-1]["type"] == "speech.audio.done"
    finally:
        s.stop()


def test_the_shutdown_lets_an_open_stream_finish_within_the_grace_and_cuts_one_that_outlasts_it(sine_site, sine_model, tmp_path):
    s = start_sine_serve(sine_site, sine_model, tmp_path, shutdown_grace_s=3.0, body_timeout_s=30.0)
    try:
        with open_stream(s) as finishing, open_stream(s) as lingering:
            for ws in (finishing, lingering):
                send(ws, **START)
                assert receive(ws)["type"] == "speech.started"
            s.process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            send(finishing, type="text", text="Still here. ")  # the shutdown has begun: it is not cut
            send(finishing, type="end")
            audio, events = rest_of(finishing)
            assert audio and events[-1]["type"] == "speech.audio.done" and finishing.close_code == 1000
            error, code = refused(lingering)  # its text never ends: cut when the grace is over
            assert error["error"]["code"] == "shutting_down" and code == 1012
        assert s.process.wait(15) in (0, -signal.SIGTERM), s.log()  # as uvicorn exits on SIGTERM
    finally:
        s.stop()
