"""Helpers shared by the product tests of the engine families (tests/engines/*/test_*_service.py, _errors.py,
_install.py): voiced-sounding clips, decoding what koe wrote, the `koe` command under a clean KOE_HOME and its
one-line errors, the server's error bodies, the voice library, and a fake Hugging Face hub.

Fixtures stay in the test modules, as thin wrappers over the factories here, so each module shows what it uses.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from types import SimpleNamespace

import av
import numpy as np
import soundfile as sf
from fixtures_models import model_folder
from typer.testing import CliRunner

import koe
from koe.cli.main import app


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


def run_koe(*args, ok: bool = True):
    """`koe ARGS` in this process (CliRunner); with `ok`, it must exit 0. The click Result."""
    result = CliRunner().invoke(app, [str(a) for a in args])
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
    engine = koe.load(model_folder(tmp_path_factory.getbasetemp(), "base", "tiny"))
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


# -- pull, against a fake hub ----------------------------------------------------------------------
class FakeHub:
    """`huggingface_hub.HfApi.model_info` and `snapshot_download` over local files: {repo: {path in repo: bytes}}."""

    def __init__(self, repos: dict[str, dict[str, bytes]]) -> None:
        self.repos = repos
        self.downloads: list[tuple[str, tuple[str, ...] | None]] = []
        self.fetched: list[str] = []  # (repo/path) of every file written, to see what a rerun resumes
        self.fail: set[str] = set()  # repos whose download raises OSError once
        self.bad_sha: set[str] = set()  # "repo/path" the hub lists with a wrong SHA-256
        hub = self

        class Api:
            def __init__(self, endpoint=None):
                pass

            def model_info(self, repo_id, revision=None, files_metadata=False, token=None, timeout=None):
                if repo_id not in hub.repos:
                    from huggingface_hub.errors import RepositoryNotFoundError

                    raise RepositoryNotFoundError(f"{repo_id} not found", response=SimpleNamespace(headers={}, status_code=404, request=None))
                siblings = [
                    SimpleNamespace(rfilename=path, lfs=SimpleNamespace(sha256="0" * 64 if f"{repo_id}/{path}" in hub.bad_sha else hashlib.sha256(data).hexdigest()))
                    for path, data in hub.repos[repo_id].items()
                ]  # fmt: skip
                return SimpleNamespace(sha=hashlib.sha1(repo_id.encode()).hexdigest(), siblings=siblings)

        self.Api = Api

    def snapshot_download(self, repo_id, revision=None, local_dir=None, allow_patterns=None, token=None, endpoint=None, **kw):
        from huggingface_hub.utils import filter_repo_objects

        self.downloads.append((repo_id, tuple(allow_patterns) if allow_patterns else None))
        if repo_id in self.fail:
            self.fail.discard(repo_id)
            raise OSError("connection reset")
        files = self.repos[repo_id]
        for path in filter_repo_objects(list(files), allow_patterns=allow_patterns):
            target = Path(local_dir) / path
            if target.is_file():
                continue  # resumed: already there
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[path])
            self.fetched.append(f"{repo_id}/{path}")
        (Path(local_dir) / ".cache" / "huggingface").mkdir(parents=True, exist_ok=True)
        return str(local_dir)


def install_fake_hub(monkeypatch, repos: dict[str, dict[str, bytes]]) -> FakeHub:
    """A FakeHub over `repos` in place of `huggingface_hub` (and the reachability check) for this test; the FakeHub."""
    import huggingface_hub

    fake = FakeHub(repos)
    monkeypatch.setattr("koe.service.hub.check_hub_reachable", lambda *a, **k: None)
    monkeypatch.setattr(huggingface_hub, "HfApi", fake.Api)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake.snapshot_download)
    return fake
