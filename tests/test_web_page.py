"""The web page at `/`, driven in headless Chromium against a real `koe serve` (tests/browser.py) with tiny
random-weight models: cv (CustomVoice, the default), base (clones) and design (VoiceDesign).

Each test opens a fresh browser context (its own IndexedDB history); the server and its voice library are shared
by the module, so each test names its own voices. Requests use few frames (`max_new_tokens`) to stay fast; the
screenshots in docs/images/web/ come from these tests (`make screenshots`).
"""

from __future__ import annotations

import io
import threading
import time
import zipfile

import httpx
import numpy as np
import pytest
import soundfile as sf
from browser import audio_duration, download, expect_console_errors, ready, shot
from product_helpers import decode, speechy, write_wav
from test_server import wait_for

pytest_plugins = ["browser"]
pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off")

TEXT = "Hello there, how are you?"
LONG = {"input": "one two three four five six seven eight nine ten", "max_new_tokens": 400, "seed": 7}  # ~14 s of audio, seconds of work


def set_option(page, name: str, value) -> None:
    page.locator("#speak-options-box").evaluate("(d) => { d.open = true; }")
    page.fill(f"#speak-opt-{name}", str(value))


def speak(page, text: str = TEXT, *, frames: int = 12, seed: int | None = 5, timeout: float = 60_000) -> None:
    """Fill the form, press Speak and wait until the request has finished (the Speak button is back)."""
    page.fill("#speak-input", text)
    if frames is not None:
        set_option(page, "max_new_tokens", frames)
    page.fill("#speak-seed", "" if seed is None else str(seed))
    page.click("#speak-go")
    page.wait_for_function("() => document.querySelector('#speak-cancel').disabled", timeout=timeout)


def one_shot(server, **body) -> bytes:
    r = httpx.post(f"{server.url}/v1/audio/speech", json=body, headers=server.headers(), timeout=60)
    assert r.status_code == 200, r.text
    return r.content


# -- speak ----------------------------------------------------------------------------------------
def test_the_page_lists_models_voices_languages_and_the_family_options(page, server):
    ready(page)
    models = page.eval_on_selector_all("#speak-model option", "(os) => os.map((o) => [o.value, o.textContent])")
    assert [m for m, _ in models] == ["base", "cv", "design"] and page.input_value("#speak-model") == "cv"  # the default
    assert dict(models)["cv"].startswith(
        "cv — Qwen3-TTS 12 Hz CustomVoice 11M · random weights"
    )  # the family's title (its spec's), the size from its parameter count
    assert "preset speakers (9)" in page.text_content("#speak-model-about")  # what it can do, from its capabilities
    assert page.text_content("#speak-model-license") == "Licence: Apache License 2.0 (Apache-2.0)"  # its family's declaration
    assert page.get_attribute("#speak-model-license a", "href") == "https://www.apache.org/licenses/LICENSE-2.0"
    voices = page.eval_on_selector_all("#speak-voice option", "(os) => os.map((o) => o.value)")
    assert {"ryan", "serena", "vivian"} <= set(voices) and "alloy" in voices  # speakers and OpenAI names
    assert "english" in page.eval_on_selector_all("#speak-language option", "(os) => os.map((o) => o.value)")
    # options rendered from GET /v1/models' schema: types, defaults, bounds
    assert page.get_attribute("#speak-opt-temperature", "type") == "number" and page.get_attribute("#speak-opt-temperature", "placeholder") == "0.9"
    assert page.get_attribute("#speak-opt-max_new_tokens", "min") == "2"
    assert page.eval_on_selector_all("#speak-opt-do_sample option", "(os) => os.map((o) => o.value)") == ["", "true", "false"]
    # a model that clones has no preset speakers or OpenAI names; one that designs asks for a description
    page.select_option("#speak-model", "design")
    page.wait_for_function("() => !document.querySelector('#speak-instructions-field').hidden")
    assert page.text_content("#speak-instructions-label") == "Voice description"
    page.select_option("#speak-model", "base")
    page.wait_for_selector("#speak-instructions-field", state="hidden")
    page.wait_for_function("() => ![...document.querySelectorAll('#speak-voice option')].some((o) => o.value === 'alloy')")
    assert "ryan" not in page.eval_on_selector_all("#speak-voice option", "(os) => os.map((o) => o.value)")


