"""Files written whole or not at all: a temporary beside the target, fsynced, then renamed onto it;
and JSON objects (configs, prompt metadata) read with one set of checks (`read_json_object`).

For the lower layers (audio, engines); the service's store has its own in `koe.service.fsio`
(with locks and per-process temporary names it can clean up after a crash), built on the fsync
helpers here.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

MAX_JSON_BYTES = 64 << 20  # a model's config (or a voice prompt's metadata) is kilobytes; a tokenizer's vocabulary a few MB


def read_json_object(path: str | os.PathLike, error: type[Exception] = ValueError) -> dict:
    """The JSON object in the file `path` (a model's config.json, a voice prompt's prompt.json).

    One way to read them, for every family: a file that cannot be read, is over `MAX_JSON_BYTES`, is
    not UTF-8 JSON, is nested too deeply for the parser (json's `RecursionError`) or holds something
    other than an object raises `error` (a `ValueError` subclass) with one line naming the file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    except OSError as e:
        raise error(f"{path}: cannot read it ({e.strerror or e})") from e
    if len(data) > MAX_JSON_BYTES:
        raise error(f"{path}: over {MAX_JSON_BYTES >> 20} MiB, not a config file koe reads")
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise error(f"{path}: not valid JSON ({e})") from e
    except RecursionError:
        raise error(f"{path}: not a usable JSON file (nested too deeply)") from None
    if not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object, found {type(value).__name__ if value is not None else 'null'}")
    return value


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
