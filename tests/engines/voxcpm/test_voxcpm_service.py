"""VoxCPM through the product, as a user runs it: the `koe` command, the HTTP server (in-process and
a real uvicorn socket with the official OpenAI client), the voice library and the model store.

Nothing here is VoxCPM-specific code: the service, server and CLI reach VoxCPM only through the
engine contract. Each path is checked against the engine itself (`koe.load(folder)`), the same
seed giving the same samples: the model's own voice, VoxCPM2's design from a description, cloning
from a clip with its transcript (VoxCPM2: the clip is also its reference, upstream's "ultimate"
clone) or from a clip alone (VoxCPM2's reference clone), and streaming, which is upstream's
streaming decode (not the one-shot samples: `stream_is_one_shot` is False). Tiny random-weight
models of both variants.
"""

from __future__ import annotations

import base64
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
from product_helpers import assert_error, decode, koe_command, one_line_error, speechy, wav_bytes
from test_server_e2e import live_server

import koe
from koe.engines.voxcpm.fixtures import write_random_model
from koe.server import create_app
from koe.service import KoeHome, load_settings

REF_TEXT = "A short test clip."
TEXT = "Hello there, this is koe speaking."
DESIGN = "a warm low voice"
OPTION_NAMES = [
    "cfg_value",
    "inference_timesteps",
    "min_len",
    "max_len",
    "retry_badcase",
    "retry_badcase_max_times",
    "retry_badcase_ratio_threshold",
    "normalize",
    "denoise",
]
RATE = {"VoxCPM2": 48000, "VoxCPM1.5": 44100}


def int16(samples: np.ndarray) -> np.ndarray:
    """The engine's float samples as koe writes them in 16 bits (FFmpeg's rounding: `lrintf(x * 32768)`, clipped)."""
    x = np.asarray(samples, dtype=np.float32)
    return np.clip(np.rint(x * np.float32(32768.0)), -32768, 32767).astype(np.int16)


@pytest.fixture(scope="module")
def v2_dir(tmp_path_factory) -> Path:
    return write_random_model(tmp_path_factory.mktemp("vox-svc") / "VoxCPM2", "VoxCPM2")


@pytest.fixture(scope="module")
def v15_dir(tmp_path_factory) -> Path:
    return write_random_model(tmp_path_factory.mktemp("vox-svc") / "VoxCPM1.5", "VoxCPM1.5")


@pytest.fixture(scope="module")
def dirs(v2_dir, v15_dir) -> dict[str, Path]:
    return {"VoxCPM2": v2_dir, "VoxCPM1.5": v15_dir}


@pytest.fixture(scope="module")
def engines(dirs):
    loaded = {v: koe.load(d) for v, d in dirs.items()}
    yield loaded
    for e in loaded.values():
        e.close()


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("vox-svc-clip") / "clip.wav"
    path.write_bytes(wav_bytes(speechy(2.0)))
    return path


def streamed(engine, text=TEXT, **kw) -> np.ndarray:
    return np.concatenate([c.samples for c in engine.stream(text, **kw)])


# -- the command -------------------------------------------------------------------------------
@pytest.fixture
def koe_cli(tmp_path, monkeypatch):
    return koe_command(tmp_path, monkeypatch)


def read(path: Path) -> tuple[np.ndarray, int]:
    samples, rate = sf.read(path, dtype="int16")
    return samples, rate