def test_a_random_weight_model_wears_a_badge(page, server):
    ready(page)
    badge = page.locator("#speak-model-random")
    assert badge.is_visible() and badge.text_content() == "Random weights"
    assert page.text_content("#speak-model-about").startswith("A test model: it speaks noise, not speech · preset speakers")
    assert "speak-model-random" in page.get_attribute("#speak-model", "aria-describedby")  # read out with the picker
    page.locator("#speak-options-box").evaluate("(d) => { d.open = false; }")
    shot(page, "random-weights")
    # a model without koe's marker (a real release's folder): the same list with random_weights false wears none

    def released(route):
        response = route.fetch()
        body = response.json()
        for m in body["data"]:
            m["random_weights"] = False
            m["license"] = {"id": "LicenseRef-x-1", "name": "X terms", "url": "javascript:alert(1)", "needs_acceptance": True, "accepted_at": None}
        route.fulfill(response=response, json=body)

    page.route("**/v1/models", released)
    ready(page)
    assert not badge.is_visible() and "random" not in page.text_content("#speak-model")
    assert page.text_content("#speak-model-about").startswith("preset speakers (9)")
    license = page.text_content("#speak-model-license")  # one that must be accepted, and was not; a URL that is no http(s) is no link
    assert (
        license == "Licence: X terms (LicenseRef-x-1) · must be accepted: `koe models pull` asks for it" and page.locator("#speak-model-license a").count() == 0
    )


def test_speak_streams_plays_then_downloads_the_same_audio_as_the_api(page, server):
    ready(page)
    page.select_option("#speak-voice", "ryan")
    speak(page, frames=24, seed=11)
    metrics = page.text_content("#speak-metrics")
    assert "first audio after" in metrics and "real-time factor" in metrics and "seed 11" in metrics, metrics
    seconds = audio_duration(page)
    name, data = download(page, "#speak-download")
    assert name == "koe-cv-ryan-11.wav"
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == 24000 and len(samples) / rate == pytest.approx(seconds, abs=1e-3) and seconds > 0.5
    # the page joined the stream without losing a sample: the same bytes as the API's stream of that request ...
    body = {"model": "cv", "voice": "ryan", "input": TEXT, "seed": 11, "max_new_tokens": 24}
    streamed = np.frombuffer(one_shot(server, **body, response_format="pcm", stream_format="audio"), "<i2")
    np.testing.assert_array_equal(samples, streamed)
    # ... which is the one-shot audio up to float32 rounding (docs/streaming.md: <= 1e-5, so at most 1 LSB in 16 bits)
    expected, _ = sf.read(io.BytesIO(one_shot(server, **body, response_format="wav")), dtype="int16")
    assert len(expected) == len(samples) and np.abs(samples.astype(np.int32) - expected).max() <= 1
    page.locator("#speak-options-box").evaluate("(d) => { d.open = false; }")  # the screenshot shows the form, options folded
    shot(page, "speak")


def test_one_shot_mp3_plays_and_downloads(page, server):
    ready(page)
    page.uncheck("#speak-stream")
    page.select_option("#speak-response-format", "mp3")
    speak(page, seed=3)
    assert audio_duration(page) > 0.3
    name, data = download(page, "#speak-download")
    codec, rate, samples = decode(data)
    assert name.endswith(".mp3") and codec.startswith("mp3") and rate == 24000 and len(samples) > 0.3 * rate
    metrics = page.text_content("#speak-metrics")
    assert "real-time factor" in metrics and "Note: speech was cut off" in metrics, metrics  # X-Koe-Warnings, shown


