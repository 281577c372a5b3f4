"""Atomic file and folder writes: temp file + fsync + rename, so a crash never leaves half a file."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask_mode(mode: int) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open a temp file beside `path` for writing; on a clean exit it is fsynced and renamed onto `path`.

    On an exception the temp file is removed and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _umask_mode(0o666))
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically; returns the path."""
    with atomic_writer(path) as f:
        f.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 `text` to `path` atomically; returns the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(Path(dirpath))


@contextlib.contextmanager
def atomic_folder(final: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Build a folder in a hidden temp folder beside `final`, then rename it into place.

    Yields the temp folder to fill. On a clean exit every file is fsynced and the folder renamed to
    `final` (an existing `final` is swapped out and removed only when `replace`); on an exception
    the temp folder is removed. Readers see either no folder or a complete one.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        _fsync_tree(tmp)
        if final.exists() or final.is_symlink():
            if not replace:
                raise FileExistsError(final)
            remove_tree(final)
        os.replace(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_tree(path: str | os.PathLike) -> None:
    """Remove a folder (or a symlink to one, leaving its target alone) so it vanishes at once.

    The folder is first renamed to a hidden name, so a crash mid-delete leaves no half-deleted
    folder under its real name; leftovers are swept by `sweep_leftovers`.
    """
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    if not path.exists():
        return
    trash = path.parent / f".{path.name}.{os.getpid()}.deleted"
    os.replace(path, trash)
    fsync_dir(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def sweep_leftovers(folder: Path, older_than_s: float = 3600.0) -> None:
    """Remove temp and deleted folders/files a crash left behind (hidden `.tmp` / `.deleted` names).

    Only those untouched for `older_than_s` go, so another process's write in progress is safe.
    """
    if not folder.is_dir():
        return
    now = time.time()
    for p in folder.iterdir():
        if p.name.startswith(".") and (p.name.endswith(".tmp") or p.name.endswith(".deleted")):
            try:
                if now - p.lstat().st_mtime < older_than_s:
                    continue
            except FileNotFoundError:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
