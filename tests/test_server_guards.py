"""The server's guards against a hostile web page and hostile sockets, on a real loopback port.

- DNS rebinding: a Host the server does not answer for gets 421 (IP literals, loopback names, the
  bound address and configured names pass).
- Cross-site requests: a state-changing request from another web origin (or `Origin: null`, or
  `Sec-Fetch-Site: cross-site`) gets 403 and changes nothing; the server's own origin and
  configured origins pass (with CORS for the configured ones).
- Slow clients: half-sent headers are closed after server.header_timeout_s (408), a stalled body
  gets 408 after server.body_timeout_s, connections over server.max_connections get 503.
- Weak tokens are refused beyond loopback.

The server runs as `koe serve` configures it (`uvicorn_config`), in a thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from test_server import TEXT, decode, long_request, make_home, wait_for, wav_clip
from test_server_e2e import live_server

from koe.cli.main import app as cli_app
from koe.server import create_app
from koe.server.auth import MIN_TOKEN_CHARS, check_binding
from koe.server.guards import AllowedOrigins, HostNames, origin_of, split_host
from koe.service import ConfigError, load_settings

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")

FEW = {"max_new_tokens": 4}
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0
MAX_CONNECTIONS = 4


@pytest.fixture(scope="module")
def live(tmp_path_factory, session_tmp):
    home = make_home(
        tmp_path_factory.mktemp("home"),
        session_tmp,
        allowed_hosts=["tts.example", "*.lan"],
        allowed_origins=["http://localhost:3000"],
        header_timeout_s=HEADER_TIMEOUT,
        body_timeout_s=BODY_TIMEOUT,
        max_connections=MAX_CONNECTIONS,
    )
    with live_server(create_app(home), home.settings.server) as s:  # configured as koe serve does
        yield s.url, s.server


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def assert_refused(r: httpx.Response, status: int, *words: str) -> dict:
    """An OpenAI-shaped error with `status` whose message names each of `words`."""
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    for w in words:
        assert w in err["message"], err["message"]
    return err


def upload(url: str, name: str, transcript: str, headers: dict | None = None, **fields) -> httpx.Response:
    data = {"name": name, "transcript": transcript, **fields}
    return httpx.post(f"{url}/v1/audio/voices", data=data, files={"file": ("me.wav", wav_clip(1.0), "audio/wav")}, headers=headers or {})


def voice_names(url: str) -> set[str]:
    return {v["id"] for v in httpx.get(f"{url}/v1/audio/voices").json()["data"]}


# -- DNS rebinding: the Host allow-list -------------------------------------------------------
@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "tts.example.evil.example", "a@127.0.0.1"])
def test_a_rebound_host_name_is_refused_with_421(live, host):
    url, _ = live
    upload(url, "kept", "Hello, this is my voice.")
    port = port_of(url)
    h = {"Host": f"{host}:{port}"}
    err = assert_refused(httpx.get(f"{url}/v1/audio/voices", headers=h), 421, "server.allowed_hosts", "DNS rebinding")
    assert err["code"] == "host_not_allowed"
    assert_refused(httpx.delete(f"{url}/v1/audio/voices/kept", headers=h), 421)
    assert_refused(httpx.post(f"{url}/v1/audio/speech", json={"model": "tts-1", "input": TEXT, "voice": "alloy", **FEW}, headers=h), 421)
    assert "kept" in voice_names(url)  # nothing was deleted


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LocalHost.", "app.localhost", "[::1]", "10.1.2.3", "tts.example", "box.lan", None])
def test_loopback_ip_literal_and_configured_hosts_are_answered(live, host):
    url, _ = live
    headers = {"Host": f"{host}:{port_of(url)}"} if host else {}
    assert httpx.get(f"{url}/v1/models", headers=headers).status_code == 200


def test_any_host_when_configured_and_the_test_clients_own_address(tmp_path, session_tmp):
    with TestClient(create_app(make_home(tmp_path / "a", session_tmp, allowed_hosts=["*"]))) as c:
        assert c.get("/v1/models", headers={"Host": "anything.example"}).status_code == 200
    # TestClient's connections arrive on "testserver" (its ASGI scope["server"]), which is answered
    with TestClient(create_app(make_home(tmp_path / "b", session_tmp))) as c:
        assert c.get("/v1/models").status_code == 200
        assert c.get("/v1/models", headers={"Host": "evil.example"}).status_code == 421


def test_host_and_origin_parsing():
    assert split_host("Example.COM.:8000") == ("example.com", 8000)
    assert split_host("[::1]:80") == ("::1", 80)
    assert split_host("a/b") is None and split_host("x:notaport") is None and split_host("u@h") is None
    assert origin_of("http://localhost:3000") == ("http", "localhost", 3000)
    assert origin_of("HTTPS://Tts.Example") == ("https", "tts.example", 443)
    assert origin_of("null") is None and origin_of("http://h/path") is None
    hosts = HostNames(["tts.example", "*.lan", ".corp"], own=["mybox"])
    assert all(hosts.allows(h) for h in ("tts.example", "x.lan", "a.b.corp", "mybox", "localhost", "x.localhost", "192.168.1.9", "::1"))
    assert not any(hosts.allows(h) for h in ("lan", "evil.example", "tts.example.evil"))
    assert AllowedOrigins(["http://[::1]:3000", "https://a.example:443"]).serialized() == ["http://[::1]:3000", "https://a.example"]
    with pytest.raises(ConfigError, match="allowed_origins"):
        AllowedOrigins(["localhost:3000"])
    with pytest.raises(ConfigError, match="allowed_hosts"):
        HostNames(["evil.example/x"])


def test_a_malformed_allowed_origin_fails_at_start(tmp_path, session_tmp):
    with pytest.raises(ConfigError, match="allowed_origins"):
        create_app(make_home(tmp_path / "home", session_tmp, allowed_origins=["not an origin"]))


# -- cross-site requests: the Origin check ----------------------------------------------------
def test_a_cross_site_form_post_changes_nothing(live):
    url, _ = live
    assert upload(url, "mine", "The real transcript.").status_code == 201
    evil = {"Origin": "http://evil.example"}
    err = assert_refused(upload(url, "planted", "x", headers=evil), 403, "http://evil.example", "server.allowed_origins")
    assert err["code"] == "origin_not_allowed" and err["type"] == "permission_error"
    assert_refused(upload(url, "mine", "overwritten", headers=evil, overwrite="true"), 403)
    assert_refused(httpx.delete(f"{url}/v1/audio/voices/mine", headers=evil), 403)
    assert_refused(httpx.post(f"{url}/v1/audio/speech", json={"model": "tts-1", "input": TEXT, "voice": "alloy", **FEW}, headers=evil), 403)
    assert "planted" not in voice_names(url)
    assert httpx.get(f"{url}/v1/audio/voices/mine").json()["transcript"] == "The real transcript."
    # another port of the same host is another origin; so is an opaque one; so is a cross-site fetch without Origin
    assert_refused(upload(url, "planted", "x", headers={"Origin": "http://127.0.0.1:1"}), 403)
    assert_refused(upload(url, "planted", "x", headers={"Origin": "null"}), 403, "opaque origin")
    assert_refused(upload(url, "planted", "x", headers={"Sec-Fetch-Site": "cross-site"}), 403, "cross-site")
    assert "planted" not in voice_names(url)
    # reads pass (the browser keeps their answers from the page: no CORS header for it)
    r = httpx.get(f"{url}/v1/audio/voices", headers=evil)
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_same_origin_configured_origin_and_non_browser_clients_pass(live):
    url, _ = live
    port = port_of(url)
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "wav", **FEW}
    for origin, host in [(url, None), (f"http://localhost:{port}", f"localhost:{port}"), ("http://localhost:3000", None)]:
        headers = {"Origin": origin, **({"Host": host} if host else {})}
        r = httpx.post(f"{url}/v1/audio/speech", json=body, headers=headers)
        assert r.status_code == 200, (origin, r.text)
        assert decode(r.content)[0] == "pcm_s16le"
    assert httpx.post(f"{url}/v1/audio/speech", json=body, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200
    assert upload(url, "plain", "A client with no Origin.").status_code == 201  # curl, SDKs
    assert httpx.delete(f"{url}/v1/audio/voices/plain", headers={"Origin": url}).status_code == 200


def test_cors_only_for_configured_origins(live):
    url, _ = live
    ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
    ok = httpx.options(f"{url}/v1/audio/speech", headers={"Origin": "http://localhost:3000", **ask})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "authorization" in ok.headers["access-control-allow-headers"].lower()
    bad = httpx.options(f"{url}/v1/audio/speech", headers={"Origin": "http://evil.example", **ask})
    assert bad.status_code >= 400 and "access-control-allow-origin" not in bad.headers
    r = httpx.get(f"{url}/v1/models", headers={"Origin": "http://localhost:3000"})
    assert r.headers["access-control-allow-origin"] == "http://localhost:3000"


# -- slow clients: header and body deadlines, the connection cap ------------------------------
def connect(url: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port_of(url)), timeout=15)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            out += chunk
    return out


def response_of(raw: bytes) -> tuple[int, dict[str, str], dict]:
    """(status, headers, JSON body) of one raw HTTP/1.1 response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


