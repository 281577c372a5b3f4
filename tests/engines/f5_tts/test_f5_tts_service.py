"""F5-TTS through the product, as a user runs it: the `koe` command, the HTTP server (in-process and
a real uvicorn socket with the official OpenAI client), the voice library and the model store.

Nothing here is F5-specific code: the service, server and CLI reach F5-TTS only through the engine
contract. Tiny random-weight models; requests use a few ODE steps (`nfe_step`).
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf
from fastapi.testclient import TestClient
from fixtures_models import model_folder
from product_helpers import assert_error, decode, koe_command, speechy, wav_bytes
from test_server_e2e import live_server

import koe
from koe.engines.f5_tts.fixtures import write_random_model
from koe.server import create_app
from koe.service import KoeHome, load_settings

REF_TEXT = "A short test clip."
TEXT = "Hello there, this is koe speaking."
LONG = (
    "This text is long enough to be split into several batches by the reference's pace. "
    "Each batch is one run of the flow-matching sampler, and the batches are joined with a cross-fade. "
    "Streaming sends each batch as soon as it is made, and the joined samples are the same as one-shot synthesis."
)
OPTION_NAMES = ["nfe_step", "cfg_strength", "sway_sampling_coef", "speed", "fix_duration", "target_rms", "cross_fade_duration"]


def seconds(data: bytes) -> float:
    _, rate, samples = decode(data)
    return len(samples) / rate


@pytest.fixture(scope="module")
def f5_dir(tmp_path_factory) -> Path:
    return write_random_model(tmp_path_factory.mktemp("f5-svc") / "F5TTS_v1_Base", "F5TTS_v1_Base")


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("f5-svc-clip") / "clip.wav"
    path.write_bytes(wav_bytes(speechy(2.0)))
    return path


# -- the command -------------------------------------------------------------------------------
@pytest.fixture
def koe_cli(tmp_path, monkeypatch):
    return koe_command(tmp_path, monkeypatch)


def test_speak_from_a_clip_in_a_real_process(f5_dir, clip, tmp_path, koe_cli):
    """`koe speak --model F5_DIR --ref clip.wav --ref-text ... -o out.wav` writes a 24 kHz WAV; the same seed gives
    the same bytes (in another process too) and the samples of `koe.load(F5_DIR).generate(...)`."""
    out = tmp_path / "out.wav"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")}
    env.update(KOE_HOME=str(tmp_path / "home-proc"), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    args = ["speak", "--model", f5_dir, "--ref", clip, "--ref-text", REF_TEXT, "-o", out, "--opt", "nfe_step=4", "--seed", "3", TEXT]
    r = subprocess.run([sys.executable, "-m", "koe.cli.main", *map(str, args)], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert b"wrote" in r.stderr and b"seed 3" in r.stderr and b"voice clip" in r.stderr
    info = sf.info(out)
    assert (info.samplerate, info.channels, info.subtype, info.format) == (24000, 1, "PCM_16", "WAV")
    assert info.duration > 0.5
    again = tmp_path / "again.wav"
    koe_cli(*[again if a == out else a for a in args])
    assert again.read_bytes() == out.read_bytes()
    koe_cli(*[tmp_path / "other.wav" if a == out else ("4" if a == "3" else a) for a in args])
    assert (tmp_path / "other.wav").read_bytes() != out.read_bytes()  # another seed, other noise

    tts = koe.load(f5_dir)
    direct = tts.generate(TEXT, voice=tts.prepare_voice(str(clip), REF_TEXT), seed=3, nfe_step=4)
    written, rate = sf.read(out, dtype="float32")
    assert rate == direct.sample_rate == 24000 and len(written) == len(direct.audio)
    assert np.abs(written - direct.audio).max() <= 1 / 32767 + 1e-6  # the WAV is the engine's samples in 16 bits


def test_models_info_shows_the_options_table(f5_dir, koe_cli):
    r = koe_cli("models", "info", f5_dir)
    text = r.stdout
    assert "voices: clone" in text and "24000 Hz" in text and "F5TTS_v1_Base" in text and "status: ok" in text
    assert "--opt KEY=VALUE" in text
    for name in OPTION_NAMES:
        assert name in text
    data = json.loads(koe_cli("models", "info", f5_dir, "--json").stdout)
    assert data["family"] == "f5_tts" and data["missing"] == [] and data["speakers"] == []
    caps = data["capabilities"]
    assert caps["voice_modes"] == ["clone"] and caps["sample_rate"] == 24000
    options = {o["name"]: o for o in caps["options"]}
    assert list(options) == OPTION_NAMES
    assert options["nfe_step"]["default"] == 32 and options["nfe_step"]["range"] == "in [1, 1024]"
    assert options["cfg_strength"]["default"] == 2.0 and options["fix_duration"]["default"] is None


def test_library_voice_then_speak_with_it(f5_dir, clip, tmp_path, koe_cli):
    """`koe voices add` keeps the clip; `koe speak --voice NAME` with an F5 model prepares (and keeps) its prompt and gives
    the same audio as cloning the clip directly; a store name works as --model; `koe voices prepare` writes a prompt
    the engine loads back."""
    koe_cli("voices", "add", "kim", "--ref", clip, "--ref-text", REF_TEXT)
    koe_cli("models", "import", f5_dir, "--name", "f5", "--link")
    assert [m["name"] for m in json.loads(koe_cli("models", "list", "--json").stdout)] == ["f5"]
    fast = ["--opt", "nfe_step=4", "--seed", "5"]
    r = koe_cli("speak", TEXT, "--model", f5_dir, "--voice", "kim", *fast, "-o", tmp_path / "voice.wav")
    assert "voice kim" in r.stderr
    shown = json.loads(koe_cli("voices", "show", "kim", "--json").stdout)
    assert len(shown["prepared_for"]) == 1
    prompt = Path(shown["folder"]) / "prompts" / shown["prepared_for"][0]
    assert json.loads((prompt / "prompt.json").read_text())["family"] == "f5_tts"
    koe_cli("speak", TEXT, "--model", "f5", "--voice", "KIM", *fast, "-o", tmp_path / "store.wav")  # the kept prompt, by store name
    koe_cli("speak", TEXT, "--model", f5_dir, "--ref", clip, "--ref-text", REF_TEXT, *fast, "-o", tmp_path / "clip.wav")
    assert (tmp_path / "voice.wav").read_bytes() == (tmp_path / "clip.wav").read_bytes()
    assert (tmp_path / "store.wav").read_bytes() == (tmp_path / "clip.wav").read_bytes()

    r = koe_cli("voices", "prepare", clip, "-m", "f5", "--ref-text", REF_TEXT, "-o", tmp_path / "prompt")
    assert "wrote voice prompt" in r.stderr
    tts = koe.load(f5_dir)
    loaded, direct = tts.load_voice(tmp_path / "prompt"), tts.prepare_voice(str(clip), REF_TEXT)
    assert np.array_equal(loaded.samples, direct.samples) and loaded.ref_text == direct.ref_text
    assert np.array_equal(tts.generate(TEXT, voice=loaded, seed=1, nfe_step=2).audio, tts.generate(TEXT, voice=direct, seed=1, nfe_step=2).audio)


def test_stream_formats_speed_and_language(f5_dir, clip, tmp_path, koe_cli):
    base = ["--model", f5_dir, "--ref", clip, "--ref-text", REF_TEXT, "--opt", "nfe_step=4", "--seed", "2"]
    koe_cli("speak", TEXT, *base, "-o", tmp_path / "one.wav")
    one = sf.read(tmp_path / "one.wav", dtype="int16")[0]
    streamed = koe_cli("speak", TEXT, *base, "--stream").stdout_bytes
    assert streamed[:4] == b"RIFF" and streamed[4:8] == b"\xff\xff\xff\xff"  # a streamed WAV: unknown length
    codec, rate, samples = decode(streamed)
    assert (codec, rate) == ("pcm_s16le", 24000)
    assert samples.dtype == np.int16 and np.array_equal(samples, one)  # streaming gives the one-shot samples
    koe_cli("speak", TEXT, *base, "-o", tmp_path / "one.flac")
    assert decode((tmp_path / "one.flac").read_bytes())[:2] == ("flac", 24000)
    length = len(one) / 24000
    koe_cli("speak", TEXT, *base, "--speed", "2", "-o", tmp_path / "fast.wav")  # native_speed: the model's own rate
    koe_cli("speak", TEXT, *base, "--opt", "speed=2", "-o", tmp_path / "native.wav")
    assert sf.info(tmp_path / "native.wav").duration == pytest.approx(length / 2, rel=0.1)
    assert (tmp_path / "fast.wav").read_bytes() == (tmp_path / "native.wav").read_bytes()
    koe_cli("speak", "你好，世界！今天天气很好。", *base, "--language", "chinese", "-o", tmp_path / "zh.wav")
    assert sf.info(tmp_path / "zh.wav").duration > 0.3
    home = KoeHome(load_settings(koe_cli.home, environ={}))
    history = home.db.list_outputs(20)
    home.close()
    assert {row.model for row in history} == {f5_dir.name} and len(history) >= 5


# -- the server, in-process --------------------------------------------------------------------
def speech_body(**body) -> dict:
    return {"model": "f5", "input": TEXT, "voice": "kim", "response_format": "wav", "options": {"nfe_step": 4}, **body}


@pytest.fixture(scope="module")
def server_home(tmp_path_factory, f5_dir, clip):
    """A KOE_HOME with the F5 model "f5" (the default) and a Qwen3-TTS Base model "base" installed."""
    root = tmp_path_factory.mktemp("f5-server-home")
    settings = load_settings(root, flags={"models": {"default": "f5"}, "server": {"max_reference_seconds": 10.0}}, environ={})
    home = KoeHome(settings)
    home.models.import_model(f5_dir, "f5", link=True)
    home.models.import_model(model_folder(tmp_path_factory.getbasetemp(), "base", "tiny"), "base", link=True)
    return home


@pytest.fixture(scope="module")
def client(server_home, clip):
    with TestClient(create_app(server_home, first_chunk_s=0.5, chunk_s=1.0)) as c:
        r = c.post("/v1/audio/voices", data={"name": "kim", "transcript": REF_TEXT}, files={"file": ("clip.wav", clip.read_bytes(), "audio/wav")})
        assert r.status_code == 201, r.text
        yield c


def test_models_list_the_f5_model(client):
    h = client.get("/health").json()
    assert h["models_loaded"] == ["f5"]  # the default model loads at startup
    cards = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert set(cards) == {"f5", "base"}
    f5 = cards["f5"]
    assert f5["family"] == "f5_tts" and f5["variant"] == "F5TTS_v1_Base" and f5["default"] and f5["loaded"]
    assert f5["voice_modes"] == ["clone"] and f5["speakers"] == [] and f5["languages"] == ["auto", "chinese", "english"]
    assert [o["name"] for o in f5["options"]] == OPTION_NAMES and "cloning" in f5["uses"]
    assert cards["base"]["family"] == "qwen3_tts" and cards["base"]["voice_modes"] == ["clone", "clone_without_transcript"]
    assert client.get("/v1/models/f5").json() == f5


def test_speech_with_a_library_voice(client, server_home):
    r = client.post("/v1/audio/speech", json=speech_body(seed=5))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"
    assert (r.headers["x-koe-model"], r.headers["x-koe-voice"], r.headers["x-koe-seed"]) == ("f5", "kim", "5")
    codec, rate, samples = decode(r.content)
    assert (codec, rate) == ("pcm_s16le", 24000) and len(samples) / rate == pytest.approx(float(r.headers["x-koe-duration"]), abs=1e-3)
    flat = client.post("/v1/audio/speech", json={**speech_body(seed=5, options=None), "nfe_step": 4})
    assert flat.status_code == 200 and flat.content == r.content  # flat options are the same options
    voice = {"id": "kim"}
    assert client.post("/v1/audio/speech", json=speech_body(seed=5, voice=voice)).content == r.content
    assert client.post("/v1/audio/speech", json=speech_body(seed=6)).content != r.content
    f5_key = server_home.models.get("f5").ref.key
    assert f5_key in server_home.voices.get("kim").prepared_for
    for fmt, codec in (("mp3", "mp3"), ("opus", "opus"), ("pcm", None)):
        out = client.post("/v1/audio/speech", json=speech_body(seed=5, response_format=fmt))
        assert out.status_code == 200, out.text
        if codec:
            assert decode(out.content)[0].startswith(codec)
        else:
            pcm = np.frombuffer(out.content, "<i2").astype(np.int32)  # raw s16le: the WAV's samples, up to the scale (see below)
            assert len(pcm) == len(samples) and np.abs(pcm - samples).max() <= 1


def test_pcm_and_wav_carry_the_same_samples(client):
    wav = client.post("/v1/audio/speech", json=speech_body(seed=5))
    pcm = client.post("/v1/audio/speech", json=speech_body(seed=5, response_format="pcm"))
    assert np.array_equal(np.frombuffer(pcm.content, "<i2"), decode(wav.content)[2])


@pytest.mark.filterwarnings("ignore:speech was cut off")  # Qwen3-TTS with max_new_tokens=4
def test_the_same_voice_on_both_families(client, server_home):
    """One library voice, two families: each model keeps its own prompt."""
    qwen = client.post("/v1/audio/speech", json=speech_body(model="base", options={"max_new_tokens": 4}, seed=1))
    assert qwen.status_code == 200, qwen.text
    f5 = client.post("/v1/audio/speech", json=speech_body(seed=1))
    assert f5.status_code == 200, f5.text
    keys = {server_home.models.get(n).ref.key for n in ("f5", "base")}
    assert keys <= set(server_home.voices.get("kim").prepared_for)


def test_options_speed_and_instructions(client):
    plain = client.post("/v1/audio/speech", json=speech_body(seed=2))
    native = client.post("/v1/audio/speech", json=speech_body(seed=2, options={"nfe_step": 4, "speed": 2.0}))
    fast = client.post("/v1/audio/speech", json=speech_body(seed=2, speed=2.0, options={"nfe_step": 4}))
    fixed = client.post("/v1/audio/speech", json=speech_body(seed=2, options={"nfe_step": 4, "fix_duration": 4.0}))
    length = seconds(plain.content)
    assert seconds(native.content) == pytest.approx(length / 2, rel=0.1)  # the model's own speaking rate
    assert fast.content == native.content  # OpenAI's speed on a native_speed model is the model's own rate
    assert seconds(fixed.content) == pytest.approx(4.0 - 2.0, abs=0.1)  # fix_duration counts the ~2 s reference
    r = client.post("/v1/audio/speech", json=speech_body(seed=2, instructions="Whisper, please."))
    assert r.status_code == 200 and "ignores instructions" in r.headers["x-koe-warnings"]
    zh = client.post("/v1/audio/speech", json=speech_body(input="你好，世界！今天天气很好。", language="chinese"))
    assert zh.status_code == 200, zh.text


@pytest.mark.parametrize(
    ("body", "status", "words", "param"),
    [
        ({"options": {"steps": 4}}, 400, ["unknown option(s) 'steps'", "valid: " + ", ".join(OPTION_NAMES)], "steps"),
        ({"options": None, "steps": 4}, 400, ["steps: unknown field", ", ".join(OPTION_NAMES)], "steps"),
        ({"options": {"temperature": 0.7}}, 400, ["'temperature'", "nfe_step"], "temperature"),
        ({"options": {"nfe_step": 0}}, 400, ["nfe_step=0", "[1, 1024]"], "nfe_step"),
        ({"options": {"nfe_step": "many"}}, 400, ["nfe_step='many'"], "nfe_step"),
        ({"options": {"speed": -1}}, 400, ["speed=-1"], "speed"),
        ({"options": {"target_rms": 0}}, 400, ["target_rms=0"], "target_rms"),
        ({"options": None, "nfe_step": 4, "cfg_strength": 1.0, "extra": {"nfe_step": 4}}, 400, ["extra: unknown field"], "extra"),
        ({"options": {"nfe_step": 4}, "nfe_step": 4}, 400, ["given both"], "nfe_step"),
        ({"voice": "alloy"}, 400, ["OpenAI voice 'alloy' has no meaning on 'f5'", "voice cloning", "library voice"], "voice"),
        ({"voice": "echo", "model": "tts-1"}, 400, ["OpenAI voice 'echo' has no meaning on 'f5'"], "voice"),
        ({"voice": "ryan"}, 404, ["unknown voice 'ryan'", "kim"], "voice"),
        ({"language": "german"}, 400, ["unsupported language 'german'", "auto, chinese, english"], "language"),
        ({"input": "  "}, 400, ["input text is empty"], "input"),
    ],
)
def test_bad_requests_are_clear_4xx(client, body, status, words, param):
    assert_error(client.post("/v1/audio/speech", json=speech_body(**body)), status, *words, param=param)


def test_a_voice_f5_cannot_use_is_a_clear_400_and_keeps_no_prompt(client, server_home, clip):
    r = client.post("/v1/audio/voices", data={"name": "notext"}, files={"file": ("clip.wav", clip.read_bytes(), "audio/wav")})
    assert r.status_code == 201 and r.json()["transcript"] is None
    assert_error(client.post("/v1/audio/speech", json=speech_body(voice="notext")), 400, "needs the reference's transcript", param="voice")
    assert server_home.voices.get("notext").prepared_for == []
    hiss = (1e-4 * np.random.default_rng(0).standard_normal(48000)).astype(np.float32)
    r = client.post("/v1/audio/voices", data={"name": "hiss", "transcript": REF_TEXT}, files={"file": ("h.wav", wav_bytes(hiss), "audio/wav")})
    assert r.status_code == 201
    assert_error(client.post("/v1/audio/speech", json=speech_body(voice="hiss")), 400, "reference audio is silent")
    assert server_home.voices.get("hiss").prepared_for == []
    bad = client.post("/v1/audio/voices", data={"name": "junk", "transcript": REF_TEXT}, files={"file": ("j.wav", b"not audio" * 50, "audio/wav")})
    assert_error(bad, 400, "reference audio")
    assert "junk" not in [v["name"] for v in client.get("/v1/audio/voices").json()["data"]]
    assert client.get("/health").json()["queues"]["f5"]["failed"] >= 0  # the queue survives failed requests
    assert client.post("/v1/audio/speech", json=speech_body(seed=1)).status_code == 200


def test_streaming_gives_the_one_shot_samples(client):
    """stream_format=audio and sse, over a text of several batches: the same samples as one-shot, in several chunks."""
    body = speech_body(input=LONG, seed=9, response_format="pcm")
    whole = client.post("/v1/audio/speech", json=body)
    assert whole.status_code == 200, whole.text
    with client.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "audio"}) as r:
        assert r.status_code == 200 and "content-length" not in r.headers and r.headers["x-koe-model"] == "f5"
        chunks = list(r.iter_bytes())
    assert b"".join(chunks) == whole.content
    with client.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "sse"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: ") :]) for line in r.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"}
    assert len(kinds) >= 3, "a multi-batch text streams in several chunks"
    assert b"".join(base64.b64decode(e["audio"]) for e in events[:-1]) == whole.content
    usage = events[-1]["usage"]
    assert usage["input_tokens"] == len(LONG) and usage["output_tokens"] > 0
    mp3 = client.post("/v1/audio/speech", json={**speech_body(seed=9, response_format="mp3"), "stream_format": "audio"})
    assert mp3.status_code == 200 and decode(mp3.content)[0].startswith("mp3")
    assert_error(client.post("/v1/audio/speech", json={**speech_body(voice="alloy"), "stream_format": "audio"}), 400, "has no meaning")


# -- a real server and the official client -----------------------------------------------------
def test_openai_client_against_a_real_server(tmp_path, f5_dir, clip, client):
    home = KoeHome(load_settings(tmp_path / "home", flags={"models": {"default": "f5"}}, environ={}))
    home.models.import_model(f5_dir, "f5", link=True)
    expected = client.post("/v1/audio/speech", json=speech_body(seed=11)).content  # the in-process app, same clip and seed
    with live_server(create_app(home)) as s:
        r = httpx.post(f"{s.url}/v1/audio/voices", data={"name": "kim", "transcript": REF_TEXT}, files={"file": ("clip.wav", clip.read_bytes(), "audio/wav")})
        assert r.status_code == 201, r.text
        api = openai.OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0)
        assert {m.id for m in api.models.list()} == {"f5"}
        audio = api.audio.speech.create(model="f5", voice="kim", input=TEXT, response_format="wav", extra_body={"options": {"nfe_step": 4}, "seed": 11})
        assert audio.read() == expected
        default = api.audio.speech.create(model="tts-1", voice="kim", input=TEXT, response_format="wav", extra_body={"nfe_step": 4, "seed": 11})
        assert default.read() == expected  # tts-1 is the default model; a flat option
        with api.audio.speech.with_streaming_response.create(
            model="f5", voice="kim", input=LONG, response_format="pcm", stream_format="audio", extra_body={"options": {"nfe_step": 2}, "seed": 1}
        ) as resp:
            assert resp.headers["content-type"] == "audio/pcm"
            streamed = b"".join(resp.iter_bytes())
        assert len(streamed) > 2 * 24000 and len(streamed) % 2 == 0

        def one(i: int):
            raw = api.audio.speech.with_raw_response.create(
                model="f5", voice="kim", input=f"Request number {i}, in a cloned voice.", response_format="wav", extra_body={"nfe_step": 2}
            )
            return raw.headers["x-koe-batch-size"], decode(raw.content)[:2]

        with concurrent.futures.ThreadPoolExecutor(4) as pool:  # F5-TTS does not batch: each runs in turn, all answered
            assert list(pool.map(one, range(4))) == [("1", ("pcm_s16le", 24000))] * 4
        assert httpx.get(f"{s.url}/health").json()["queues"]["f5"]["failed"] == 0
        with pytest.raises(openai.BadRequestError) as e:
            api.audio.speech.create(model="f5", voice="alloy", input=TEXT)
        assert "has no meaning on 'f5'" in e.value.message and "library voice" in e.value.message
        with pytest.raises(openai.BadRequestError) as e:
            api.audio.speech.create(model="f5", voice="kim", input=TEXT, extra_body={"options": {"nfe_steps": 4}})
        assert "'nfe_steps'" in e.value.message and "nfe_step" in e.value.message
        with pytest.raises(openai.NotFoundError):
            api.audio.speech.create(model="nope", voice="kim", input=TEXT)
