"""The web page at `/` with the toy family (tests/plugins/koe_sine, installed by `toy_family`): a real `koe serve`
whose only model is the plugin's, driven in headless Chromium (tests/browser.py). The page knows no family: its
model list, voices and option fields come from GET /v1/models, so a family in a package of its own appears there
as the built-ins do, and speaks.

The sine model converts voices (cheaply), so the Convert tab is tested here: a file and a recording from the
(fake) microphone, into a library voice or an uploaded clip, each result the API's own. So is the Stream text tab
(streamed text over the WebSocket, for any model): typed, and pasted text sent in pieces, the speech arriving
before the text has ended and equal to the API's; cancelled; and with a server that needs its token (which a
browser can send on a WebSocket only as a subprotocol)."""

from __future__ import annotations

import io
import json
import time

import httpx
import numpy as np
import pytest
import soundfile as sf
from browser import audio_duration, download, expect_console_errors, ready, shot
from product_helpers import speechy, write_wav
from toy_family import HUM_HZ, peak_hz, start_sine_serve
from websockets.sync.client import connect

from koe.server.routes.speech_stream import PATH

pytest_plugins = ["browser", "toy_family"]
RATE = 16000  # the sine model's sample rate
WORD_S = 0.2  # one 0.2 s tone per word
TOKEN = "a-long-enough/test+token=0123456789"  # '/', '+', '=': not a subprotocol's characters as they are


@pytest.fixture(scope="module")
def server(sine_site, sine_model, tmp_path_factory):
    """The page fixtures open the fixture named `server`: here `koe serve` with the sine model (the default)."""
    s = start_sine_serve(sine_site, sine_model, tmp_path_factory.mktemp("sine-web"))
    yield s
    s.stop()


def test_the_page_lists_the_plugin_model_its_voices_and_option_and_speaks_with_it(page, server):
    page.goto("/")
    page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    models = page.eval_on_selector_all("#speak-model option", "(os) => os.map((o) => [o.value, o.textContent])")
    assert [m for m, _ in models] == ["sine"] and dict(models)["sine"].startswith("sine — Sine")
    assert "random weights" in dict(models)["sine"]
    voices = page.eval_on_selector_all("#speak-voice option", "(os) => os.map((o) => o.value)")
    assert {"low", "high", "alloy", "hum"} <= set(voices)  # presets, OpenAI names (openai_voice), the library's clone
    page.locator("#speak-options-box").evaluate("(d) => { d.open = true; }")
    assert page.get_attribute("#speak-opt-pitch_shift", "min") == "-24" and page.get_attribute("#speak-opt-pitch_shift", "max") == "24"
    page.select_option("#speak-voice", "hum")
    page.fill("#speak-opt-pitch_shift", "12")
    page.fill("#speak-input", "Hello there.")
    page.fill("#speak-seed", "5")
    page.click("#speak-go")
    page.wait_for_function("() => document.querySelector('#speak-cancel').disabled", timeout=60_000)
    page.wait_for_function("() => document.querySelector('#speak-audio').readyState >= 1", timeout=15_000)
    assert page.evaluate("() => document.querySelector('#speak-audio').duration") == pytest.approx(0.4, abs=0.02)  # two words
    assert "seed 5" in page.text_content("#speak-metrics")


def api_conversion(server, source: bytes, **fields) -> bytes:
    files = {"file": ("speech.wav", source)}
    if "reference" in fields:
        files["reference"] = ("voice.wav", fields.pop("reference"))
    r = httpx.post(f"{server.url}/v1/audio/conversions", data=fields, files=files, headers=server.headers(), timeout=60)
    assert r.status_code == 200, r.text
    return r.content


def api_stream(server, text: str, **start) -> np.ndarray:
    """The API's streamed-text answer for `text` (one piece) as int16 samples."""
    url = server.url.replace("http://", "ws://") + PATH
    audio = b""
    with connect(url, open_timeout=10, additional_headers=server.headers()) as ws:
        ws.send(json.dumps({"type": "start", "model": "sine", "response_format": "pcm", **start}))
        ws.send(json.dumps({"type": "text", "text": text}))
        ws.send(json.dumps({"type": "end"}))
        for message in ws:
            if isinstance(message, bytes):
                audio += message
    return np.frombuffer(audio, "<i2")


def tone(path, hz: float, seconds: float = 3.0, rate: int = 24000):
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, (0.4 * np.sin(2 * np.pi * hz * t)).astype(np.float32), rate)
    return path


