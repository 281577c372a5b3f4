"""Faults (issue 13, items 5, 8 and 11): corrupt model files, a full disk, server paths in errors.

Models are corrupted for real (a truncated safetensors, garbage bytes, a bad config.json) in
folders that mirror the session's tiny model with symlinks, so only the damaged file is copied.
A full disk is a real one where this machine lets an unprivileged process mount a small tmpfs
(`unshare -rm`); otherwise the real write code meets ENOSPC part way through a write (`os` as
koe.service.fsio sees it) or the error SQLite raises when it is full. The HTTP tests run a real uvicorn server on a loopback port.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from fixtures_models import model_folder
from test_server import TEXT, decode, make_home, wait_for, wav_clip
from test_server_e2e import live_server

from koe.server import create_app
from koe.server.errors import as_koe_error, redact_paths
from koe.service import fsio
from koe.service.config.settings import load_settings
from koe.service.errors import InsufficientStorage, ModelFailed, NotFound, StorageError, is_disk_full
from koe.service.home import KoeHome
from koe.service.storage import Database
from koe.service.store.models import ModelRef
from koe.service.synthesis.cache import ModelCache
from koe.service.synthesis.requests import SpeechRequest
from koe.service.synthesis.synthesizer import Synthesizer

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")

FEW = {"max_new_tokens": 4}
DISK_FULL_SQL = "database or disk is full"  # sqlite3.OperationalError's text for SQLITE_FULL


# -- corrupt model folders --------------------------------------------------------------------
def mirror(src: Path, dest: Path) -> Path:
    """A folder like `src` whose files are symlinks to `src`'s (cheap: the weights are not copied)."""
    for p in sorted(src.rglob("*")):
        target = dest / p.relative_to(src)
        if p.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(p, target)
    return dest


def damage(folder: Path, rel: str, how) -> None:
    """Replace `folder/rel` (a symlink into the good model) by a real file holding `how(good bytes)`."""
    path = folder / rel
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(how(data))


def restore(folder: Path, good: Path, rel: str) -> None:
    """Put the good file back (a real copy: a new size and mtime)."""
    (folder / rel).unlink()
    shutil.copyfile(good / rel, folder / rel)