def test_half_sent_headers_are_closed_after_the_header_timeout(live):
    url, _ = live
    with connect(url) as half, connect(url) as silent:
        half.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
        started = time.monotonic()
        raw = read_until_closed(half)
        took = time.monotonic() - started
        status, headers, body = response_of(raw)
        assert status == 408 and headers["connection"] == "close" and "server.header_timeout_s" in body["error"]["message"]
        assert HEADER_TIMEOUT * 0.9 <= took < HEADER_TIMEOUT + 3
        assert read_until_closed(silent) == b""  # a connection that never sends a byte is closed too, silently
    # a keep-alive connection gets the same deadline for its next request
    with connect(url) as keep:
        keep.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = keep.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        keep.sendall(b"GET /health HTTP/1.1\r\nHo")
        assert b"408" in read_until_closed(keep).split(b"\r\n")[0]
    assert httpx.get(f"{url}/health").status_code == 200


@pytest.mark.parametrize("path", ["/v1/audio/speech", "/v1/audio/voices"])
def test_a_stalled_body_gets_408_and_is_closed(live, path):
    url, _ = live
    before = voice_names(url)
    with connect(url) as sock:
        kind = "application/json" if path.endswith("speech") else "multipart/form-data; boundary=xyz"
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {kind}\r\nContent-Length: 500\r\n\r\n".encode())
        sock.sendall(b'--xyz\r\nContent-Disposition: form-data; name="name"\r\n\r\nstalled\r\n' if "voices" in path else b'{"input": "Hel')
        started = time.monotonic()
        raw = read_until_closed(sock)
        took = time.monotonic() - started
    status, headers, body = response_of(raw)
    assert status == 408 and headers["connection"] == "close"
    assert "server.body_timeout_s" in body["error"]["message"] and set(body["error"]) == {"message", "type", "param", "code"}
    assert BODY_TIMEOUT * 0.9 <= took < BODY_TIMEOUT + 3
    assert voice_names(url) == before  # nothing half-made


