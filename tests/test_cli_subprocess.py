"""`koe` as a real process: files written are really that format, stdout streams, errors are one line."""

import io
import os
import subprocess
import sys
import time

import av
import pytest
from fixtures_models import model_folder


@pytest.fixture(scope="session")
def cv_model(session_tmp):
    return model_folder(session_tmp, "custom_voice")


def koe(*args, home, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")}
    env.update(KOE_HOME=str(home), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "koe.cli.main", *map(str, args)], env=env, capture_output=True, timeout=timeout, **kw)


def test_speak_writes_a_real_mp3(cv_model, tmp_path):
    out = tmp_path / "x.mp3"
    r = koe("speak", "Hello there.", "-m", cv_model, "--max-new-tokens", "8", "--seed", "3", "-o", out, home=tmp_path / "home")
    assert r.returncode == 0, r.stderr.decode()
    with av.open(str(out)) as c:
        s = c.streams.audio[0]
        n = sum(f.samples for f in c.decode(s))
        assert c.format.name == "mp3" and s.codec_context.name == "mp3float"
        assert s.codec_context.sample_rate == 24000
        assert 0.3 < n / 24000 < 0.8  # 7 frames at 12.5 Hz = 0.56 s
    assert b"wrote" in r.stderr


def test_stream_to_stdout_plays_as_it_comes(cv_model, tmp_path):
    r = koe("speak", "Hello.", "-m", cv_model, "--max-new-tokens", "8", "--stream", home=tmp_path / "home")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout[:4] == b"RIFF" and r.stdout[4:8] == b"\xff\xff\xff\xff"
    with av.open(io.BytesIO(r.stdout)) as c:
        assert sum(f.samples for f in c.decode(c.streams.audio[0])) > 0


def test_errors_are_one_line_without_traceback(tmp_path):
    r = koe("speak", "hi", "-m", tmp_path / "no-such-model", home=tmp_path / "home")
    err = r.stderr.decode()
    assert r.returncode != 0 and "Traceback" not in err
    assert err.strip().count("\n") == 0 and err.startswith("error: model folder not found")


def test_pull_offline_fails_fast(tmp_path):
    started = time.monotonic()
    r = koe("models", "pull", "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", home=tmp_path / "home", timeout=30)
    assert time.monotonic() - started < 8.0  # interpreter start included
    err = r.stderr.decode()
    assert r.returncode != 0 and "Traceback" not in err and "koe models import" in err


def test_help_is_fast_and_torch_free():
    code = "import sys, koe.cli.main, koe.service; assert 'torch' not in sys.modules, 'torch imported'"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "koe.cli.main", "--help"], capture_output=True, timeout=30)
    assert r.returncode == 0 and b"speak" in r.stdout
    assert time.monotonic() - started < 5.0