CORRUPTIONS = {
    "truncated": ("model.safetensors", lambda b: b[: len(b) // 2]),
    "garbage": ("model.safetensors", lambda b: os.urandom(4096)),
    "bad-codec": ("speech_tokenizer/model.safetensors", lambda b: b[:1000]),
    "bad-config": ("config.json", lambda b: b'{"talker_config": ['),
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory, session_tmp):
    """A live server over a home with "cv" (the default, good) and one model per corruption."""
    root = tmp_path_factory.mktemp("faults")
    home = make_home(root / "home", session_tmp)
    good = model_folder(session_tmp, "custom_voice")
    folders = {}
    for name, (rel, how) in CORRUPTIONS.items():
        folders[name] = mirror(good, root / name)
        home.models.import_model(folders[name], name, link=True)  # validated while whole, then damaged
        damage(folders[name], rel, how)
    with live_server(create_app(home)) as server:
        yield server, home, good, folders, root


def speak(url: str, model: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/audio/speech", json={"model": model, "input": TEXT, "voice": "ryan", "response_format": "wav", **FEW, **body}, timeout=60)


def assert_failed(r: httpx.Response, model: str, *words: str, roots: tuple[Path, ...] = ()) -> dict:
    """A 503 `model_failed` in OpenAI's shape naming `model` and `words`, with no server path."""
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["type"] == "server_error" and err["code"] == "model_failed" and err["param"] == "model"
    assert f"model {model!r} failed to load" in err["message"]
    for w in words:
        assert w in err["message"], err["message"]
    for root in roots:
        assert str(root) not in err["message"] and str(root.resolve()) not in err["message"]
    assert "/tmp" not in err["message"] and tempfile.gettempdir() not in err["message"]
    return err


def test_corrupt_models_fail_with_503_and_others_still_work(broken):
    server, home, good, folders, root = broken
    reasons = {"truncated": "SafetensorError", "garbage": "SafetensorError", "bad-codec": "SafetensorError", "bad-config": "config.json"}
    for name, word in reasons.items():
        r = speak(server.url, name)
        assert_failed(r, name, word, roots=(root, home.root))
        assert int(r.headers.get("Retry-After", 0)) >= 1 or name == "bad-config"
    r = speak(server.url, "cv")
    assert r.status_code == 200, r.text
    assert decode(r.content)[2] > 0


def test_a_failed_model_is_not_loaded_again_until_its_files_change(broken):
    server, home, good, folders, root = broken
    cache = server.app.state.koe.synthesizer.cache
    assert_failed(speak(server.url, "garbage"), "garbage", "header")
    ref = home.models.get("garbage").ref
    attempts = cache.failure(ref).attempts
    started = time.perf_counter()
    for _ in range(3):
        assert_failed(speak(server.url, "garbage"), "garbage")
    assert cache.failure(ref).attempts == attempts  # answered from the remembered failure
    assert time.perf_counter() - started < 5


def test_models_and_health_show_failed_models(broken):
    server, home, good, folders, root = broken
    for name in ("truncated", "bad-config"):
        speak(server.url, name)
    cards = {c["id"]: c for c in httpx.get(f"{server.url}/v1/models").json()["data"]}
    assert cards["cv"]["status"] in ("loaded", "ready") and cards["cv"]["error"] is None
    assert cards["base"]["status"] in ("loaded", "ready")
    for name in ("truncated", "bad-config"):
        card = cards[name]
        assert card["status"] == "failed" and not card["loaded"] and card["error"], card
        assert str(root) not in card["error"] and "/tmp" not in card["error"]
    assert "SafetensorError" in cards["truncated"]["error"] and cards["truncated"]["failed_at"] >= int(time.time()) - 300
    assert "config.json" in cards["bad-config"]["error"]
    one = httpx.get(f"{server.url}/v1/models/truncated").json()
    assert one["status"] == "failed" and one["error"] == cards["truncated"]["error"]
    health = httpx.get(f"{server.url}/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    failed = health.json()["models_failed"]
    assert {"truncated", "bad-config"} <= set(failed) and "cv" not in failed
    assert all("/tmp" not in why for why in failed.values())


def test_a_repaired_model_loads_at_the_next_request(broken):
    server, home, good, folders, root = broken
    name = "bad-codec"
    assert_failed(speak(server.url, name), name)
    restore(folders[name], good, CORRUPTIONS[name][0])
    r = speak(server.url, name)
    assert r.status_code == 200, r.text
    card = httpx.get(f"{server.url}/v1/models/{name}").json()
    assert card["status"] == "loaded" and card["error"] is None
    assert name not in httpx.get(f"{server.url}/health").json()["models_failed"]


class StubEngine:
    """A loaded model for the cache: it only needs to close (`ModelCache` closes what it unloads)."""

    def close(self) -> None:
        pass


def test_cache_turns_any_load_error_into_model_failed_and_retries(tmp_path):
    now = [0.0]
    calls = []

    def load(ref: ModelRef):
        calls.append(ref.name)
        if len(calls) < 3:
            raise KeyError("talker.codec_embedding.weight")
        return StubEngine()

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    ref = ModelRef("m", folder, "fake", "custom_voice", "0b6")
    cache = ModelCache(load, retry_failed_after=30, clock=lambda: now[0])
    with pytest.raises(ModelFailed) as info:
        with cache.use(ref):
            pass
    assert info.value.status == 503 and "KeyError: 'talker.codec_embedding.weight'" in info.value.message
    assert info.value.retry_after == 30
    now[0] = 10.0
    with pytest.raises(ModelFailed) as again:  # unchanged files, before the retry time: not loaded again
        with cache.use(ref):
            pass
    assert calls == ["m"] and again.value.retry_after == 20
    now[0] = 31.0
    with pytest.raises(ModelFailed):  # the retry time passed: tried once more (and failed)
        with cache.use(ref):
            pass
    assert calls == ["m", "m"] and cache.failure(ref).attempts == 2
    (folder / "config.json").write_text('{"fixed": true}')  # a changed file: tried at once
    with cache.use(ref) as entry:
        assert entry.engine is not None
    assert calls == ["m", "m", "m"] and cache.failure(ref) is None and cache.failures() == []


def test_concurrent_requests_for_a_broken_model_share_one_failed_load(tmp_path):
    calls = []
    gate = threading.Event()

    def load(ref: ModelRef):
        calls.append(ref.name)
        gate.wait(1.0)
        raise RuntimeError("CUDA out of memory")

    folder = tmp_path / "m"
    folder.mkdir()
    cache = ModelCache(load)
    ref = ModelRef("m", folder, "fake", "custom_voice", "0b6")
    errors = []

    def request() -> None:
        try:
            with cache.use(ref):
                pass
        except ModelFailed as e:
            errors.append(e.reason)

    threads = [threading.Thread(target=request) for _ in range(6)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert calls == ["m"] and errors == ["RuntimeError: CUDA out of memory"] * 6


def test_failure_reason_names_files_inside_the_model_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()

    def load(ref: ModelRef):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(ref.path / "speech_tokenizer" / "model.safetensors"))

    cache = ModelCache(load)
    with pytest.raises(ModelFailed) as info:
        with cache.use(ModelRef("model", folder, "fake", "custom_voice", "0b6")):
            pass
    assert info.value.reason == "No such file or directory: speech_tokenizer/model.safetensors"
    assert str(tmp_path) not in str(info.value)


# -- koe serve -m MODEL with corrupt weights --------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_koe_serve_starts_with_a_corrupt_default_model(tmp_path, session_tmp):
    folder = mirror(model_folder(session_tmp, "custom_voice"), tmp_path / "broken-model")
    damage(folder, "model.safetensors", lambda b: b[: len(b) // 3])
    port = free_port()
    env = {**os.environ, "KOE_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "koe.cli.main", "serve", "-m", str(folder), "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
            try:
                return httpx.get(f"{url}/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=90)
        health = httpx.get(f"{url}/health").json()
        assert health["status"] == "ok" and "SafetensorError" in health["models_failed"]["broken-model"]
        r = speak(url, "tts-1")
        assert_failed(r, "broken-model", "SafetensorError", roots=(tmp_path,))
        assert proc.poll() is None
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    log = out.decode(errors="replace")
    assert "broken-model failed to load" in log and "Traceback" in log  # the admin gets the whole story


# -- a full disk --------------------------------------------------------------------------------------
class NoSpaceFile:
    """A file on a full disk: the first 4 KiB of a write land, then it fails with ENOSPC."""

    def __init__(self, f) -> None:
        self._f = f

    def __getattr__(self, name: str):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._f.close()

    def write(self, data: bytes) -> int:
        self._f.write(bytes(data[:4096]))
        self._f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FullDisk:
    """Stands in for `os` inside koe.service.fsio: a file it opens from a descriptor is a
    `NoSpaceFile`, so the atomic writer's real code meets a full disk part way through a write."""

    def __getattr__(self, name: str):
        return getattr(os, name)

    @staticmethod
    def fdopen(fd: int, *args, **kwargs):
        return NoSpaceFile(os.fdopen(fd, *args, **kwargs))


def full_history(monkeypatch) -> None:
    """koe.db's history insert fails as SQLite does when the disk is full."""

    def add_output(self, **kw):
        raise sqlite3.OperationalError(DISK_FULL_SQL)

    monkeypatch.setattr(Database, "add_output", add_output)


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def sse_events(body: bytes) -> list[dict]:
    return [json.loads(line[len(b"data: ") :]) for line in body.split(b"\n") if line.startswith(b"data: ")]


def test_history_on_a_full_disk_is_best_effort(broken, monkeypatch, caplog):
    server, home, *_ = broken
    full_history(monkeypatch)
    r = speak(server.url, "cv")
    assert r.status_code == 200, r.text
    assert decode(r.content)[2] > 0
    assert "not in the history (the disk is full)" in r.headers["X-Koe-Warnings"]
    assert any("not recorded in the history" in m for m in caplog.messages)
    sse = speak(server.url, "cv", stream_format="sse")
    events = sse_events(sse.content)
    assert sse.status_code == 200 and events[-1]["type"] == "speech.audio.done"


class SavingSynthesizer(Synthesizer):
    """Keeps every output under KOE_HOME/outputs, as `koe speak --save` does (the HTTP API asks for
    no saved copy; this is the way to put the save path, and its disk writes, behind a server)."""

    def plan(self, request):
        return replace(super().plan(request), save=True)


@pytest.fixture(scope="module")
def saving(tmp_path_factory, session_tmp):
    """A live server whose synthesizer keeps every output."""
    home = KoeHome(load_settings(tmp_path_factory.mktemp("saving"), flags={"models": {"default": "cv"}}, environ={}))
    home.models.import_model(model_folder(session_tmp, "custom_voice"), "cv", link=True)
    synth = SavingSynthesizer(home)
    try:
        with live_server(create_app(home, synth, first_chunk_s=0.08, chunk_s=0.08)) as server:
            yield server, home
    finally:
        synth.close()


def test_saving_an_output_on_a_full_disk_is_507_and_leaves_nothing(saving, monkeypatch):
    server, home = saving
    outputs = home.settings.outputs_dir
    assert speak(server.url, "cv").status_code == 200 and len(leftovers(outputs)) == 1  # saving works
    before = set(leftovers(outputs))
    monkeypatch.setattr(fsio, "os", FullDisk())
    r = speak(server.url, "cv")
    assert r.status_code == 507, r.text
    err = r.json()["error"]
    assert err["code"] == "insufficient_storage" and err["type"] == "server_error"
    assert "cannot save the output: the disk is full" in err["message"] and "/" not in err["message"].split("(")[0]
    assert set(leftovers(outputs)) == before  # no partial file, no temp file


def test_a_full_disk_mid_stream_ends_the_sse_stream_with_an_error_event(saving, monkeypatch):
    server, home = saving
    before = set(leftovers(home.settings.outputs_dir))
    monkeypatch.setattr(fsio, "os", FullDisk())
    r = speak(server.url, "cv", stream_format="sse", max_new_tokens=8)
    assert r.status_code == 200
    events = sse_events(r.content)
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) >= 2
    last = events[-1]
    assert last["type"] == "error" and last["error"]["code"] == "insufficient_storage", last
    assert "the disk is full" in last["error"]["message"]
    assert all(base64.b64decode(e["audio"]) for e in events[:-1])
    assert set(leftovers(home.settings.outputs_dir)) == before


def test_a_voice_upload_on_a_full_disk_is_507_and_leaves_no_folder(broken, monkeypatch):
    server, home, *_ = broken
    voices_dir = home.settings.voices_dir
    before = sorted(p.name for p in voices_dir.iterdir())
    monkeypatch.setattr(fsio, "os", FullDisk())
    files = {"file": ("clip.wav", wav_clip(2.0), "audio/wav")}
    r = httpx.post(f"{server.url}/v1/audio/voices", data={"name": "spacey", "transcript": "Hello there."}, files=files, timeout=60)
    assert r.status_code == 507, r.text
    err = r.json()["error"]
    assert err["code"] == "insufficient_storage" and "the disk is full" in err["message"] and "/tmp" not in err["message"]
    assert sorted(p.name for p in voices_dir.iterdir()) == before  # no voice folder, no temp folder
    assert httpx.get(f"{server.url}/v1/audio/voices/spacey").status_code == 404


def test_a_voice_prompt_that_cannot_be_kept_is_used_anyway(session_tmp, tmp_path, monkeypatch):
    from safetensors import SafetensorError

    import koe.engines.prompt_files as prompt_files

    home = KoeHome(load_settings(tmp_path, {"models": {"default": "base"}}, environ={}))
    home.models.import_model(model_folder(session_tmp, "base"), "base", link=True)
    home.voices.add("amy", wav_clip(2.0), "Hello there, this is my voice.")
    calls = []

    def save_file(*args, **kwargs):  # what safetensors raises when its write hits a full disk
        calls.append(args[1])
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(prompt_files, "save_file", save_file)
    synth = Synthesizer(home)
    try:
        out = synth.speak(SpeechRequest(text=TEXT, voice="amy", format="wav", options=dict(FEW)))
        assert len(out.samples) > 0
        assert any("the prepared voice could not be kept (the disk is full)" in w for w in out.warnings)
        assert leftovers(home.settings.voices_dir / "amy" / "prompts") == []
        synth.speak(SpeechRequest(text=TEXT, voice="amy", format="wav", options=dict(FEW)))
        assert len(calls) == 2  # not kept, so prepared (and offered to the disk) again
    finally:
        synth.close()


def test_disk_full_is_recognized_through_each_layer():
    from safetensors import SafetensorError

    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_disk_full(sqlite3.OperationalError(DISK_FULL_SQL))
    assert is_disk_full(SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"))
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise StorageError("cannot write the voice") from e
    except StorageError as wrapped:
        assert is_disk_full(wrapped)
        answer = as_koe_error(wrapped)
        assert isinstance(answer, InsufficientStorage) and answer.status == 507
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(sqlite3.OperationalError("database is locked"))
    assert as_koe_error(ValueError("boom")) is None
    assert as_koe_error(NotFound("x")).status == 404


# -- a real full file system (where this machine allows an unprivileged tmpfs) -----------------------
_REAL_DISK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from koe.service.home import KoeHome
    from koe.service.synthesis.requests import SpeechRequest
    from koe.service.config.settings import load_settings
    from koe.service.synthesis.synthesizer import Synthesizer
    from koe.service.errors import InsufficientStorage

    mount, cv, base, clip = sys.argv[1:5]
    home = KoeHome(load_settings(os.path.join(mount, "home"), {"models": {"default": "cv"}}, environ={}))
    home.models.import_model(cv, "cv", link=True)
    home.models.import_model(base, "base", link=True)
    home.voices.add("amy", open(clip, "rb").read(), "Hello there, this is my voice.")
    synth = Synthesizer(home)
    few = {"max_new_tokens": 4}
    try:
        with open(os.path.join(mount, "filler"), "wb", buffering=0) as f:  # fill the disk
            while True:
                f.write(b"x" * 4096)
    except OSError:
        pass
    result = {}
    out = synth.speak(SpeechRequest(text="Hello.", format="wav", voice="ryan", options=few))
    result["history"] = {"audio": len(out.audio), "warnings": out.warnings}
    try:
        synth.speak(SpeechRequest(text="Hello.", format="wav", voice="ryan", save=True, options=few))
        result["save"] = "saved"
    except InsufficientStorage as e:
        result["save"] = [e.status, e.message]
    result["outputs"] = [f for _, _, fs in os.walk(home.settings.outputs_dir) for f in fs]
    out = synth.speak(SpeechRequest(text="Hello.", model="base", format="wav", voice="amy", options=few))
    result["prompt"] = {"audio": len(out.audio), "warnings": out.warnings}
    print("RESULT " + json.dumps(result))
    """
)


def test_a_real_full_disk(tmp_path, session_tmp):
    unshare = shutil.which("unshare")
    mount = tmp_path / "disk"
    mount.mkdir()
    probe = subprocess.run([unshare or "unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=2m tmpfs {mount}"], capture_output=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("this machine does not let an unprivileged process mount a tmpfs (unshare -rm); the injected ENOSPC tests cover it")
    clip = tmp_path / "amy.wav"
    clip.write_bytes(wav_clip(2.0))
    cv, base = model_folder(session_tmp, "custom_voice"), model_folder(session_tmp, "base")
    script = tmp_path / "fill.py"
    script.write_text(_REAL_DISK_SCRIPT)
    inner = f"mount -t tmpfs -o size=2m tmpfs {mount} && exec {sys.executable} {script} {mount} {cv} {base} {clip}"
    r = subprocess.run(["unshare", "-rm", "sh", "-c", inner], capture_output=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out + r.stderr.decode(errors="replace")
    result = json.loads(out.split("RESULT ", 1)[1])
    assert result["history"]["audio"] > 0  # the audio came back, recorded or not
    assert all("disk is full" in w for w in result["history"]["warnings"] if "history" in w)
    assert result["save"] == [507, "cannot save the output: the disk is full"]
    assert [f for f in result["outputs"] if not f.startswith("0")] == []  # no temp file left
    assert result["prompt"]["audio"] > 0
    assert any("the prepared voice could not be kept (the disk is full)" in w for w in result["prompt"]["warnings"])


# -- server paths in error messages ---------------------------------------------------------------
def test_redact_paths():
    home = Path(tempfile.gettempdir()) / "someone" / ".koe"
    text = f"cannot read {home}/voices/amy/reference.wav: bad; see {tempfile.gettempdir()}/x/y.json and C:\\Users\\me\\koe\\m.bin"
    out = redact_paths(text, home)
    assert out == "cannot read KOE_HOME/voices/amy/reference.wav: bad; see y.json and m.bin"
    assert redact_paths("no such endpoint: POST /v1/audio/speechx") == "no such endpoint: POST /v1/audio/speechx"
    assert redact_paths(f"{home}2/a", home) == "a"  # another folder, not KOE_HOME
    assert redact_paths("speed 1/2 and/or 3") == "speed 1/2 and/or 3"


def test_server_errors_do_not_show_server_paths(broken, monkeypatch):
    server, home, _good, _folders, root = broken
    missing = Path(tempfile.gettempdir()) / "koe-no-such-folder" / "model"
    r = speak(server.url, str(missing))
    assert r.status_code in (400, 404), r.text
    message = r.json()["error"]["message"]
    assert str(missing.parent) not in message and "model" in message

    home.voices.add("gone", wav_clip(2.0), "Hello there, this is my voice.")
    home.voices.get("gone").reference_path.write_bytes(b"RIFF garbage")  # a damaged library voice: its clip is unreadable
    r = speak(server.url, "base", voice="gone")
    assert r.status_code >= 400
    message = r.json()["error"]["message"]
    assert "KOE_HOME/voices/gone/reference.wav" in message and str(home.root) not in message and "/tmp" not in message
    voices = server.app.state.koe.home.voices

    def broken_list():
        raise PermissionError(errno.EACCES, "Permission denied", str(home.root / "voices" / "amy" / "voice.json"))

    monkeypatch.setattr(voices, "list", broken_list)
    r = httpx.get(f"{server.url}/v1/audio/voices")
    assert r.status_code == 500
    message = r.json()["error"]["message"]
    assert "KOE_HOME/voices/amy/voice.json" in message and str(home.root) not in message
    r = httpx.get(f"{server.url}/v1/nope")
    assert r.status_code == 404 and "/v1/nope" in r.json()["error"]["message"]


def test_the_service_keeps_full_paths_for_the_cli(tmp_path):
    home = KoeHome(load_settings(tmp_path, {}, environ={}))
    missing = tmp_path / "nowhere" / "model"
    with pytest.raises(NotFound) as info:
        Synthesizer(home).plan(SpeechRequest(text=TEXT, model=str(missing)))
    assert str(missing) in str(info.value)
