"""`koe demo` speaks real words where it can: with no model configured and the hub reachable it pulls the
0.6B CustomVoice release (saying what, how big and where first) and speaks with it; `KOE_DEMO_OFFLINE=1`
(or `--offline`) skips the pull; offline, unreachable or a failed pull falls back to the random-weight
model, saying why.

The hub is the loopback fake (tests/hub_server.py) serving a tiny random-weight CustomVoice folder under
the release's id, so the real pull runs; the first test runs `koe demo` as a subprocess, as `make demo` does.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest
from fixtures_models import model_folder
from product_helpers import decode, folder_files, install_fake_hub, koe_command, run_koe

from koe.engines.registry import DEMO_FAMILY, spec
from koe.engines.spec import RANDOM_WEIGHTS_FILE

RELEASE = spec(DEMO_FAMILY).released[0].repo_id  # the demo's model: Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice
NAME = RELEASE.split("/")[-1]
FAST = ("--max-new-tokens", "8")


@pytest.fixture(scope="module")
def release_files(tmp_path_factory) -> dict[str, bytes]:
    """The release's files: the tiny CustomVoice folder without koe's random-weights marker, which no release has."""
    files = folder_files(model_folder(tmp_path_factory.getbasetemp(), "custom_voice"))
    del files[RANDOM_WEIGHTS_FILE]
    return files


@pytest.fixture
def hub(monkeypatch, release_files):
    hub = install_fake_hub(monkeypatch, {RELEASE: release_files})
    yield hub
    hub.close()
    assert hub.internet == []


@pytest.fixture
def koe(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty Hugging Face cache: the demo's model is not there
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return koe_command(tmp_path, monkeypatch)


def test_demo_pulls_the_release_once_and_speaks_with_it(tmp_path, hub, release_files, monkeypatch, koe):
    assert RELEASE == "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    home, out = tmp_path / "home", tmp_path / "out" / "demo.wav"
    assert koe.home == home
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KOE_", "HF_"))}
    env.update(KOE_HOME=str(home), HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run([sys.executable, "-m", "koe.cli.main", "demo", "-o", str(out), *FAST], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = proc.stderr.replace("\n", " ")
    where = home / "models" / NAME
    assert f"fetching the real {RELEASE} into {where}" in said and "KOE_DEMO_OFFLINE=1" in said  # what, where, how to skip ...
    sha = hub.refs[RELEASE]["main"]
    assert re.search(rf"{re.escape(RELEASE)}@{sha[:12]}: {len(release_files)} files, [\d.]+ MB", said)  # ... how big, from the listing
    assert said.index("files, ") < said.index("installed")
    assert "RANDOM" not in said and f"model {NAME} (custom_voice) at {where}" in said
    _codec, rate, samples = decode(out.read_bytes())
    assert rate == 24000 and len(samples) > 0
    assert folder_files(where) == release_files
    assert not (home / "koe.toml").exists() or "default" not in (home / "koe.toml").read_text()  # nothing set globally

    # the next run finds it in the store: nothing is fetched again
    fetched = hub.body_bytes()
    r = run_koe("demo", "-o", out, *FAST)  # (the `koe` fixture made this test's KOE_HOME `home`)
    assert "fetching" not in r.stderr and "RANDOM" not in r.stderr and hub.body_bytes() == fetched


def test_demo_offline_variable_skips_the_pull(koe, hub, monkeypatch, tmp_path):
    monkeypatch.setenv("KOE_DEMO_OFFLINE", "1")
    r = koe("demo", "-o", tmp_path / "d.wav", *FAST)
    assert "KOE_DEMO_OFFLINE is set" in r.stderr and "RANDOM weights" in r.stderr
    assert hub.hits == []  # the hub was not asked anything
    monkeypatch.delenv("KOE_DEMO_OFFLINE")
    r = koe("demo", "-o", tmp_path / "d.wav", "--offline", *FAST)
    assert "--offline" in r.stderr and "RANDOM weights" in r.stderr and hub.hits == []


def test_demo_falls_back_to_random_weights_when_the_hub_is_unreachable(koe, monkeypatch, tmp_path):
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    r = koe("demo", "-o", tmp_path / "d.wav", *FAST)
    said = r.stderr.replace("\n", " ")
    assert f"{RELEASE} could not be downloaded" in said and "cannot reach the Hugging Face hub" in said and "RANDOM weights" in said
    assert (tmp_path / "d.wav").stat().st_size > 1000


def test_demo_falls_back_when_the_pull_fails_and_says_why(koe, hub, tmp_path):
    hub.broken.add(RELEASE)
    r = koe("demo", "-o", tmp_path / "d.wav", *FAST)
    said = r.stderr.replace("\n", " ")
    assert f"{RELEASE} could not be downloaded" in said and "the hub answered 500" in said and "RANDOM weights" in said
    assert (tmp_path / "d.wav").stat().st_size > 1000


def test_demo_uses_the_release_from_the_hugging_face_cache_without_downloading(koe, hub, release_files, tmp_path):
    """The resolver's order: a release already in the Hugging Face cache is used where it is."""
    import huggingface_hub.constants
    from huggingface_hub import snapshot_download

    with pytest.MonkeyPatch.context() as mp:  # fill the cache with huggingface_hub itself (its agent look-up off)
        mp.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
        snapshot = snapshot_download(RELEASE, cache_dir=tmp_path / "hf" / "hub", endpoint=hub.url)
    served = hub.body_bytes()
    r = koe("demo", "-o", tmp_path / "d.wav", *FAST)
    assert "fetching" not in r.stderr and "RANDOM" not in r.stderr and hub.body_bytes() == served
    assert str(snapshot) in r.stderr.replace("\n", "")


def test_speak_with_a_hub_id_downloads_it_on_first_use_then_finds_it(koe, hub, release_files, tmp_path, monkeypatch):
    """`koe speak -m OWNER/NAME`: not in the store nor the cache, the hub reachable → pulled into the
    store with its steps on stderr and a summary line; the second run fetches nothing."""
    r = koe("speak", "Hello.", "-m", RELEASE, "--speaker", "ryan", *FAST, "--seed", "0", "-o", tmp_path / "a.wav")
    assert "downloaded" in r.stderr and RELEASE in r.stderr
    assert folder_files(tmp_path / "home" / "models" / NAME) == release_files
    fetched = hub.body_bytes()
    r = koe("speak", "Hello.", "-m", RELEASE, "--speaker", "ryan", *FAST, "--seed", "0", "-o", tmp_path / "b.wav")
    assert "downloaded" not in r.stderr and hub.body_bytes() == fetched
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes()
    monkeypatch.setenv("KOE_MODELS__DOWNLOAD", "false")
    r = koe("speak", "Hello.", "-m", "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "--speaker", "ryan", "-o", tmp_path / "c.wav", ok=False)
    assert "koe models pull Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice" in r.stderr.replace("\n", " ")
