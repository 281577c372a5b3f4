"""The session's shared folders (tests/shared_folders.py): written once, by one process, and a test
that changes one is named when the session ends."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest
import shared_folders
from shared_folders import ROOT, check_unchanged, shared


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(ROOT, str(tmp_path))
    return tmp_path


def _write_slowly(folder: Path) -> None:
    (folder / "a.bin").write_bytes(os.urandom(4))
    (folder / "writers").mkdir()
    (folder / "writers" / str(os.getpid())).touch()


def _ask(name: str) -> str:
    return str(shared(name, _write_slowly))


def test_written_once_whoever_asks_first(root):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        paths = pool.map(_ask, ["m"] * 8)
    assert set(paths) == {str(root / "m")}
    assert len(list((root / "m" / "writers").iterdir())) == 1  # one process wrote it; the others read it
    assert shared("m", lambda folder: pytest.fail("written again")) == root / "m"
    assert check_unchanged() == []


@pytest.mark.parametrize(
    "change",
    [
        lambda f: (f / "a.bin").write_bytes(b"changed!"),  # rewritten
        lambda f: (f / "a.bin").unlink(),  # removed
        lambda f: (f / "b.txt").write_text("added"),  # added
    ],
    ids=["rewritten", "removed", "added"],
)
def test_a_change_is_named(root, change):
    folder = shared("model", _write_slowly)
    change(folder)
    (problem,) = check_unchanged()
    assert "'model' was changed by a test" in problem and ("a.bin" in problem or "b.txt" in problem)


def test_a_writer_that_fails_leaves_nothing_behind_and_the_next_ask_writes_again(root):
    def broken(folder: Path) -> None:
        (folder / "half").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        shared("m", broken)
    folder = shared("m", _write_slowly)
    assert not (folder / "half").exists() and (folder / "a.bin").is_file()


def test_without_the_sessions_folder_it_says_so(monkeypatch):
    monkeypatch.delenv(ROOT)
    with pytest.raises(RuntimeError, match="KOE_TEST_SHARED is not set"):
        shared_folders.shared("m", _write_slowly)