# -- Convert ----------------------------------------------------------------------------------------
def test_convert_a_file_into_a_library_voice_and_into_an_uploaded_clip(page, server, tmp_path):
    source = write_wav(tmp_path / "speech.wav", speechy(2.0))
    ready(page)
    assert page.is_visible("#tab-convert")  # the sine model converts
    page.click("#tab-convert")
    assert page.eval_on_selector_all("#convert-model option", "(os) => os.map((o) => o.value)") == ["sine"]
    assert page.eval_on_selector_all("#convert-voice option", "(os) => os.map((o) => o.value)") == ["hum"]  # library voices only
    page.set_input_files("#convert-file", str(source))
    page.fill("#convert-seed", "3")
    page.click("#convert-go")
    page.wait_for_function("() => document.querySelector('#convert-cancel').disabled && !document.querySelector('#convert-result').hidden", timeout=60_000)
    assert page.is_hidden("#convert-error") and audio_duration(page, "#convert-audio") == pytest.approx(2.0, abs=0.01)
    assert "seed 3" in page.text_content("#convert-metrics")
    name, data = download(page, "#convert-download")
    assert name == "koe-convert-sine-hum-3.wav"
    assert data == api_conversion(server, source.read_bytes(), voice="hum", model="sine", response_format="wav", seed="3")  # the API's own answer
    samples, rate = sf.read(io.BytesIO(data))
    assert rate == RATE and abs(peak_hz(samples, rate) - HUM_HZ) < 5  # said in hum's voice
    # into the voice of a clip (a 300 Hz one)
    clip = tone(tmp_path / "voice.wav", 300.0)
    page.check("#convert-target-clip")
    assert page.is_disabled("#convert-voice")
    page.set_input_files("#convert-reference", str(clip))
    page.select_option("#convert-response-format", "flac")
    page.click("#convert-go")
    page.wait_for_function("() => /koe-convert-sine-clip-3.flac/.test(document.querySelector('#convert-download').textContent)", timeout=60_000)
    name, data = download(page, "#convert-download")
    assert data == api_conversion(server, source.read_bytes(), reference=clip.read_bytes(), model="sine", response_format="flac", seed="3")
    samples, rate = sf.read(io.BytesIO(data))
    assert abs(peak_hz(samples, rate) - 300.0) < 5 and len(samples) / rate == pytest.approx(2.0, abs=0.01)
    shot(page, "convert")


def test_convert_a_recording_and_a_missing_source_is_the_apis_message_on_its_field(page, server):
    ready(page)
    expect_console_errors(page, r"status of 400")
    page.click("#tab-convert")
    page.click("#convert-go")  # nothing to convert yet
    page.wait_for_selector("#convert-error:not([hidden])")
    assert "speech to convert" in page.text_content("#convert-error") and page.get_attribute("#convert-file", "aria-invalid") == "true"
    page.click("#convert-record")
    page.wait_for_function("() => /recording/.test(document.querySelector('#convert-record-status').textContent)")
    page.wait_for_timeout(1600)
    page.click("#convert-record")
    page.wait_for_function("() => /recorded/.test(document.querySelector('#convert-record-status').textContent)", timeout=15_000)
    recorded = audio_duration(page, "#convert-preview")
    assert 1.2 < recorded < 3.0
    page.click("#convert-go")
    page.wait_for_function("() => document.querySelector('#convert-cancel').disabled && document.querySelector('#convert-audio').src !== ''", timeout=60_000)
    assert page.is_hidden("#convert-error") and audio_duration(page, "#convert-audio") == pytest.approx(recorded, abs=0.05)


# -- Stream text ------------------------------------------------------------------------------------
def start_live(page, voice: str = "low", seed: int | None = 7) -> None:
    page.click("#tab-live")
    page.select_option("#live-voice", voice)
    page.fill("#live-seed", "" if seed is None else str(seed))
    page.click("#live-start")
    page.wait_for_function("() => !document.querySelector('#live-input').disabled", timeout=30_000)


def live_samples(page) -> np.ndarray:
    page.wait_for_selector("#live-result:not([hidden])", timeout=60_000)
    name, data = download(page, "#live-download")
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == RATE and name.startswith("koe-live-sine-")
    return samples


def test_typed_text_is_spoken_as_it_is_typed_and_equals_the_apis(page, server):
    ready(page)
    assert "each sentence is spoken once it is complete" in page.text_content("#live-model-about").lower()
    start_live(page)
    page.type("#live-input", "Hello there. How ", delay=20)  # keystrokes: each is sent as it is typed
    page.wait_for_function("() => /of audio so far/.test(document.querySelector('#live-status').textContent)", timeout=30_000)  # before the end
    page.type("#live-input", "are you today?", delay=20)
    page.fill("#live-input", "Changed!")  # what is sent cannot be changed
    assert page.input_value("#live-input") == "Hello there. How are you today?"
    page.click("#live-end")
    samples = live_samples(page)
    assert "seed 7" in page.text_content("#live-metrics") and "first audio" in page.text_content("#live-metrics")
    np.testing.assert_array_equal(samples, api_stream(server, "Hello there. How are you today?", voice="low", seed=7))
    shot(page, "stream-text")


