"""The `koe` command through Typer's runner: every command, and one clear line for every bad input."""

import io
import json
import time

import av
import numpy as np
import pytest
import soundfile as sf

pytest_plugins = ["cli_fixtures"]  # cv_model, vd_model, base_model, home, koe

pytestmark = pytest.mark.filterwarnings("ignore:.*cut off:UserWarning")
FAST = ["--max-new-tokens", "8", "--seed", "1"]


def assert_one_line_error(result, match: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert match in result.stderr, result.stderr


def decode(data: bytes) -> tuple[str, int, float]:
    with av.open(io.BytesIO(data)) as c:
        s = c.streams.audio[0]
        n = sum(f.samples for f in c.decode(s))
        return s.codec_context.name, s.codec_context.sample_rate, n / s.codec_context.sample_rate


def test_help_and_version(koe):
    out = koe("--help").output
    for name in ("speak", "voices", "models", "config", "doctor", "serve", "demo", "bench"):
        assert name in out
    assert koe("--version").output.startswith("koe ")
    assert "--ref-text" in koe("speak", "--help").output
    assert "--precision" in koe("speak", "--help").output
    assert "--compare" in koe("bench", "--help").output


def test_speak_precision_flag_is_recorded(koe, home, cv_model, tmp_path):
    koe("speak", "Hello.", "-m", cv_model, *FAST, "--precision", "int8", "-o", tmp_path / "x.wav")
    koe("speak", "Hello.", "-m", cv_model, *FAST, "--precision", "bf16", "-o", tmp_path / "y.wav")
    koe("speak", "Hello.", "-m", cv_model, *FAST, "--precision", "int4", "-o", tmp_path / "z.wav")
    assert_one_line_error(koe("speak", "Hello.", "-m", cv_model, "--precision", "int2", ok=False), "models.precision='int2'")


def test_speak_writes_each_format(koe, home, cv_model, tmp_path):
    for ext, codec, rate in (("mp3", "mp3float", 24000), ("ogg", "opus", 48000), ("flac", "flac", 24000), ("m4a", "aac", 24000), ("wav", "pcm_s16le", 24000)):
        out = tmp_path / f"x.{ext}"
        r = koe("speak", "Hello there.", "-m", cv_model, "--speaker", "ryan", *FAST, "-o", out)
        assert "wrote" in r.stderr and "warning:" in r.stderr  # the truncation warning from the result metadata
        assert decode(out.read_bytes())[:2] == (codec, rate)


def test_speak_text_sources_and_format_flag(koe, home, cv_model, tmp_path):
    koe("speak", "-", "-m", cv_model, *FAST, "-o", tmp_path / "a.bin", "--format", "aac", input="Hello from stdin.")
    assert decode((tmp_path / "a.bin").read_bytes())[0] == "aac"
    text = tmp_path / "t.txt"
    text.write_text("Hello from a file.")
    koe("speak", "--file", text, "-m", cv_model, *FAST, "-o", tmp_path / "b.wav", "--speed", "1.5")
    assert (tmp_path / "b.wav").stat().st_size > 44


def test_speak_without_output_keeps_it_in_koe_home(koe, home, cv_model):
    r = koe("speak", "Hello.", "-m", cv_model, *FAST)
    saved = list((home / "outputs").rglob("*.wav"))
    assert len(saved) == 1 and str(saved[0]) in r.stderr.replace("\n", "")


def test_speak_stream_to_stdout_is_a_playable_wav(koe, home, cv_model):
    r = koe("speak", "Hello.", "-m", cv_model, *FAST, "--stream")
    data = r.stdout_bytes
    assert data[:4] == b"RIFF" and data[4:8] == b"\xff\xff\xff\xff"
    codec, rate, seconds = decode(data)
    assert codec == "pcm_s16le" and rate == 24000 and seconds > 0.3


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["speak", "", "-m", "{cv}"], "input text is empty"),
        (["speak", "hi", "-m", "nope"], "no model named 'nope'"),
        (["speak", "hi", "-m", "{cv}", "-o", "x.xyz"], "cannot tell the audio format"),
        (["speak", "hi", "-m", "{cv}", "--speaker", "bob"], "unknown speaker 'bob'"),
        (["speak", "hi", "-m", "{cv}", "--speed", "9"], "speed 9.0 is out of range"),
        (["speak", "hi", "-m", "{cv}", "--temperature", "0"], "temperature=0"),
        (["speak", "hi", "-m", "{cv}", "--design", "deep"], "needs a model that designs voices"),
        (["speak", "hi", "-m", "{cv}", "--ref", "missing.wav"], "cloning from a reference clip needs a model that clones voices"),
        (["speak", "hi", "-m", "{cv}", "--opt", "subtalker_top_k=-1"], "subtalker_top_k=-1"),
        (["speak", "hi", "-m", "{cv}", "--opt", "colour=blue"], "unknown option(s) 'colour'"),
        (["speak", "hi", "-m", "{cv}", "--opt", "novalue"], "give KEY=VALUE"),
        (["speak", "hi", "-m", "{cv}", "--colour", "blue"], "no such option: --colour (the model "),
        (["speak", "hi", "-m", "{cv}", "--top-k", "many"], "--top-k 'many': must be a whole number"),
        (["speak", "hi", "-m", "{cv}", "--language", "klingon"], "unsupported language"),
        (["speak", "--file", "missing.txt"], "cannot read missing.txt"),
        (["speak", "hi", "--file", "missing.txt"], "give TEXT or --file, not both"),
        (["speak", "hi"], "no model given"),
        (["voices", "add", "../x", "--ref", "missing.wav"], "invalid voice name '../x'"),
        (["voices", "show", "nobody"], "no voice named 'nobody'"),
        (["models", "info", "nope"], "no model named 'nope'"),
        (["models", "import", "/nonexistent/folder"], "model folder not found"),
        (["models", "import", "{cv}", "--arch", "Nope"], "unknown architecture 'Nope'"),
        (["models", "import", "{cv}", "--vocoder", "/nonexistent/vocoder"], "vocoder folder not found"),
        (["models", "pull", "not-an-id"], "should look like OWNER/NAME"),
    ],
)
def test_bad_input_is_one_clear_line(koe, home, cv_model, args, match):
    result = koe(*[a.replace("{cv}", str(cv_model)) for a in args], ok=False)
    assert_one_line_error(result, match)