def test_speak_in_the_models_own_voice_in_a_real_process(v2_dir, engines, tmp_path, koe_cli):
    """`koe speak --model VOX_DIR -o out.wav` (no voice) speaks in the model's own voice: a 48 kHz WAV with the samples of
    `koe.load(VOX_DIR).generate(text, seed=3)`; the same seed gives the same bytes (in another process too), another seed other ones."""
    out = tmp_path / "out.wav"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")}
    env.update(KOE_HOME=str(tmp_path / "home-proc"), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    args = ["speak", "--model", v2_dir, "-o", out, "--seed", "3", TEXT]
    r = subprocess.run([sys.executable, "-m", "koe.cli.main", *map(str, args)], env=env, capture_output=True, timeout=180)
    assert r.returncode == 0, r.stderr.decode()
    assert b"wrote" in r.stderr and b"seed 3" in r.stderr and b"voice (the model's own)" in r.stderr
    info = sf.info(out)
    assert (info.samplerate, info.channels, info.subtype, info.format) == (48000, 1, "PCM_16", "WAV")
    direct = engines["VoxCPM2"].generate(TEXT, seed=3)
    written, rate = read(out)
    assert rate == direct.sample_rate == 48000 and np.array_equal(written, int16(direct.audio))
    assert direct.metadata["segments"][0]["mode"] == "own voice"
    again = tmp_path / "again.wav"
    koe_cli(*[again if a == out else a for a in args])
    assert again.read_bytes() == out.read_bytes()
    koe_cli(*[tmp_path / "other.wav" if a == out else ("4" if a == "3" else a) for a in args])
    assert (tmp_path / "other.wav").read_bytes() != out.read_bytes()


@pytest.mark.parametrize("variant", ["VoxCPM2", "VoxCPM1.5"])
def test_own_voice_seeds_and_options(dirs, engines, tmp_path, koe_cli, variant):
    folder, tts = dirs[variant], engines[variant]
    r = koe_cli("speak", TEXT, "-m", folder, "--seed", "7", "-o", tmp_path / "plain.wav")
    assert "voice (the model's own)" in r.stderr and f"{RATE[variant]} Hz" in r.stderr
    plain, rate = read(tmp_path / "plain.wav")
    assert rate == RATE[variant] and np.array_equal(plain, int16(tts.generate(TEXT, seed=7).audio))
    koe_cli("speak", TEXT, "-m", folder, "--seed", "7", "--opt", "cfg_value=1.5", "--opt", "inference_timesteps=4", "-o", tmp_path / "opt.wav")
    opt, _ = read(tmp_path / "opt.wav")
    assert np.array_equal(opt, int16(tts.generate(TEXT, seed=7, cfg_value=1.5, inference_timesteps=4).audio))
    assert not np.array_equal(opt, plain)
    koe_cli("speak", TEXT, "-m", folder, "--seed", "7", "-O", "retry-badcase=false", "--opt", "min_len=8", "-o", tmp_path / "long.wav")
    long, _ = read(tmp_path / "long.wav")
    assert np.array_equal(long, int16(tts.generate(TEXT, seed=7, retry_badcase=False, min_len=8).audio))
    assert len(long) >= 8 * 0.16 * rate  # at least min_len patches of 0.16 s
    koe_cli("speak", TEXT, "-m", folder, "-o", tmp_path / "fast.wav", "--seed", "7", "--speed", "2")  # no native speed: a time-stretch
    assert sf.info(tmp_path / "fast.wav").duration == pytest.approx(len(plain) / rate / 2, rel=0.1)


def test_voice_design_from_a_description(v2_dir, v15_dir, engines, tmp_path, koe_cli):
    """VoxCPM2: `--instruct` (or `--design`) describes the voice, upstream's `(description)text`; VoxCPM 1.5 takes none:
    the instruction is dropped with a warning and the model speaks in its own voice."""
    tts = engines["VoxCPM2"]
    r = koe_cli("speak", TEXT, "-m", v2_dir, "--instruct", DESIGN, "--seed", "2", "-o", tmp_path / "instruct.wav")
    assert "voice design" in r.stderr
    koe_cli("speak", TEXT, "-m", v2_dir, "--design", DESIGN, "--seed", "2", "-o", tmp_path / "design.wav")
    koe_cli("speak", TEXT, "-m", v2_dir, "--seed", "2", "-o", tmp_path / "own.wav")
    designed = tts.generate(TEXT, instruct=DESIGN, seed=2)
    assert designed.metadata["segments"][0]["mode"] == "design"
    assert np.array_equal(read(tmp_path / "instruct.wav")[0], int16(designed.audio))
    assert (tmp_path / "design.wav").read_bytes() == (tmp_path / "instruct.wav").read_bytes()
    assert not np.array_equal(read(tmp_path / "own.wav")[0], read(tmp_path / "instruct.wav")[0])

    r = koe_cli("speak", TEXT, "-m", v15_dir, "--instruct", DESIGN, "--seed", "2", "-o", tmp_path / "v15.wav")
    assert "ignores instructions" in r.stderr
    assert np.array_equal(read(tmp_path / "v15.wav")[0], int16(engines["VoxCPM1.5"].generate(TEXT, seed=2).audio))
    one_line_error(koe_cli("speak", TEXT, "-m", v15_dir, "--design", DESIGN, "-o", tmp_path / "x.wav", ok=False), "designing a voice", "VoxCPM1.5")
    assert not (tmp_path / "x.wav").exists()


def test_cloning_from_a_clip(dirs, engines, clip, tmp_path, koe_cli):
    """`--ref clip --ref-text ...`: a continuation clone (VoxCPM2: with the clip as its reference too); `--ref clip` alone:
    VoxCPM2's reference clone; VoxCPM 1.5 needs the transcript (a clear one-line error)."""
    v2, v15 = engines["VoxCPM2"], engines["VoxCPM1.5"]
    koe_cli("speak", TEXT, "-m", dirs["VoxCPM2"], "--ref", clip, "--ref-text", REF_TEXT, "--seed", "1", "-o", tmp_path / "full.wav")
    koe_cli("speak", TEXT, "-m", dirs["VoxCPM2"], "--ref", clip, "--seed", "1", "-o", tmp_path / "ref.wav")
    full, ref = v2.prepare_voice(str(clip), REF_TEXT), v2.prepare_voice(str(clip))
    assert (full.mode, ref.mode) == ("ref_continuation", "reference")
    assert np.array_equal(read(tmp_path / "full.wav")[0], int16(v2.generate(TEXT, voice=full, seed=1).audio))
    assert np.array_equal(read(tmp_path / "ref.wav")[0], int16(v2.generate(TEXT, voice=ref, seed=1).audio))
    assert not np.array_equal(read(tmp_path / "full.wav")[0], read(tmp_path / "ref.wav")[0])
    koe_cli("speak", TEXT, "-m", dirs["VoxCPM2"], "--ref", clip, "--ref-text", REF_TEXT, "--instruct", DESIGN, "--seed", "1", "-o", tmp_path / "steered.wav")
    assert np.array_equal(read(tmp_path / "steered.wav")[0], int16(v2.generate(TEXT, voice=full, instruct=DESIGN, seed=1).audio))

    koe_cli("speak", TEXT, "-m", dirs["VoxCPM1.5"], "--ref", clip, "--ref-text", REF_TEXT, "--seed", "1", "-o", tmp_path / "v15.wav")
    voice = v15.prepare_voice(str(clip), REF_TEXT)
    assert voice.mode == "continuation"
    written, rate = read(tmp_path / "v15.wav")
    assert rate == 44100 and np.array_equal(written, int16(v15.generate(TEXT, voice=voice, seed=1).audio))
    r = koe_cli("speak", TEXT, "-m", dirs["VoxCPM1.5"], "--ref", clip, "-o", tmp_path / "no.wav", ok=False)
    one_line_error(r, "VoxCPM1.5 clones only from a clip with its transcript")
    assert not (tmp_path / "no.wav").exists()


@pytest.mark.parametrize("variant", ["VoxCPM2", "VoxCPM1.5"])
def test_stream_is_upstreams_streaming_decode(dirs, engines, clip, tmp_path, koe_cli, variant):
    """`--stream` writes a WAV of unknown length with the engine's streamed samples (upstream's streaming decode: VoxCPM2's
    patch-by-patch decoder with carried state, 1.5's re-decoded window), the same for the same seed; to a file too."""
    folder, tts = dirs[variant], engines[variant]
    base = ["--model", folder, "--ref", clip, "--ref-text", REF_TEXT, "--seed", "2"]
    data = koe_cli("speak", TEXT, *base, "--stream").stdout_bytes
    assert data[:4] == b"RIFF" and data[4:8] == b"\xff\xff\xff\xff"
    codec, rate, samples = decode(data)
    assert (codec, rate) == ("pcm_s16le", RATE[variant])
    voice = tts.prepare_voice(str(clip), REF_TEXT)
    assert np.array_equal(samples, int16(streamed(tts, voice=voice, seed=2)))
    koe_cli("speak", TEXT, *base, "--stream", "-o", tmp_path / "s.wav")
    assert (tmp_path / "s.wav").read_bytes() == data and not list(tmp_path.glob(".*partial"))
    koe_cli("speak", TEXT, "--model", folder, "--seed", "2", "--stream", "-o", tmp_path / "own.wav")
    assert np.array_equal(decode((tmp_path / "own.wav").read_bytes())[2], int16(streamed(tts, seed=2)))
    one = int16(tts.generate(TEXT, voice=voice, seed=2).audio)
    assert len(one) == len(samples)  # the same number of patches; the samples are upstream's streamed ones


def test_models_info_shows_options_and_capabilities(v2_dir, v15_dir, koe_cli):
    text = koe_cli("models", "info", v2_dir).stdout
    assert "voices: clone, clone_without_transcript, design, none" in text and "48000 Hz" in text and "VoxCPM2" in text
    assert "status: ok" in text and "--opt KEY=VALUE" in text and "languages: auto" in text
    for name in OPTION_NAMES:
        assert name in text
    data = json.loads(koe_cli("models", "info", v2_dir, "--json").stdout)
    assert data["family"] == "voxcpm" and data["variant"] == "VoxCPM2" and data["missing"] == [] and data["speakers"] == []
    caps = data["capabilities"]
    assert caps["voice_modes"] == ["clone", "clone_without_transcript", "design", "none"] and caps["instruct"] is True
    assert caps["sample_rate"] == 48000 and caps["streaming"] and caps["stream_step_s"] == 0.16 and caps["stream_is_one_shot"] is False
    assert caps["min_reference_s"] == 0.5 and caps["native_speed"] is False and caps["batch"] is False
    options = {o["name"]: o for o in caps["options"]}
    assert list(options) == OPTION_NAMES
    assert options["cfg_value"]["default"] == 2.0 and options["cfg_value"]["range"] == "in [0.1, 10]"
    assert options["inference_timesteps"]["default"] == 10 and options["inference_timesteps"]["range"] == "in [1, 100]"
    assert options["retry_badcase"]["default"] is True and "not supported yet" in options["normalize"]["help"]

    v15 = json.loads(koe_cli("models", "info", v15_dir, "--json").stdout)
    assert v15["variant"] == "VoxCPM1.5" and v15["capabilities"]["voice_modes"] == ["clone", "none"]
    assert v15["capabilities"]["instruct"] is False and v15["capabilities"]["sample_rate"] == 44100
    assert "voices: clone, none" in koe_cli("models", "info", v15_dir).stdout


def test_library_voices_and_prepared_prompts(dirs, engines, clip, tmp_path, koe_cli):
    """`koe voices add` keeps the clip; `--voice NAME` prepares (and keeps) a prompt per model with the clip's samples, as
    cloning the clip directly; a voice without a transcript is VoxCPM2's reference clone and a clear error on 1.5;
    `koe voices prepare` writes prompts the engine loads back."""
    koe_cli("voices", "add", "kim", "--ref", clip, "--ref-text", REF_TEXT)
    koe_cli("voices", "add", "notext", "--ref", clip)
    koe_cli("models", "import", dirs["VoxCPM2"], "--name", "vox", "--link")
    koe_cli("models", "import", dirs["VoxCPM1.5"], "--name", "vox15", "--link")
    seed = ["--seed", "5"]
    for model, folder in (("vox", dirs["VoxCPM2"]), ("vox15", dirs["VoxCPM1.5"])):
        r = koe_cli("speak", TEXT, "-m", model, "--voice", "kim", *seed, "-o", tmp_path / f"{model}-voice.wav")
        assert "voice kim" in r.stderr
        koe_cli("speak", TEXT, "-m", model, "--voice", "KIM", *seed, "-o", tmp_path / f"{model}-again.wav")  # the kept prompt
        koe_cli("speak", TEXT, "-m", folder, "--ref", clip, "--ref-text", REF_TEXT, *seed, "-o", tmp_path / f"{model}-clip.wav")
        assert (tmp_path / f"{model}-voice.wav").read_bytes() == (tmp_path / f"{model}-clip.wav").read_bytes()
        assert (tmp_path / f"{model}-again.wav").read_bytes() == (tmp_path / f"{model}-clip.wav").read_bytes()
    shown = json.loads(koe_cli("voices", "show", "kim", "--json").stdout)
    assert len(shown["prepared_for"]) == 2  # one prompt per model: a 1.5 prompt is never used on VoxCPM2
    archs = sorted(json.loads((Path(shown["folder"]) / "prompts" / key / "prompt.json").read_text())["architecture"] for key in shown["prepared_for"])
    assert archs == ["voxcpm", "voxcpm2"]

    koe_cli("speak", TEXT, "-m", "vox", "--voice", "notext", *seed, "-o", tmp_path / "notext.wav")
    koe_cli("speak", TEXT, "-m", "vox", "--ref", clip, *seed, "-o", tmp_path / "ref.wav")
    assert (tmp_path / "notext.wav").read_bytes() == (tmp_path / "ref.wav").read_bytes()
    one_line_error(
        koe_cli("speak", TEXT, "-m", "vox15", "--voice", "notext", "-o", tmp_path / "bad.wav", ok=False), "VoxCPM1.5 clones from a clip and its transcript"
    )
    notext = json.loads(koe_cli("voices", "show", "notext", "--json").stdout)["prepared_for"]
    assert len(notext) == 1 and notext[0] in shown["prepared_for"]  # VoxCPM2's; the failed 1.5 preparation kept none

    v2 = engines["VoxCPM2"]
    r = koe_cli("voices", "prepare", clip, "-m", "vox", "--ref-text", REF_TEXT, "-o", tmp_path / "p-full")
    assert "wrote voice prompt" in r.stderr
    koe_cli("voices", "prepare", clip, "-m", "vox", "--x-vector-only", "-o", tmp_path / "p-ref")  # the clip alone
    full, ref = v2.load_voice(tmp_path / "p-full"), v2.load_voice(tmp_path / "p-ref")
    assert (full.mode, ref.mode) == ("ref_continuation", "reference") and full.prompt_text == REF_TEXT
    direct = v2.prepare_voice(str(clip), REF_TEXT)
    assert np.array_equal(full.prompt, direct.prompt) and np.array_equal(full.reference, direct.reference)
    assert np.array_equal(v2.generate(TEXT, voice=full, seed=1).audio, v2.generate(TEXT, voice=direct, seed=1).audio)
    one_line_error(koe_cli("voices", "prepare", clip, "-m", "vox", "-o", tmp_path / "p-none", ok=False), "--x-vector-only")
    koe_cli("voices", "prepare", clip, "-m", "vox15", "--ref-text", REF_TEXT, "-o", tmp_path / "p15")
    assert engines["VoxCPM1.5"].load_voice(tmp_path / "p15").mode == "continuation"
    one_line_error(koe_cli("voices", "prepare", clip, "-m", "vox15", "-o", tmp_path / "p15-none", ok=False), "--ref-text")
    one_line_error(
        koe_cli("voices", "prepare", clip, "-m", "vox15", "--x-vector-only", "-o", tmp_path / "p15-x", ok=False), "clones from a clip and its transcript"
    )
    assert not (tmp_path / "p-none").exists() and not (tmp_path / "p15-none").exists() and not (tmp_path / "p15-x").exists()


def test_voices_design_keeps_the_designed_sample(v2_dir, engines, koe_cli):
    """`koe voices design` with VoxCPM2 speaks a sample in the described voice and keeps it as a clone reference."""
    r = koe_cli("voices", "design", "narrator", "-m", v2_dir, "--description", DESIGN, "--text", TEXT, "--seed", "4", "--opt", "min_len=8")
    assert "designed voice narrator" in r.stderr
    shown = json.loads(koe_cli("voices", "show", "narrator", "--json").stdout)
    assert shown["source"] == "design" and shown["description"] == DESIGN and shown["ref_text"] == TEXT
    kept, rate = sf.read(Path(shown["folder"]) / "reference.wav", dtype="float32")
    assert rate == 48000 and np.array_equal(kept, engines["VoxCPM2"].generate(TEXT, instruct=DESIGN, seed=4, min_len=8).audio)


# -- the server, in-process --------------------------------------------------------------------
def speech_body(**body) -> dict:
    return {"model": "vox", "input": TEXT, "voice": "kim", "response_format": "wav", **body}


@pytest.fixture(scope="module")
def server_home(tmp_path_factory, v2_dir, v15_dir):
    """A KOE_HOME with VoxCPM2 "vox" (the default) and VoxCPM1.5 "vox15" installed."""
    root = tmp_path_factory.mktemp("vox-server-home")
    settings = load_settings(root, flags={"models": {"default": "vox", "resident_limit": 2}, "server": {"max_reference_seconds": 10.0}}, environ={})
    home = KoeHome(settings)
    home.models.import_model(v2_dir, "vox", link=True)
    home.models.import_model(v15_dir, "vox15", link=True)
    return home


@pytest.fixture(scope="module")
def client(server_home, clip):
    with TestClient(create_app(server_home, first_chunk_s=0.3, chunk_s=0.5)) as c:
        for name, transcript in (("kim", REF_TEXT), ("notext", None)):
            data = {"name": name, **({"transcript": transcript} if transcript else {})}
            r = c.post("/v1/audio/voices", data=data, files={"file": ("clip.wav", clip.read_bytes(), "audio/wav")})
            assert r.status_code == 201, r.text
        yield c


def test_models_list_the_voxcpm_models_with_their_capabilities(client):
    assert client.get("/health").json()["models_loaded"] == ["vox"]  # the default model loads at startup
    cards = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert set(cards) == {"vox", "vox15"}
    vox, v15 = cards["vox"], cards["vox15"]
    assert vox["family"] == "voxcpm" and vox["variant"] == "VoxCPM2" and vox["default"] and vox["loaded"]
    assert vox["voice_modes"] == ["clone", "clone_without_transcript", "design", "none"] and vox["speakers"] == [] and vox["languages"] == ["auto"]
    assert [o["name"] for o in vox["options"]] == OPTION_NAMES and "designed voice" in vox["uses"]
    caps = vox["capabilities"]
    assert caps["instruct"] is True and caps["sample_rate"] == 48000 and caps["streaming"] and caps["stream_is_one_shot"] is False
    assert caps["options"] == vox["options"] and caps["voice_modes"] == vox["voice_modes"]
    assert v15["variant"] == "VoxCPM1.5" and v15["voice_modes"] == ["clone", "none"] and not v15["default"]
    assert v15["capabilities"]["instruct"] is False and v15["capabilities"]["sample_rate"] == 44100
    assert client.get("/v1/models/vox").json() == vox


def test_speech_with_a_library_voice(client, server_home, engines, clip):
    r = client.post("/v1/audio/speech", json=speech_body(seed=5))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"
    assert (r.headers["x-koe-model"], r.headers["x-koe-voice"], r.headers["x-koe-seed"]) == ("vox", "kim", "5")
    codec, rate, samples = decode(r.content)
    assert (codec, rate) == ("pcm_s16le", 48000) and len(samples) / rate == pytest.approx(float(r.headers["x-koe-duration"]), abs=1e-3)
    v2 = engines["VoxCPM2"]
    assert np.array_equal(samples, int16(v2.generate(TEXT, voice=v2.prepare_voice(str(clip), REF_TEXT), seed=5).audio))
    assert client.post("/v1/audio/speech", json=speech_body(seed=5, voice={"id": "kim"})).content == r.content
    assert client.post("/v1/audio/speech", json=speech_body(seed=6)).content != r.content
    flat = client.post("/v1/audio/speech", json={**speech_body(seed=5), "cfg_value": 1.5})
    nested = client.post("/v1/audio/speech", json=speech_body(seed=5, options={"cfg_value": 1.5}))
    assert flat.status_code == 200 and flat.content == nested.content != r.content
    assert server_home.models.get("vox").ref.key in server_home.voices.get("kim").prepared_for
    ref_only = client.post("/v1/audio/speech", json=speech_body(seed=5, voice="notext"))  # VoxCPM2's reference clone
    assert np.array_equal(decode(ref_only.content)[2], int16(v2.generate(TEXT, voice=v2.prepare_voice(str(clip)), seed=5).audio))
    v15 = client.post("/v1/audio/speech", json=speech_body(model="vox15", seed=5))
    assert v15.status_code == 200 and decode(v15.content)[1] == 44100
    for fmt, codec in (("mp3", "mp3"), ("opus", "opus"), ("flac", "flac"), ("pcm", None)):
        out = client.post("/v1/audio/speech", json=speech_body(seed=5, response_format=fmt))
        assert out.status_code == 200, out.text
        if codec:
            assert decode(out.content)[0].startswith(codec)
        else:
            assert len(out.content) == 2 * len(samples)


def test_openai_voice_names_mean_the_models_own_voice(client, engines):
    """VoxCPM has no presets (its spec gives OpenAI's names no meaning) but a voice of its own: an OpenAI voice name means
    that voice, and with `instructions` on VoxCPM2 the voice they describe (upstream's voice design)."""
    v2, v15 = engines["VoxCPM2"], engines["VoxCPM1.5"]
    own = client.post("/v1/audio/speech", json=speech_body(voice="alloy", seed=3))
    assert own.status_code == 200, own.text
    assert own.headers["x-koe-voice"] == "" and "x-koe-warnings" not in own.headers
    assert np.array_equal(decode(own.content)[2], int16(v2.generate(TEXT, seed=3).audio))
    assert client.post("/v1/audio/speech", json=speech_body(voice="echo", model="tts-1", seed=3)).content == own.content
    design = client.post("/v1/audio/speech", json=speech_body(voice="alloy", instructions=DESIGN, seed=3))
    assert design.status_code == 200 and design.headers["x-koe-voice"] == "design"
    assert np.array_equal(decode(design.content)[2], int16(v2.generate(TEXT, instruct=DESIGN, seed=3).audio))
    steered = client.post("/v1/audio/speech", json=speech_body(instructions=DESIGN, seed=3))  # a library voice steered by a description
    assert steered.status_code == 200 and steered.content != design.content
    r = client.post("/v1/audio/speech", json=speech_body(model="vox15", voice="alloy", instructions=DESIGN, seed=3))
    assert r.status_code == 200 and "vox15 ignores instructions" in r.headers["x-koe-warnings"]
    assert np.array_equal(decode(r.content)[2], int16(v15.generate(TEXT, seed=3).audio))


@pytest.mark.parametrize(
    ("body", "status", "words", "param"),
    [
        ({"options": {"cfg_value": 50}}, 400, ["cfg_value=50", "[0.1, 10]"], "cfg_value"),
        ({"options": {"inference_timesteps": 0}}, 400, ["inference_timesteps=0", "[1, 100]"], "inference_timesteps"),
        ({"options": {"inference_timesteps": 2.5}}, 400, ["must be a whole number"], "inference_timesteps"),
        ({"options": {"retry_badcase_ratio_threshold": 0}}, 400, ["retry_badcase_ratio_threshold=0", "(0, 100]"], "retry_badcase_ratio_threshold"),
        ({"options": {"normalize": True}}, 400, ["normalize=true", "not supported by koe yet"], "normalize"),
        ({"options": {"denoise": True}}, 400, ["denoise=true", "not supported by koe yet"], "denoise"),
        ({"options": {"nfe_step": 4}}, 400, ["unknown option(s) 'nfe_step'", "valid: " + ", ".join(OPTION_NAMES)], "nfe_step"),
        ({"temperature": 0.7}, 400, ["temperature: unknown field", "cfg_value"], "temperature"),
        ({"voice": "ryan"}, 404, ["unknown voice 'ryan'", "kim"], "voice"),
        ({"voice": ""}, 400, ["voice is empty"], "voice"),
        ({"language": "german"}, 400, ["unsupported language 'german'", "supports: auto"], "language"),
        ({"input": "  "}, 400, ["input text is empty"], "input"),
        ({"model": "vox15", "voice": "notext"}, 400, ["VoxCPM1.5 clones from a clip and its transcript"], "voice"),
    ],
)
def test_bad_requests_are_clear_4xx(client, body, status, words, param):
    assert_error(client.post("/v1/audio/speech", json=speech_body(**body)), status, *words, param=param)


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_not_supported_yet_options_are_4xx_before_a_stream_starts(client, stream_format):
    for option in ("normalize", "denoise"):
        r = client.post("/v1/audio/speech", json={**speech_body(options={option: True}), "stream_format": stream_format})
        assert_error(r, 400, f"{option}=true", "not supported by koe yet", param=option)


def test_clips_voxcpm_cannot_use_are_clear_400s_and_keep_no_prompt(client, server_home):
    """A silent (but not all-zero) clip is in the library, but VoxCPM refuses it: a 400, no prompt kept; unreadable, too
    short and missing clips are refused when added; the queue survives."""
    hiss = (2e-5 * np.random.default_rng(0).standard_normal(48000)).astype(np.float32)  # below VoxCPM's -80 dBFS
    r = client.post("/v1/audio/voices", data={"name": "hiss", "transcript": REF_TEXT}, files={"file": ("h.wav", wav_bytes(hiss), "audio/wav")})
    assert r.status_code == 201, r.text
    assert_error(client.post("/v1/audio/speech", json=speech_body(voice="hiss")), 400, "the voice clip cannot be used", "silent", param="voice")
    assert_error(client.post("/v1/audio/speech", json=speech_body(model="vox15", voice="hiss")), 400, "silent", param="voice")
    assert server_home.voices.get("hiss").prepared_for == []
    for name, payload, words in (
        ("junk", b"not audio" * 50, ["reference audio"]),
        ("short", wav_bytes(speechy(0.4)), ["reference audio is 0.40 s", "at least 1.0 s"]),
        ("zeros", wav_bytes(np.zeros(48000, np.float32)), ["silence"]),
    ):
        r = client.post("/v1/audio/voices", data={"name": name, "transcript": REF_TEXT}, files={"file": ("x.wav", payload, "audio/wav")})
        assert_error(r, 400, *words)
    assert_error(client.post("/v1/audio/voices", data={"name": "textonly", "transcript": REF_TEXT}), 400, "the reference clip", param="file")
    names = [v["name"] for v in client.get("/v1/audio/voices").json()["data"]]
    assert not {"junk", "short", "zeros", "textonly"} & set(names)
    assert client.post("/v1/audio/speech", json=speech_body(seed=1)).status_code == 200


@pytest.mark.parametrize("model", ["vox", "vox15"])
def test_streaming_gives_the_engines_streamed_samples(client, engines, clip, model):
    """stream_format=audio and sse: upstream's streaming decode (the engine's `stream`), in several chunks, the same for
    the same seed; the one-shot answer is the one-shot decode."""
    tts = engines["VoxCPM2" if model == "vox" else "VoxCPM1.5"]
    voice = tts.prepare_voice(str(clip), REF_TEXT)
    body = speech_body(model=model, seed=9, response_format="pcm", options={"min_len": 12})
    whole = client.post("/v1/audio/speech", json=body)
    assert whole.status_code == 200, whole.text
    assert np.array_equal(np.frombuffer(whole.content, "<i2"), int16(tts.generate(TEXT, voice=voice, seed=9, min_len=12).audio))
    expected = int16(streamed(tts, voice=voice, seed=9, min_len=12))
    with client.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "audio"}) as r:
        assert r.status_code == 200 and "content-length" not in r.headers and r.headers["x-koe-model"] == model
        chunks = list(r.iter_bytes())
    assert np.array_equal(np.frombuffer(b"".join(chunks), "<i2"), expected)
    assert len(b"".join(chunks)) == len(whole.content)  # the same length: one-shot and streaming make the same patches
    with client.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "sse"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: ") :]) for line in r.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"} and len(kinds) >= 3
    assert np.array_equal(np.frombuffer(b"".join(base64.b64decode(e["audio"]) for e in events[:-1]), "<i2"), expected)
    assert events[-1]["usage"]["input_tokens"] == len(TEXT) and events[-1]["usage"]["output_tokens"] >= 12
    mp3 = client.post("/v1/audio/speech", json={**speech_body(model=model, voice="alloy", seed=9, response_format="mp3"), "stream_format": "audio"})
    assert mp3.status_code == 200 and decode(mp3.content)[0].startswith("mp3")


