"""CosyVoice through a real `koe serve`: text streamed in over `WS /v1/audio/speech/stream` (the family
decodes streamed text itself: the LM takes the text's ids as they come), and `POST
/v1/audio/conversions` into a library voice. A random-weight CosyVoice 2 folder, tiny."""

from __future__ import annotations

import io
import json

import httpx
import pytest
import soundfile as sf
from cosyvoice_serve import RATE, start_cosyvoice_serve, tone
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from koe.server.routes.speech_stream import PATH

pytestmark = pytest.mark.slow  # koe serve in a real process


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_cosyvoice_serve(tmp_path_factory.mktemp("cosyvoice-serve"))
    yield s
    s.stop()


def _speak_streamed(server, pieces: list[str], seed: int) -> tuple[dict, bytes, list[dict]]:
    url = server.url.replace("http://", "ws://") + PATH
    with connect(url, open_timeout=30, additional_headers=server.headers()) as ws:
        ws.send(json.dumps({"type": "start", "model": "cosy", "voice": "alice", "response_format": "pcm", "seed": seed, "options": {"max_tokens": 40}}))
        started = json.loads(ws.recv(timeout=60))
        for piece in pieces:
            ws.send(json.dumps({"type": "text", "text": piece}))
        ws.send(json.dumps({"type": "end"}))
        audio, events = b"", []
        try:
            while True:
                message = ws.recv(timeout=120)
                if isinstance(message, bytes):
                    audio += message
                else:
                    events.append(json.loads(message))
        except ConnectionClosed:
            pass
        assert ws.close_code == 1000, events
    return started, audio, events


def test_streamed_text_goes_to_the_lm_as_it_comes(server):
    pieces = ["Hello ", "there, ", "how are ", "you today?"]
    started, audio, events = _speak_streamed(server, pieces, seed=7)
    assert started["type"] == "speech.started" and started["text_stream"] is True and started["sample_rate"] == RATE
    assert [e["type"] for e in events] == ["speech.audio.done"] and len(audio) > 0 and len(audio) % 2 == 0
    assert events[0]["duration"] == pytest.approx(len(audio) / 2 / RATE, abs=1e-3)
    again = _speak_streamed(server, pieces, seed=7)[1]
    assert again == audio  # the same seed, the same samples


def test_conversion_into_a_library_voice(server):
    source = io.BytesIO()
    sf.write(source, tone(1.6, 220, 16000), 16000, format="WAV")
    r = httpx.post(
        f"{server.url}/v1/audio/conversions",
        files={"file": ("speech.wav", source.getvalue(), "audio/wav")},
        data={"model": "cosy", "voice": "alice", "seed": "3", "response_format": "wav"},
        headers=server.headers(),
        timeout=120,
    )
    assert r.status_code == 200, r.text
    out, rate = sf.read(io.BytesIO(r.content), dtype="float32")
    assert rate == RATE and len(out) == 40 * 960  # 1.6 s of source: 40 speech tokens, 960 samples each
    too_long = io.BytesIO()
    sf.write(too_long, tone(31.0, 220, 16000), 16000, format="WAV")
    refused = httpx.post(
        f"{server.url}/v1/audio/conversions",
        files={"file": ("long.wav", too_long.getvalue(), "audio/wav")},
        data={"model": "cosy", "voice": "alice"},
        headers=server.headers(),
        timeout=120,
    )
    assert refused.status_code == 400 and "at most 30 s" in refused.json()["error"]["message"]