def test_connections_over_the_cap_are_refused_then_served_again(live):
    url, server = live
    wait_for(lambda: len(server.server_state.connections) == 0, timeout=HEADER_TIMEOUT + 5)
    held = [connect(url) for _ in range(MAX_CONNECTIONS)]
    try:
        wait_for(lambda: len(server.server_state.connections) == MAX_CONNECTIONS, timeout=HEADER_TIMEOUT / 2)
        with connect(url) as extra:
            status, headers, body = response_of(read_until_closed(extra))
        assert status == 503 and headers["retry-after"] == "1" and "server.max_connections" in body["error"]["message"]
    finally:
        for sock in held:
            sock.close()
    wait_for(lambda: len(server.server_state.connections) == 0, timeout=5)
    r = httpx.post(f"{url}/v1/audio/speech", json={"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "wav", **FEW})
    assert r.status_code == 200 and decode(r.content)[0] == "pcm_s16le"


def test_a_slow_answer_is_not_cut_by_the_deadlines(live):
    url, server = live
    scheduler = server.config.app.state.koe.scheduler
    long_text = " ".join(["A long sentence that keeps the model talking for a good while."] * 8)
    blocker = scheduler.submit(long_request(long_text))  # the request below waits behind it, past both deadlines
    wait_for(lambda: scheduler.stats()["cv"].running == 1)
    threading.Timer(HEADER_TIMEOUT + BODY_TIMEOUT + 0.5, blocker.cancel).start()
    started = time.monotonic()
    r = httpx.post(f"{url}/v1/audio/speech", json={"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "wav", **FEW}, timeout=60)
    assert r.status_code == 200 and decode(r.content)[0] == "pcm_s16le"
    assert time.monotonic() - started > HEADER_TIMEOUT + BODY_TIMEOUT  # the deadlines time the client, never the work


# -- tokens -----------------------------------------------------------------------------------
def server_settings(tmp_path, **server):
    return load_settings(tmp_path, flags={"server": server}, environ={}).server


@pytest.mark.parametrize("token", ["x", "short-token", "a" * (MIN_TOKEN_CHARS - 1)])
def test_a_weak_token_is_refused_beyond_loopback_with_a_strong_one_suggested(tmp_path, token):
    with pytest.raises(ConfigError, match="weak access token") as e:
        check_binding(server_settings(tmp_path, host="0.0.0.0", token=token))
    suggested = str(e.value).split("--token ", 1)[1].split()[0]
    assert len(suggested) >= 40 and suggested.replace("-", "").replace("_", "").isalnum()
    check_binding(server_settings(tmp_path, host="0.0.0.0", token=suggested))  # and it is accepted


@pytest.mark.parametrize("token", [" ", "   ", " padded-token-0123456789", "trailing-newline-0123456789\n"])
def test_a_token_with_surrounding_whitespace_is_refused_everywhere(tmp_path, token):
    for host in ("0.0.0.0", "127.0.0.1"):
        with pytest.raises(ConfigError, match="whitespace"):
            check_binding(server_settings(tmp_path, host=host, token=token))


def test_a_short_token_on_loopback_is_allowed_but_logged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="koe.server.auth"):
        check_binding(server_settings(tmp_path, host="127.0.0.1", token="x"))
    assert "short" in caplog.text and str(MIN_TOKEN_CHARS) in caplog.text


def test_serve_flags_allow_hosts_and_origins(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    seen = {}

    class FakeServer:
        @staticmethod
        def run(settings):
            seen["server"] = settings.server

    real_import = __import__("importlib").import_module
    monkeypatch.setenv("KOE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("importlib.import_module", lambda name: FakeServer if name == "koe.server.app" else real_import(name))
    args = ["serve", "--allow-host", "tts.example", "--allow-host", "*.lan", "--allow-origin", "http://localhost:3000"]
    result = CliRunner().invoke(cli_app, args)
    assert result.exit_code == 0, result.output
    assert seen["server"].allowed_hosts == ["tts.example", "*.lan"] and seen["server"].allowed_origins == ["http://localhost:3000"]
