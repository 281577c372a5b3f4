"""`koe serve` takes its port before anything loads (a busy port, an address this machine lacks: one line, at
once) and prints a banner once it serves: the URL, the web page, the models, whether clients need the token."""

import socket
import time

import pytest
import uvicorn

import koe.server.app as server_app
from koe.server.app import banner
from koe.service.config.settings import load_settings

pytest_plugins = ["cli_fixtures"]  # cv_model, base_model, home, koe

STRONG = "a-strong-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_line(result) -> str:
    """The one line `koe serve` printed on failing: an error, no traceback, no raw errno."""
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "Traceback" not in result.output and "Errno" not in result.output, result.output
    return lines[0]


@pytest.fixture
def nothing_loads(monkeypatch):
    """Building the app (which loads the default model) fails the test: the port is checked first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the app, and with it the default model, was built before the port was checked")

    monkeypatch.setattr(server_app, "create_app", refuse)


def test_a_busy_port_fails_at_once_with_one_line_before_any_model_loads(koe, home, cv_model, nothing_loads):
    koe("models", "import", cv_model, "--name", "cv", "--link")
    with socket.socket() as taken:  # another program listens there
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        r = koe("serve", "--port", port, "-m", "cv", ok=False)
        elapsed = time.monotonic() - started
    line = one_line(r)
    assert f"cannot listen on 127.0.0.1:{port}: address already in use" in line and f"koe serve --port {port + 1}" in line
    assert r.exit_code == 1 and elapsed < 2


def test_an_address_this_machine_does_not_have_fails_at_once_with_one_line(koe, home, nothing_loads):
    port = free_port()
    started = time.monotonic()
    r = koe("serve", "--host", "192.0.2.1", "--port", port, "--token", STRONG, ok=False)  # TEST-NET-1: no machine's own
    line = one_line(r)
    assert f"cannot listen on 192.0.2.1:{port}: no network interface of this machine has that address" in line
    assert "server.host (or --host) must be an address of this machine" in line and STRONG not in r.output
    assert time.monotonic() - started < 2


def test_the_banner_says_where_the_page_the_models_and_that_a_token_is_required(koe, home, cv_model, base_model, monkeypatch):
    koe("models", "import", cv_model, "--name", "cv", "--link")
    koe("models", "import", base_model, "--name", "base", "--link")

    async def stop_at_once(self) -> None:  # the server starts (port, lifespan, banner), serves nothing, stops
        self.should_exit = True

    monkeypatch.setattr(uvicorn.Server, "main_loop", stop_at_once)
    monkeypatch.setattr(server_app, "_preload", lambda synth: None)  # the banner's subject is not the model's load
    port = free_port()
    r = koe("serve", "--port", port, "-m", "cv", "--token", STRONG)
    url = f"http://127.0.0.1:{port}"
    shown = r.stderr[r.stderr.index("koe ") :].splitlines()[:5]
    assert shown[0].endswith(f"is serving on {url}")
    assert shown[1:] == [
        f"  web page   {url}/",
        f"  API        {url}/v1 (OpenAI's speech API); reference at {url}/docs",
        "  models     base, cv (default)",
        "  token      required: clients send 'Authorization: Bearer TOKEN' (server.token)",
    ]
    assert STRONG not in r.output


def test_the_banner_off_loopback_without_the_page_and_on_loopback_without_a_token(tmp_path):
    server = {"host": "0.0.0.0", "port": 9000, "token": STRONG, "web_page": False}
    settings = load_settings(tmp_path, flags={"server": server, "models": {"default": "Qwen/x"}}, environ={})
    text = banner(settings, ["cv"])
    assert "serving on http://127.0.0.1:9000" in text and "every address of this machine (0.0.0.0)" in text
    assert "web page   off (server.web_page)" in text and "models     cv, Qwen/x (default)" in text
    assert "token      required" in text and STRONG not in text
    text = banner(load_settings(tmp_path, flags={"server": {"host": "::1"}}, environ={}), [])
    assert "serving on http://[::1]:8000" in text and "web page   http://[::1]:8000/" in text
    assert "models     none installed" in text and "token      not required: only this machine can connect" in text
