"""The web page at `/` with CosyVoice (a random-weight CosyVoice 2, tiny), in headless Chromium (tests/browser.py):
the first built-in family that converts voices and reads streamed text itself. The Convert tab is shown for it and
converts into a library voice, as the API does; the Stream text tab says the model reads the text as it comes, and
the speech it makes from a pasted text sent a word at a time (with the family's option set on the tab) is the API's
for the same pieces."""

from __future__ import annotations

import io
import json
import re

import httpx
import numpy as np
import pytest
import soundfile as sf
from browser import download, ready
from cosyvoice_serve import RATE, start_cosyvoice_serve, tone
from websockets.sync.client import connect

from koe.server.routes.speech_stream import PATH

pytest_plugins = ["browser"]

TEXT = "Hello there, how are you?"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The page fixtures open the fixture named `server`: `koe serve` with the model `cosy` and the library voice `alice`."""
    s = start_cosyvoice_serve(tmp_path_factory.mktemp("cosyvoice-web"))
    yield s
    s.stop()


def test_convert_into_a_library_voice(page, server, tmp_path):
    source = tmp_path / "speech.wav"
    sf.write(source, tone(1.6, 220, 16000), 16000)
    ready(page)
    page.click("#tab-convert")
    assert page.eval_on_selector_all("#convert-model option", "(os) => os.map((o) => o.value)") == ["cosy"]
    assert page.input_value("#convert-voice") == "alice"
    page.set_input_files("#convert-file", str(source))
    page.fill("#convert-seed", "3")
    page.click("#convert-go")
    page.wait_for_function("() => document.querySelector('#convert-cancel').disabled && document.querySelector('#convert-audio').src !== ''", timeout=120_000)
    name, data = download(page, "#convert-download")
    assert name == "koe-convert-cosy-alice-3.wav"
    r = httpx.post(
        f"{server.url}/v1/audio/conversions",
        files={"file": ("speech.wav", source.read_bytes(), "audio/wav")},
        data={"model": "cosy", "voice": "alice", "seed": "3", "response_format": "wav"},
        timeout=120,
    )
    assert r.status_code == 200 and data == r.content  # the API's own answer
    assert len(sf.read(io.BytesIO(data))[0]) == 40 * 960  # 1.6 s of source: 40 speech tokens, 960 samples each


def test_stream_text_reads_the_pieces_as_they_come(page, server):
    ready(page)
    page.click("#tab-live")
    assert page.text_content("#live-model-about").startswith("This model reads streamed text itself")
    page.select_option("#live-voice", "alice")
    page.fill("#live-seed", "7")
    page.locator("#live-options-box").evaluate("(d) => { d.open = true; }")
    page.fill("#live-opt-max_tokens", "40")  # random weights: a cap keeps it short
    page.locator("#live-pieces-box").evaluate("(d) => { d.open = true; }")
    page.fill("#live-paste", TEXT)
    page.select_option("#live-pace", "40")
    page.click("#live-pieces")
    page.wait_for_selector("#live-result:not([hidden])", timeout=120_000)
    assert page.is_hidden("#live-error")
    _, data = download(page, "#live-download")
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == RATE and len(samples) > 0
    # the API's answer for the same pieces (the page sends a word at a time, with the spaces after it)
    audio = b""
    with connect(server.url.replace("http://", "ws://") + PATH, open_timeout=30) as ws:
        ws.send(json.dumps({"type": "start", "model": "cosy", "voice": "alice", "response_format": "pcm", "seed": 7, "options": {"max_tokens": 40}}))
        for piece in re.findall(r"\s*\S+\s*", TEXT):
            ws.send(json.dumps({"type": "text", "text": piece}))
        ws.send(json.dumps({"type": "end"}))
        for message in ws:
            if isinstance(message, bytes):
                audio += message
    np.testing.assert_array_equal(samples, np.frombuffer(audio, "<i2"))