def test_a_bad_request_shows_the_apis_message_on_the_field(page, server):
    ready(page)
    expect_console_errors(page, r"status of 400")
    speak(page, text="   ", frames=None)
    assert "input text is empty" in page.text_content("#speak-error")
    assert page.get_attribute("#speak-input", "aria-invalid") == "true"
    set_option(page, "temperature", -1)
    speak(page)
    error = page.text_content("#speak-error")
    assert "temperature" in error and "> 0" in error, error
    assert page.get_attribute("#speak-opt-temperature", "aria-invalid") == "true" and page.get_attribute("#speak-input", "aria-invalid") is None
    shot(page, "speak-error")


def test_cancel_stops_the_servers_work(page, server):
    ready(page)
    before = server.stats()
    page.fill("#speak-input", LONG["input"])
    set_option(page, "max_new_tokens", LONG["max_new_tokens"])
    page.fill("#speak-seed", str(LONG["seed"]))
    page.click("#speak-go")
    wait_for(lambda: server.stats().get("running", 0) == 1)
    page.click("#speak-cancel")
    cancelled_at = time.monotonic()
    wait_for(lambda: server.stats()["cancelled"] == before.get("cancelled", 0) + 1 and server.stats()["running"] == 0)
    assert time.monotonic() - cancelled_at < 5
    assert server.stats()["completed"] == before.get("completed", 0)  # it did not run to its end
    page.wait_for_function("() => document.querySelector('#speak-metrics').textContent === 'Cancelled.'")
    assert page.is_enabled("#speak-go") and page.is_hidden("#speak-error")


# -- voices ---------------------------------------------------------------------------------------
def test_clone_from_an_uploaded_clip_then_speak_with_it_at_once(page, server, tmp_path):
    clip = write_wav(tmp_path / "me.wav", speechy(3.0))
    ready(page)
    page.click("#tab-voices")
    page.fill("#clone-name", "narrator")
    page.set_input_files("#clone-file", str(clip))
    assert audio_duration(page, "#clone-preview") == pytest.approx(3.0, abs=0.01)
    page.fill("#clone-transcript", "Hello, this is my voice.")
    page.click("#clone-save")
    # saved, listed, and selected on Speak with a model that clones it
    page.wait_for_selector("#tab-speak[aria-selected=true]")
    assert page.input_value("#speak-model") == "base" and page.input_value("#speak-voice") == "narrator"
    assert "narrator" in httpx.get(f"{server.url}/v1/audio/voices?kind=library").text
    speak(page, seed=4)
    assert page.is_hidden("#speak-error") and audio_duration(page) > 0.3
    page.click("#tab-voices")
    item = page.locator("#library li[data-voice=narrator]")
    assert "works with base" in item.text_content() and "Hello, this is my voice." in item.text_content()
    shot(page, "voices")


def test_record_a_reference_with_the_microphone(page, server):
    ready(page)
    page.click("#tab-voices")
    page.click("#clone-record")
    page.wait_for_function("() => /recording/.test(document.querySelector('#clone-record-status').textContent)")
    page.wait_for_timeout(1600)
    page.click("#clone-record")
    page.wait_for_function("() => /recorded/.test(document.querySelector('#clone-record-status').textContent)", timeout=15_000)
    recorded = audio_duration(page, "#clone-preview")
    assert 1.2 < recorded < 3.0
    page.fill("#clone-name", "mic-voice")
    page.click("#clone-save")
    page.wait_for_selector("#tab-speak[aria-selected=true]")
    voice = httpx.get(f"{server.url}/v1/audio/voices/mic-voice").json()
    assert voice["duration_s"] == pytest.approx(recorded, abs=0.05) and voice["source"] == "clip"
    # what the microphone heard is in the library: the fake microphone's clip is voiced, not silence
    clip, _ = sf.read(io.BytesIO(httpx.get(f"{server.url}/v1/audio/voices/mic-voice/reference").content))
    assert np.abs(clip).max() > 0.05


