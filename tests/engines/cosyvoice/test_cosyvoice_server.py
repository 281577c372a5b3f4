"""CosyVoice through a real `koe serve`: text streamed in over `WS /v1/audio/speech/stream` (the family
decodes streamed text itself: the LM takes the text's ids as they come), and `POST
/v1/audio/conversions` into a library voice. A random-weight CosyVoice 2 folder, tiny."""

from __future__ import annotations

import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf
from browser import start_koe_serve
from product_helpers import run_koe
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from koe.engines.cosyvoice.fixtures import write_random_model
from koe.server.routes.speech_stream import PATH

pytestmark = pytest.mark.slow  # koe serve in a real process

RATE = 24000


def _tone(seconds: float, hz: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * hz * t * (1 + 0.05 * np.sin(2 * np.pi * 3 * t)))).astype(np.float32)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice-serve")
    model = write_random_model(root / "CosyVoice2-0.5B", "CosyVoice2-0.5B")
    home = root / "home"
    sf.write(root / "ref.wav", _tone(2.0, 150), RATE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KOE_HOME", str(home))
        run_koe("models", "import", model, "--name", "cosy", "--link")
        run_koe("voices", "add", "alice", "--ref", root / "ref.wav", "--ref-text", "A reference clip.")
    s = start_koe_serve(home, root, models=(), default="cosy")
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
    sf.write(source, _tone(1.6, 220, 16000), 16000, format="WAV")
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
    sf.write(too_long, _tone(31.0, 220, 16000), 16000, format="WAV")
    refused = httpx.post(
        f"{server.url}/v1/audio/conversions",
        files={"file": ("long.wav", too_long.getvalue(), "audio/wav")},
        data={"model": "cosy", "voice": "alice"},
        headers=server.headers(),
        timeout=120,
    )
    assert refused.status_code == 400 and "at most 30 s" in refused.json()["error"]["message"]
