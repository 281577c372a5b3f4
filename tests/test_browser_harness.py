"""The real-browser harness itself (tests/browser.py), on the API page `/docs` (Swagger UI from local assets):
its `koe serve` answers, Chromium loads the page with nothing off the server's origin, the watch catches what it
must (a request to another host fails the test), screenshots are written, and the fake microphone records.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from browser import shot, watch_of
from playwright.sync_api import expect

from koe import __version__

pytest_plugins = ["browser"]  # its fixtures: server, page, phone_page, dark_page (and chromium, koe_serve, open_page)

# getUserMedia + MediaRecorder for a second, then the recording decoded by the page's own AudioContext; the processing
# Chromium applies to a microphone by default (gain control, echo cancellation, noise suppression) is turned off so
# what comes back is the fake microphone's clip as it is.
RECORD_ONE_SECOND = """async () => {
  const stream = await navigator.mediaDevices.getUserMedia({audio: {autoGainControl: false, echoCancellation: false, noiseSuppression: false}});
  const track = stream.getAudioTracks()[0];
  const recorder = new MediaRecorder(stream);
  const parts = [];
  recorder.ondataavailable = (e) => parts.push(e.data);
  const stopped = new Promise((resolve) => (recorder.onstop = resolve));
  recorder.start();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  recorder.stop();
  await stopped;
  track.stop();
  const blob = new Blob(parts, {type: recorder.mimeType});
  const audio = await new AudioContext().decodeAudioData(await blob.arrayBuffer());
  return {label: track.label, mime: recorder.mimeType, size: blob.size, duration: audio.duration, rate: audio.sampleRate,
          samples: Array.from(audio.getChannelData(0))};
}"""


def test_the_server_is_the_real_koe_serve(server):
    health = server.health()
    assert health["status"] == "ok" and health["version"] == __version__ and health["models_loaded"] == ["cv"]
    assert server.stats() == {} or server.stats()["running"] == 0
    assert server.process.poll() is None and (server.home / "koe.toml").is_file()
    assert f"is serving on {server.url}" in server.log()  # koe serve's banner, printed once it serves


def test_settings_and_token_reach_the_server(koe_serve):
    guarded = koe_serve(token="harness-token-0123456789", max_input_chars=20, models=("cv",), synthesis={"max_new_tokens": 6})
    assert httpx.get(f"{guarded.url}/health").status_code == 200  # no token needed: the harness waits on it
    assert httpx.get(f"{guarded.url}/v1/models").status_code == 401
    models = httpx.get(f"{guarded.url}/v1/models", headers=guarded.headers()).json()["data"]
    assert [m["id"] for m in models] == ["cv"] and models[0]["default"]
    body = {"model": "cv", "voice": "serena", "response_format": "wav", "seed": 1}
    too_long = httpx.post(f"{guarded.url}/v1/audio/speech", json={**body, "input": "x" * 21}, headers=guarded.headers())
    assert too_long.status_code == 413 and "at most 20" in too_long.json()["error"]["message"]
    said = httpx.post(f"{guarded.url}/v1/audio/speech", json={**body, "input": "Hello there."}, headers=guarded.headers(), timeout=60)
    assert said.status_code == 200 and float(said.headers["x-koe-duration"]) <= 6 * 0.08  # synthesis.max_new_tokens
    assert guarded.stats()["completed"] == 1
    guarded.stop()
    # drained, then uvicorn re-raises the SIGTERM it caught (exit status -15)
    assert guarded.process.returncode in (0, -signal.SIGTERM) and "Application shutdown complete" in guarded.log(), guarded.log()


def test_docs_page_loads_clean_and_offline(page, server):
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("koe")
    expect(page.locator(".opblock-summary-path", has_text="/v1/audio/speech")).to_be_visible()
    assert page.evaluate("() => [...document.scripts].every((s) => !s.src || s.src.startsWith(location.origin))")
    path = shot(page, "harness-docs")
    assert path.stat().st_size > 10_000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    watch_of(page).check()  # now, not only at teardown


def test_phone_and_dark_pages(phone_page, dark_page):
    phone_page.goto("/docs")
    expect(phone_page.locator(".swagger-ui .info .title")).to_be_visible()
    assert phone_page.viewport_size == {"width": 390, "height": 844}
    assert phone_page.evaluate("() => matchMedia('(pointer: coarse)').matches")
    dark_page.goto("/docs")
    assert dark_page.evaluate("() => matchMedia('(prefers-color-scheme: dark)').matches")
    shot(phone_page, "harness-docs-phone")


def test_a_request_off_the_origin_is_blocked_and_fails_the_check(page):
    page.goto("/openapi.json")  # a document without a Content-Security-Policy: the request reaches the network layer
    fetch = "() => fetch('http://example.com/x').then(() => 'fetched', (e) => 'refused: ' + e)"
    assert page.evaluate(fetch).startswith("refused")  # aborted: nothing left the machine
    watch = watch_of(page)
    assert watch.seen["request off the server's origin"] == ["GET http://example.com/x"]
    with pytest.raises(pytest.fail.Exception, match=r"request off the server's origin: GET http://example.com/x"):
        watch.check()
    # allowed, the check passes (and the teardown's with it); the blocked fetch's console error must be allowed too
    watch.expect("request off the server's origin", r"//example\.com/")
    watch.expect_console_errors(r"ERR_BLOCKED_BY_CLIENT")
    watch.check()


def test_the_pages_own_csp_blocks_a_request_off_the_origin_first(page):
    page.goto("/docs")  # its CSP says connect-src 'self': the browser refuses before any request is made
    assert page.evaluate("() => fetch('http://example.com/x').then(() => 'fetched', (e) => 'refused: ' + e)").startswith("refused")
    watch = watch_of(page)
    with pytest.raises(pytest.fail.Exception, match=r"CSP violation: connect-src blocked http://example.com/x"):
        watch.check()
    assert watch.seen["request off the server's origin"] == []
    watch.expect("CSP violation", "connect-src")
    watch.expect_console_errors(r"Content Security Policy")
    watch.check()


def test_console_and_page_errors_fail_the_check(page):
    page.goto("/docs")
    page.evaluate("() => { console.error('boom in the console'); setTimeout(() => { throw new Error('boom uncaught'); }); }")
    page.wait_for_timeout(200)
    watch = watch_of(page)
    with pytest.raises(pytest.fail.Exception) as failed:
        watch.check()
    assert "console error: boom in the console" in str(failed.value) and "page error: Error: boom uncaught" in str(failed.value)
    watch.expect_console_errors("boom in the console")
    watch.expect("page error", "boom uncaught")
    watch.check()


def test_a_csp_violation_fails_the_check(page):
    page.goto("/docs")  # its Content-Security-Policy forbids inline scripts it did not hash
    page.evaluate("() => { const s = document.createElement('script'); s.textContent = 'window.ran = 1'; document.body.append(s); }")
    page.wait_for_timeout(200)
    watch = watch_of(page)
    assert page.evaluate("() => window.ran") is None
    assert any("script-src" in v for v in watch.seen["CSP violation"]), watch.seen
    with pytest.raises(pytest.fail.Exception, match="CSP violation: script-src"):
        watch.check()
    watch.expect("CSP violation", "script-src")
    watch.expect_console_errors("Content Security Policy")
    watch.check()


def test_the_fake_microphone_records_its_clip(page):
    page.goto("/docs")  # any page of the server's origin: getUserMedia needs a secure context (loopback is one)
    got = page.evaluate(RECORD_ONE_SECOND)
    assert got["label"] == "Fake Default Audio Input" and got["mime"].startswith("audio/webm")
    assert got["size"] > 1000 and got["duration"] == pytest.approx(1.0, abs=0.15)
    samples = np.asarray(got["samples"], dtype=np.float32)
    assert 0.05 < float(np.sqrt(np.mean(samples**2))) < 0.5  # the clip's level (0.3 peak), not silence or a full-scale beep
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    freqs = np.fft.rfftfreq(len(samples), 1 / got["rate"])
    assert freqs[np.argmax(spectrum)] == pytest.approx(140, abs=5)  # the clip's fundamental (140 Hz; the default fake is 1 kHz)


LEFT_BEHIND = """
import pytest

pytest_plugins = ["browser"]


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("session")


def test_leaves_a_console_error(page):
    page.goto("/docs")
    page.evaluate("() => console.error('left behind')")


def test_allows_the_console_error_it_provokes(page):
    page.goto("/docs")
    expect_console_errors(page, "provoked")
    page.evaluate("() => console.error('provoked')")
"""


def test_what_the_watch_saw_fails_the_run_at_teardown(tmp_path):
    # a pytest run of its own: an error nobody expected fails it at teardown, an expected one does not
    (tmp_path / "test_left_behind.py").write_text("from browser import expect_console_errors\n" + LEFT_BEHIND)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_left_behind.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "2 passed, 1 error in" in out and "warning" not in out, out
    assert "ERROR at teardown of test_leaves_a_console_error" in out and "console error: left behind" in out, out
    assert "ERROR test_left_behind.py::test_allows" not in out, out