def test_library_plays_exports_and_deletes(page, server, tmp_path):
    clip = write_wav(tmp_path / "lib.wav", speechy(2.5))
    r = httpx.post(
        f"{server.url}/v1/audio/voices", data={"name": "librarian", "transcript": "A library voice."}, files={"file": ("lib.wav", clip.read_bytes())}
    )
    assert r.status_code == 201, r.text
    ready(page)
    page.click("#tab-voices")
    item = page.locator("#library li[data-voice=librarian]")
    item.get_by_role("button", name="Play the reference of librarian").click()
    assert audio_duration(page, "#library li[data-voice=librarian] audio") == pytest.approx(2.5, abs=0.01)
    with page.expect_download() as info:
        item.get_by_role("button", name="Export librarian").click()
    assert info.value.suggested_filename == "librarian.zip"
    with zipfile.ZipFile(info.value.path()) as z:
        assert {"librarian/reference.wav", "librarian/transcript.txt", "librarian/voice.json"} <= set(z.namelist())
        assert z.read("librarian/transcript.txt").decode().strip() == "A library voice."
    # import it back under another name (the archive's own name is taken: rename by deleting first)
    page.once("dialog", lambda d: d.accept())
    item.get_by_role("button", name="Delete librarian").click()
    page.wait_for_selector("#library li[data-voice=librarian]", state="detached")
    assert httpx.get(f"{server.url}/v1/audio/voices/librarian").status_code == 404
    page.set_input_files("#library-import", info.value.path())
    page.wait_for_selector("#library li[data-voice=librarian]")
    assert "Imported librarian" in page.text_content("#library-error")


def test_design_a_voice_and_clone_it(page, server):
    ready(page)
    page.click("#tab-voices")
    assert page.is_visible("#design-form")
    assert page.eval_on_selector_all("#design-model option", "(os) => os.map((o) => o.value)") == ["design"]
    page.fill("#design-name", "calm")
    page.fill("#design-description", "A calm, low voice, speaking slowly.")
    page.fill("#design-input", "Good evening, this is the voice you asked for.")
    page.fill("#design-seed", "2")
    page.click("#design-save")
    page.wait_for_function("() => /Designed calm/.test(document.querySelector('#design-error').textContent)", timeout=60_000)
    item = page.locator("#library li[data-voice=calm]")
    assert "design" in item.text_content() and "A calm, low voice" in item.text_content()
    item.get_by_role("button", name="Speak with calm").click()
    page.wait_for_selector("#tab-speak[aria-selected=true]")
    assert page.input_value("#speak-model") == "base" and page.input_value("#speak-voice") == "calm"


# -- history --------------------------------------------------------------------------------------
def test_history_keeps_outputs_across_a_reload_and_says_them_again(page, server):
    ready(page)
    page.select_option("#speak-voice", "serena")
    speak(page, "The first thing.", seed=21)
    speak(page, "The second thing.", seed=22)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.click("#tab-history")
    items = page.locator("#history-list li")
    assert items.count() == 2 and "The second thing." in items.nth(0).text_content()  # newest first
    assert "seed 21" in items.nth(1).text_content()
    name, data = download(page, "#history-list li:nth-child(2) button:has-text('Download')")
    assert name == "koe-cv-serena-21.wav"
    first, _ = sf.read(io.BytesIO(data), dtype="int16")
    shot(page, "history")
    # "Use again" puts the request back; speaking it gives the same audio (same seed)
    items.nth(1).get_by_role("button", name="Use again").click()
    page.wait_for_selector("#tab-speak[aria-selected=true]")
    assert page.input_value("#speak-input") == "The first thing." and page.input_value("#speak-seed") == "21"
    assert page.input_value("#speak-voice") == "serena" and page.input_value("#speak-opt-max_new_tokens") == "12"
    page.click("#speak-go")
    page.wait_for_function("() => document.querySelector('#speak-cancel').disabled")
    again, _ = sf.read(io.BytesIO(download(page, "#speak-download")[1]), dtype="int16")
    np.testing.assert_array_equal(again, first)
    page.click("#tab-history")
    page.once("dialog", lambda d: d.accept())
    page.click("#history-clear")
    page.wait_for_selector("#history-empty:not([hidden])")


