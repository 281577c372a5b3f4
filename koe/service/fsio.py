"""Atomic file and folder writes: temp file + fsync + rename, so a crash never leaves half a file.

Temporaries are hidden names beside their target that carry the writer's pid
(`.<name>.<pid>.<random>.tmp`, `.<name>.<pid>.<random>.deleted`), and a temp folder is
`flock`ed while it is built. `sweep_leftovers` (run when a store opens) removes any temp whose
writer is gone, whatever its age, and leaves those of a live writer alone: the pid tells in this
PID namespace, the lock tells across namespaces (a container sharing KOE_HOME) and survives pid
reuse. A lock alone has a gap between creating the folder and locking it; a pid alone misjudges
other namespaces; together they cover each other.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from koe.runtime.files import fsync_dir, fsync_tree

try:
    import fcntl
except ImportError:  # not POSIX: no advisory locks, the pid alone decides
    fcntl = None  # type: ignore[assignment]

_OWNED_TMP = re.compile(r"^\..+\.(\d+)\.[A-Za-z0-9_]+\.tmp$")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _umask_mode(mode: int) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def temp_prefix(name: str) -> str:
    """The prefix of a temporary for `name` written by this process: `.<name>.<pid>.` (see the module doc)."""
    return f".{name}.{os.getpid()}."


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open a temp file beside `path` for writing; on a clean exit it is fsynced and renamed onto `path`.

    On an exception the temp file is removed and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            _lock(f.fileno())
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


@contextlib.contextmanager
def atomic_folder(final: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Build a folder in a hidden temp folder beside `final`, then rename it into place.

    Yields the temp folder to fill. On a clean exit every file is fsynced and the folder renamed to
    `final`; on an exception the temp folder is removed. Readers see no folder or a complete one.

    An existing `final` raises `FileExistsError`, unless `replace`: then the two are swapped in
    one step (`exchange`), so a reader of `final` (this process or another) sees the old folder or
    the new one, never neither; the old one is then removed. Where the file system cannot swap,
    the old folder is renamed away and the new one in: a window of two renames, which readers such
    as `VoiceLibrary.get` bridge by retrying briefly.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(final.name), suffix=".tmp", dir=final.parent))
    held = _hold(tmp)
    try:
        yield tmp
        fsync_tree(tmp)
        old = None
        if final.exists() or final.is_symlink():
            if not replace:
                raise FileExistsError(final)
            if exchange(tmp, final):
                old = tmp  # the old folder is now at the temp name
            else:
                old = final.parent / f"{temp_prefix(final.name)}{secrets.token_hex(4)}.deleted"
                os.replace(final, old)  # from here to the rename below, `final` is missing
        if old is not tmp:
            try:
                os.rename(tmp, final)
            except OSError as e:  # another process put a folder there meanwhile
                if old is not None:
                    with contextlib.suppress(OSError):
                        os.rename(old, final)  # put the old folder back rather than lose it
                if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise FileExistsError(final) from e
                raise
        fsync_dir(final.parent)
        if old is not None:
            with contextlib.suppress(OSError):  # best effort: a leftover is swept at the next start
                remove_tree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if held is not None:
            os.close(held)


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap the paths `a` and `b` atomically (Linux `renameat2(RENAME_EXCHANGE)`).

    Returns False, changing nothing, where the system or file system cannot (then rename instead).
    """
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(os.fspath(a)), _AT_FDCWD, os.fsencode(os.fspath(b)), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a), None, os.fspath(b))


_RENAMEAT2: list = []


def _renameat2():
    """libc's `renameat2` (glibc >= 2.28, musl), or None off Linux or where libc lacks it."""
    if not _RENAMEAT2:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).renameat2
                fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _RENAMEAT2.append(fn)
    return _RENAMEAT2[0]


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
    trash = path.parent / f"{temp_prefix(path.name)}{secrets.token_hex(4)}.deleted"
    os.replace(path, trash)
    fsync_dir(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def sweep_leftovers(folder: Path, older_than_s: float = 3600.0) -> list[Path]:
    """Remove the temporaries a crash (or kill -9) left in `folder`; returns what was removed.

    `.deleted` folders always go (finishing a delete is harmless). A `.tmp` carrying a pid goes at
    any age once its writer is gone: the pid is not alive here and no process holds its lock, so a
    write in progress in another process is left alone. A `.tmp` without a pid (from an older koe)
    goes when untouched for `older_than_s`.
    """
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    now = time.time()
    for p in entries:
        name = p.name
        if not name.startswith(".") or not name.endswith((".tmp", ".deleted")):
            continue
        if name.endswith(".tmp"):
            owned = _OWNED_TMP.match(name)
            try:
                if owned is None and now - p.lstat().st_mtime < older_than_s:
                    continue
            except FileNotFoundError:
                continue
            if owned is not None and (pid_alive(int(owned.group(1))) or _in_use(p)):
                continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        if not p.exists() and not p.is_symlink():
            removed.append(p)
    return removed


def pid_alive(pid: int) -> bool:
    """True when process `pid` exists (here: this PID namespace); True too where that cannot be told."""
    if os.name != "posix":
        return True  # os.kill(pid, 0) would terminate it on Windows
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def _lock(fd: int) -> None:
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _hold(folder: Path) -> int | None:
    """Open `folder` and lock it, marking it in use until the descriptor is closed (None where locks are absent)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return None
    _lock(fd)
    return fd


def _in_use(path: Path) -> bool:
    """True when some process holds the lock on `path` (a temp being written)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


@contextlib.contextmanager
def path_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive advisory lock (`flock`) on the existing file or folder `path` for the block: one
    holder at a time, across threads (each call opens its own descriptor) and processes. The lock goes
    when the process dies; a no-op where `fcntl` is absent or `path` cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY) if fcntl is not None else None
    except OSError:
        fd = None
    if fd is None:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
