"""Files written whole or not at all: a temporary beside the target, fsynced, then renamed onto it.

For the lower layers (audio, engines); the service's store has its own in `koe.service.fsio`
(with locks and per-process temporary names it can clean up after a crash), built on the fsync
helpers here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """Open a temporary beside `path` (`mode` "wb" or "w"); on a clean exit it is fsynced, given
    the umask's permissions and renamed onto `path`. On an exception it is removed and `path` is
    untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=encoding, **({"newline": "\n"} if "b" not in mode else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename inside the folder `path` durable (a no-op where folders cannot be opened)."""
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


def fsync_tree(root: str | os.PathLike) -> None:
    """fsync every file (symlinks aside) and folder under `root`: its contents are on disk before it is renamed."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(dirpath)
