"""Helpers shared by the product tests of the engine families (tests/engines/*/test_*_service.py, _errors.py,
_install.py): voiced-sounding clips, decoding what koe wrote, the `koe` command under a clean KOE_HOME and its
one-line errors, the server's error bodies, the voice library, and a fake Hugging Face hub on a loopback port.

Fixtures stay in the test modules, as thin wrappers over the factories here, so each module shows what it uses.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import av
import numpy as np
import soundfile as sf
from fixtures_models import model_folder
from typer.testing import CliRunner

from koe.cli.main import app
from koe.engines.registry import load_engine


# -- clips and encoded audio -----------------------------------------------------------------------
def speechy(seconds: float, sr: int = 24000, level: float = 0.3) -> np.ndarray:
    """A voiced-sounding clip: a few harmonics with a syllable-like envelope."""
    t = np.arange(int(seconds * sr)) / sr
    x = sum(np.sin(2 * np.pi * f * t) / (i + 1) for i, f in enumerate((140, 280, 420)))
    x = x * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return (level * x / np.abs(x).max()).astype(np.float32)


def wav_bytes(samples: np.ndarray, sr: int = 24000) -> bytes:
    """A 16-bit PCM WAV file of `samples`, in memory."""
    buf = io.BytesIO()
    sf.write(buf, samples, sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def write_wav(path: Path, samples: np.ndarray, sr: int = 24000) -> Path:
    """`samples` as a 16-bit PCM WAV file at `path`."""
    sf.write(path, samples, sr, subtype="PCM_16")
    return path


def decode(data: bytes) -> tuple[str, int, np.ndarray]:
    """(codec, sample rate, samples) of an encoded file (int16 for PCM WAV, float for lossy codecs)."""
    with av.open(io.BytesIO(data)) as c:
        stream = c.streams.audio[0]
        frames = [f.to_ndarray().reshape(-1) for f in c.decode(stream)]
        return stream.codec_context.name, stream.codec_context.sample_rate, np.concatenate(frames) if frames else np.zeros(0)


# -- the `koe` command -----------------------------------------------------------------------------
def clean_koe_home(tmp_path: Path, monkeypatch) -> Path:
    """KOE_HOME set to `tmp_path/home` (not made) and every other KOE_* variable unset; the home's path."""
    home = tmp_path / "home"
    for var in list(os.environ):
        if var.startswith("KOE_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("KOE_HOME", str(home))
    return home


def run_koe(*args, ok: bool = True, input: str | bytes | None = None):
    """`koe ARGS` in this process (CliRunner), `input` on stdin; with `ok`, it must exit 0. The click Result."""
    result = CliRunner().invoke(app, [str(a) for a in args], input=input)
    if ok:
        assert result.exit_code == 0, f"koe {' '.join(map(str, args))} -> {result.exit_code}\n{result.output}"
    return result


def koe_command(tmp_path: Path, monkeypatch):
    """`run_koe` under a clean KOE_HOME (`run.home`): `ok=True` (the default) must exit 0, `ok=False` checks nothing."""
    home = clean_koe_home(tmp_path, monkeypatch)

    def run(*args, ok: bool = True):
        return run_koe(*args, ok=ok)

    run.home = home
    return run


def strict_koe_command(tmp_path: Path, monkeypatch):
    """`koe ARGS` under a clean KOE_HOME (`run.home`): `ok=True` must exit 0; `ok=False` must fail with one `error:` line
    on stderr and no traceback; `ok=None` (the default) checks nothing."""
    home = clean_koe_home(tmp_path, monkeypatch)
    runner = CliRunner()

    def run(*args, ok: bool | None = None):
        result = runner.invoke(app, [str(a) for a in args])
        if ok is True:
            assert result.exit_code == 0, result.output
        elif ok is False:
            assert result.exit_code != 0, result.output
            assert "Traceback" not in result.output
            lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
            assert len(lines) == 1 and lines[0].startswith("error:"), result.output
        return result

    run.home = home
    return run


def one_line_error(result, *words: str) -> None:
    """A usage error (exit 2) of one `error:` line on stderr, no traceback, with each of `words` in it."""
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for w in words:
        assert w in result.stderr, result.stderr


# -- the server ------------------------------------------------------------------------------------
def assert_error(r, status: int, *words: str, param: str | None = None) -> dict:
    """An OpenAI-style error answer: `status`, each of `words` in the message, the `param` when given. The error body."""
    assert r.status_code == status, r.text
    err = r.json()["error"]
    for w in words:
        assert w in err["message"], err["message"]
    if param is not None:
        assert err["param"] == param, err
    return err


# -- models, the voice library, files --------------------------------------------------------------
def tiny_qwen(tmp_path_factory):
    """For a module fixture (`yield from tiny_qwen(...)`): the tiny Qwen3-TTS Base engine, closed afterwards."""
    engine = load_engine(model_folder(tmp_path_factory.getbasetemp(), "base", "tiny"))
    yield engine
    engine.close()


def library_voices(home: Path) -> dict:
    """The voice library of KOE_HOME `home`, by name."""
    from koe.service import KoeHome, load_settings

    h = KoeHome(load_settings(home, environ={}))
    try:
        return {v.name: v for v in h.voices.list()}
    finally:
        h.close()


def leftovers(root: Path) -> list[str]:
    """Hidden temp files or folders (atomic writes use dot-names) anywhere under `root`."""
    return [str(p.relative_to(root)) for p in root.rglob(".*")] if root.exists() else []


def tree(folder: Path) -> list[str]:
    """The files under `folder`, as sorted relative POSIX paths."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def folder_files(folder: Path) -> dict[str, bytes]:
    """{relative POSIX path: bytes} of every file under `folder`."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def nothing_installed(store) -> bool:
    """A ModelStore with no model listed and nothing in its folder but `.partial` leftovers."""
    return store.list() == [] and [p.name for p in store.root.iterdir() if not p.name.endswith(".partial")] == []


# -- pull, against a fake hub on a loopback port ---------------------------------------------------
def install_fake_hub(monkeypatch, repos: dict[str, dict[str, bytes]]):
    """A real HTTP fake hub (tests/hub_server.HubServer) over `repos`, made this test's hub: `HF_ENDPOINT` points
    at it, offline mode is off, retries wait briefly, and any lookup of a host that is not loopback fails (the
    hosts tried are in `hub.internet`). The HubServer; close it when done (the fixtures `yield` it)."""
    import huggingface_hub.constants
    from hub_server import HubServer, no_internet

    hub = HubServer(repos)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # read at import: its request hook refuses when set
    monkeypatch.setattr("koe.service.store.download.RETRY_WAITS_S", (0.05, 0.05, 0.05))  # a hub that stays down fails in a blink
    hub.internet = no_internet(monkeypatch)
    return hub