# -- a real server and the official client -----------------------------------------------------
def test_openai_client_against_a_real_server(tmp_path, v2_dir, clip, engines):
    home = KoeHome(load_settings(tmp_path / "home", flags={"models": {"default": "vox"}}, environ={}))
    home.models.import_model(v2_dir, "vox", link=True)
    v2 = engines["VoxCPM2"]
    with live_server(create_app(home)) as s:
        r = httpx.post(f"{s.url}/v1/audio/voices", data={"name": "kim", "transcript": REF_TEXT}, files={"file": ("clip.wav", clip.read_bytes(), "audio/wav")})
        assert r.status_code == 201, r.text
        api = openai.OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0)
        assert {m.id for m in api.models.list()} == {"vox"}
        own = api.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav", extra_body={"seed": 11})
        assert np.array_equal(decode(own.read())[2], int16(v2.generate(TEXT, seed=11).audio))
        designed = api.audio.speech.create(model="vox", voice="nova", input=TEXT, instructions=DESIGN, response_format="wav", extra_body={"seed": 11})
        assert np.array_equal(decode(designed.read())[2], int16(v2.generate(TEXT, instruct=DESIGN, seed=11).audio))
        cloned = api.audio.speech.create(model="vox", voice="kim", input=TEXT, response_format="wav", extra_body={"options": {"cfg_value": 1.5}, "seed": 11})
        voice = v2.prepare_voice(str(clip), REF_TEXT)
        assert np.array_equal(decode(cloned.read())[2], int16(v2.generate(TEXT, voice=voice, seed=11, cfg_value=1.5).audio))
        with api.audio.speech.with_streaming_response.create(
            model="vox", voice="kim", input=TEXT, response_format="pcm", stream_format="audio", extra_body={"seed": 1}
        ) as resp:
            assert resp.headers["content-type"] == "audio/pcm"
            data = b"".join(resp.iter_bytes())
        assert np.array_equal(np.frombuffer(data, "<i2"), int16(streamed(v2, voice=voice, seed=1)))
        with pytest.raises(openai.BadRequestError) as e:
            api.audio.speech.create(model="vox", voice="kim", input=TEXT, extra_body={"options": {"cfg_value": 50}})
        assert "cfg_value=50" in e.value.message
        with pytest.raises(openai.BadRequestError) as e:
            api.audio.speech.create(model="vox", voice="kim", input=TEXT, extra_body={"options": {"denoise": True}})
        assert "not supported by koe yet" in e.value.message
        assert httpx.get(f"{s.url}/health").json()["queues"]["vox"]["failed"] >= 1
        ok = api.audio.speech.with_raw_response.create(model="vox", voice="kim", input=TEXT, response_format="wav")
        assert ok.headers["x-koe-batch-size"] == "1" and decode(ok.content)[:2] == ("pcm_s16le", 48000)