def test_unexpected_errors_are_one_line_too(koe, home, cv_model, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("kaput")

    monkeypatch.setattr("koe.service.synthesis.synthesizer.Synthesizer.speak", boom)
    assert_one_line_error(koe("speak", "hi", "-m", cv_model, ok=False), "unexpected RuntimeError: kaput")


def test_config_show_sources(koe, home, monkeypatch):
    home.mkdir(parents=True)
    (home / "koe.toml").write_text('[server]\nport = 7000\nqueue_size = 4\n[synthesis]\nformat = "mp3"\n')
    monkeypatch.setenv("KOE_SERVER__QUEUE_SIZE", "9")
    data = json.loads(koe("config", "show", "--json").stdout)
    assert data["server.port"] == {"value": "7000", "source": "koe.toml", "env": "KOE_SERVER__PORT"}
    assert data["server.queue_size"]["value"] == "9" and data["server.queue_size"]["source"] == "env KOE_SERVER__QUEUE_SIZE"
    assert data["server.host"]["source"] == "default" and data["synthesis.format"]["value"] == "mp3"
    assert data["home"]["source"] == "env KOE_HOME"
    table = koe("config", "show").stdout
    assert "koe.toml" in table and "KOE_SERVER__PORT" in table
    other = home.parent / "other"
    assert json.loads(koe("--home", other, "config", "show", "--json").stdout)["home"]["source"] == "flag --home"
    monkeypatch.setenv("KOE_SERVER__PORT", "not-a-port")
    assert_one_line_error(koe("config", "show", ok=False), "server.port='not-a-port' (from env KOE_SERVER__PORT)")


def test_models_commands(koe, home, cv_model):
    koe("models", "import", cv_model, "--name", "cv", "--link")
    assert "cv" in koe("models", "list").stdout
    listed = json.loads(koe("models", "list", "--json").stdout)
    assert [m["name"] for m in listed] == ["cv"] and listed[0]["linked"]
    info = json.loads(koe("models", "info", "cv", "--json").stdout)
    assert info["variant"] == "custom_voice" and "ryan" in info["speakers"] and info["missing"] == []
    assert "use it for" in koe("models", "info", cv_model).stdout  # a path works too
    koe("speak", "Hi.", "-m", "cv", *FAST, "-o", home / "x.wav")  # a store name works as --model
    assert_one_line_error(koe("models", "import", cv_model, "--name", "cv", ok=False), "already installed")
    koe("models", "remove", "cv")
    assert json.loads(koe("models", "list", "--json").stdout) == []
    assert cv_model.is_dir()


def test_models_pull_fails_fast_offline(koe, home, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    started = time.monotonic()
    result = koe("models", "pull", "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", ok=False)
    assert time.monotonic() - started < 5.0
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "Hugging Face hub" in result.stderr and "koe models import" in result.stderr


def test_voices_commands(koe, home, tmp_path):
    t = np.arange(int(1.5 * 16000)) / 16000
    sf.write(tmp_path / "ref.flac", (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), 16000)
    koe("voices", "add", "alice", "--ref", tmp_path / "ref.flac", "--ref-text", "Hello there.")
    assert_one_line_error(koe("voices", "add", "alice", "--ref", tmp_path / "ref.flac", ok=False), "already exists")
    assert "alice" in koe("voices", "list").stdout
    shown = json.loads(koe("voices", "show", "alice", "--json").stdout)
    assert shown["ref_text"] == "Hello there." and shown["sample_rate"] == 16000
    koe("voices", "export", "alice", tmp_path / "alice.tar.gz")
    koe("voices", "remove", "alice")
    assert json.loads(koe("voices", "list", "--json").stdout) == []
    koe("voices", "import", tmp_path / "alice.tar.gz")
    koe("voices", "import", tmp_path / "alice.tar.gz", "--name", "alice2")
    assert [v["name"] for v in json.loads(koe("voices", "list", "--json").stdout)] == ["alice", "alice2"]


def test_voices_design(koe, home, vd_model):
    r = koe("voices", "design", "deep", "--model", vd_model, "--description", "a deep calm voice", "--max-new-tokens", "16", "--seed", "1")
    assert "designed voice" in r.stderr
    shown = json.loads(koe("voices", "show", "deep", "--json").stdout)
    assert shown["source"] == "design" and shown["description"] == "a deep calm voice"


def test_doctor_runs(koe, home, cv_model):
    koe("models", "import", cv_model, "--name", "cv", "--link")
    out = koe("doctor").stdout
    for word in ("torch", "gpu", "codecs", "KOE_HOME", "model cv"):
        assert word in out


def test_serve_hands_the_settings_to_the_server(koe, home, monkeypatch):
    seen = {}

    class FakeServer:
        @staticmethod
        def run(settings):
            seen["settings"] = settings

    real_import = __import__("importlib").import_module
    monkeypatch.setattr("importlib.import_module", lambda name: FakeServer if name == "koe.server.app" else real_import(name))
    koe("serve", "--host", "0.0.0.0", "--port", "9123", "--token", "t0k")
    s = seen["settings"]
    assert (s.server.host, s.server.port, s.server.token.get_secret_value()) == ("0.0.0.0", 9123, "t0k")
    assert s.source_of("server.port") == "flag"


def test_demo_builds_a_test_model_and_speaks(koe, home, tmp_path, monkeypatch):
    monkeypatch.setenv("KOE_DEMO_OFFLINE", "1")  # on a machine that reaches the hub, the demo would pull the real model
    out = tmp_path / "out" / "demo.wav"
    r = koe("demo", "-o", out, "--max-new-tokens", "8")
    assert "RANDOM weights" in r.stderr and str(out.resolve()) in r.stderr.replace("\n", "")
    codec, rate, seconds = decode(out.read_bytes())
    assert codec == "pcm_s16le" and rate == 24000 and seconds > 0.3
    assert "demo-random-tiny" in koe("models", "list").stdout