def test_a_pasted_text_is_sent_in_pieces_then_ended(page, server):
    ready(page)
    page.click("#tab-live")
    page.select_option("#live-voice", "high")
    page.fill("#live-seed", "9")
    page.locator("#live-pieces-box").evaluate("(d) => { d.open = true; }")
    text = "One. Two three. Four five six."
    page.fill("#live-paste", text)
    page.select_option("#live-pace", "40")
    page.click("#live-pieces")  # starts the stream, sends a word at a time, ends it
    samples = live_samples(page)
    assert page.input_value("#live-input") == text and len(samples) / RATE >= 6 * WORD_S
    np.testing.assert_array_equal(samples, api_stream(server, text, voice="high", seed=9))


def test_the_family_options_go_with_the_start_and_a_refused_start_is_shown_on_its_field(page, server):
    ready(page)
    expect_console_errors(page, r"WebSocket connection .* failed")  # Chromium's line for a connection closed with an error code
    page.click("#tab-live")
    page.locator("#live-options-box").evaluate("(d) => { d.open = true; }")
    assert page.get_attribute("#live-opt-pitch_shift", "max") == "24"  # the schema's field, as on Speak
    page.fill("#live-opt-pitch_shift", "99")
    page.click("#live-start")
    page.wait_for_selector("#live-error:not([hidden])", timeout=30_000)
    assert "pitch_shift" in page.text_content("#live-error") and page.get_attribute("#live-opt-pitch_shift", "aria-invalid") == "true"
    assert page.is_enabled("#live-start") and page.is_disabled("#live-input")
    page.fill("#live-opt-pitch_shift", "12")
    page.fill("#live-seed", "4")
    page.click("#live-start")
    page.wait_for_function("() => !document.querySelector('#live-input').disabled", timeout=30_000)
    page.type("#live-input", "Hi.")
    page.click("#live-end")
    samples = live_samples(page)
    assert page.is_hidden("#live-error")
    np.testing.assert_array_equal(samples, api_stream(server, "Hi.", voice=page.input_value("#live-voice"), seed=4, options={"pitch_shift": 12}))


def test_cancel_closes_the_stream_and_frees_the_model(page, server):
    ready(page)
    before = server.stats("sine").get("cancelled", 0)
    start_live(page, seed=None)
    page.type("#live-input", "Hello there. How ")
    page.wait_for_function("() => /of audio so far/.test(document.querySelector('#live-status').textContent)", timeout=30_000)
    page.click("#live-cancel")
    page.wait_for_function("() => document.querySelector('#live-status').textContent === 'Cancelled.'")
    deadline = time.monotonic() + 10
    while server.stats("sine").get("cancelled", 0) != before + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.stats("sine")["cancelled"] == before + 1 and server.stats("sine")["running"] == 0
    assert page.is_enabled("#live-start") and page.is_hidden("#live-error")


@pytest.fixture(scope="module")
def token_server(sine_site, sine_model, tmp_path_factory):
    s = start_sine_serve(sine_site, sine_model, tmp_path_factory.mktemp("sine-web-token"), token=TOKEN)
    yield s
    s.stop()


def test_with_a_token_the_page_streams_text_over_the_subprotocol(open_page, token_server):
    page = open_page(token_server)
    expect_console_errors(page, r"status of 401")
    page.goto("/")
    page.wait_for_selector("#token-dialog[open]")
    page.fill("#token-input", TOKEN)
    page.click("#token-ok")
    page.wait_for_selector("body[data-ready=true]")
    start_live(page)
    page.type("#live-input", "Hi there.")
    page.click("#live-end")
    samples = live_samples(page)
    np.testing.assert_array_equal(samples, api_stream(token_server, "Hi there.", voice="low", seed=7))
    assert TOKEN not in token_server.log()
    # a handshake that fails (here: the server has gone) is a failed connection to the browser, without the
    # server's message: the page says what may have happened
    token_server.stop()
    expect_console_errors(page, r"WebSocket connection .* failed")
    page.click("#live-start")
    page.wait_for_selector("#live-error:not([hidden])", timeout=15_000)
    assert "refused the connection" in page.text_content("#live-error") and page.is_enabled("#live-start")


def test_the_new_tabs_fit_a_phone(phone_page, server):
    page = ready(phone_page)
    for tab in ("#tab-live", "#tab-convert"):
        page.click(tab)
        assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth"), tab


def test_raw_pcm_plays_at_the_models_rate(page, server):
    """`pcm` comes at the model's sample rate (16 kHz here, not Qwen3-TTS's 24): the page plays and wraps it at that rate."""
    ready(page)
    page.select_option("#speak-voice", "low")
    page.select_option("#speak-response-format", "pcm")
    page.fill("#speak-input", "Hello there.")
    page.fill("#speak-seed", "5")
    page.click("#speak-go")
    page.wait_for_function("() => document.querySelector('#speak-cancel').disabled", timeout=60_000)
    assert audio_duration(page, "#speak-audio") == pytest.approx(2 * WORD_S, abs=0.01)  # two words
    name, data = download(page, "#speak-download")
    assert name == "koe-sine-low-5.pcm" and len(data) == round(2 * WORD_S * RATE) * 2