# -- the page itself --------------------------------------------------------------------------------
def test_keyboard_labels_and_tabs(page, server):
    ready(page)
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]):not([hidden]), select, textarea')]
              .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.closest('[hidden]'))
              .map((e) => e.id || e.name)"""
    )
    assert unlabelled == []
    assert page.is_hidden("#tab-convert")  # no model here converts voices: the tab is not shown, and the arrows skip it
    page.focus("#tab-speak")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.id") == "tab-live" and page.is_visible("#live-form") and page.is_hidden("#speak-form")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.id") == "tab-voices" and page.is_visible("#clone-form") and page.is_hidden("#live-form")
    page.keyboard.press("End")
    assert page.evaluate("() => document.activeElement.id") == "tab-history" and page.is_visible("#history") and page.is_hidden("#clone-form")
    page.keyboard.press("ArrowRight")  # wraps
    assert page.evaluate("() => document.activeElement.id") == "tab-speak"
    # Ctrl+Enter in the text box speaks
    page.fill("#speak-input", TEXT)
    set_option(page, "max_new_tokens", 8)
    page.focus("#speak-input")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#speak-result:not([hidden])")
    page.wait_for_function("() => document.querySelector('#speak-cancel').disabled")


def test_readable_on_a_phone(phone_page, server):
    page = ready(phone_page)
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")
    speak(page, frames=8)
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")
    shot(page, "phone")
    for tab in ("#tab-live", "#tab-voices"):
        page.click(tab)
        assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth"), tab


def test_dark(dark_page, server):
    page = ready(dark_page)
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 20, 23)", background
    speak(page, frames=8)
    shot(page, "dark")


# -- a server that needs a token, a busy server -------------------------------------------------------
def test_the_page_asks_for_the_token(koe_serve, open_page):
    server = koe_serve(token="a-token-of-sixteen-chars")
    page = open_page(server)
    expect_console_errors(page, r"status of 401")
    page.goto("/")
    page.wait_for_selector("#token-dialog[open]")
    shot(page, "token")
    page.fill("#token-input", "not-the-right-token-at-all")
    page.click("#token-ok")
    page.wait_for_function("() => /not accepted/.test(document.querySelector('#token-reason').textContent)")
    page.fill("#token-input", "a-token-of-sixteen-chars")
    page.click("#token-ok")
    page.wait_for_selector("body[data-ready=true]")
    assert page.input_value("#speak-model") == "cv"
    speak(page, frames=8)
    assert page.is_hidden("#speak-error") and audio_duration(page) > 0.2
    # the token is kept for this tab only (not remembered): a new context asks again
    assert page.evaluate("() => localStorage.getItem('koe.token')") is None


def test_a_busy_server_says_when_to_try_again(koe_serve, open_page):
    server = koe_serve(queue_size=1, max_batch_size=1)
    page = ready(open_page(server))
    expect_console_errors(page, r"status of 429")
    streams: list[httpx.Response] = []
    stop = threading.Event()

    def hold(seed: int) -> None:  # a long seeded request (never batched), read slowly until told to stop
        with (
            httpx.Client(timeout=60) as http,
            http.stream("POST", f"{server.url}/v1/audio/speech", json={"model": "cv", "voice": "ryan", **LONG, "seed": seed, "stream_format": "audio"}) as r,
        ):
            streams.append(r)
            for _ in r.iter_raw():
                if stop.is_set():
                    return

    holders = [threading.Thread(target=hold, args=(s,), daemon=True) for s in (7, 8)]
    for t in holders:
        t.start()
        time.sleep(0.3)
    try:
        wait_for(lambda: server.stats().get("running", 0) == 1 and server.stats().get("waiting", 0) == 1)
        speak(page)
        error = page.text_content("#speak-error")
        assert "busy" in error and "Try again in" in error, error
    finally:
        stop.set()
        for t in holders:
            t.join(30)
    wait_for(lambda: server.stats()["running"] == 0 and server.stats()["waiting"] == 0)


def test_a_server_that_went_away_is_said_plainly(koe_serve, open_page):
    server = koe_serve(models=("cv",))
    page = ready(open_page(server))
    expect_console_errors(page, r"ERR_CONNECTION_REFUSED")
    server.stop()
    speak(page, frames=8)
    assert "the server did not answer: is koe serve still running?" in page.text_content("#speak-error")
    assert page.is_enabled("#speak-go")
