"""Folders the tests only read, written once per test session for every process of it (the xdist
workers included): the random-weight model folders (`fixture(family, variant)`, as
`koe.engines.registry.write_fixture` writes them) and the inputs of a golden topic
(`golden_files.GoldenFiles.written`). IndexTTS 2's tiny release alone is 790 MB and takes 10-13 s
to write; a dozen test modules read it.

    folder = shared("name", lambda folder: write_something(folder))   # written by the first caller
    folder = fixture("indextts", "IndexTTS-2")

The first process to ask writes the folder under a lock (the others wait for it, then read it);
the writer must be deterministic, as every fixture writer is. A test that changes such a folder
(adds, removes or rewrites a file) would change what the tests after it read: `check_unchanged`,
called when the session ends (tests/conftest.py), fails the run naming the folder and its changed
files. A test that changes a model folder (damaged files, fine-tuning output) writes its own.

The root (`KOE_TEST_SHARED`) is made by the session's first process (tests/conftest.py), inherited
by every process it starts, and removed when it ends.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

ROOT = "KOE_TEST_SHARED"


def _root() -> Path:
    root = os.environ.get(ROOT)
    if not root:
        raise RuntimeError(f"{ROOT} is not set: tests/conftest.py makes the session's folder of shared folders")
    return Path(root)


def _snapshot(folder: Path) -> dict[str, list[int]]:
    """Every file under `folder` (links not followed) with its size and modification time."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() or path.is_symlink():
            st = path.lstat()
            found[str(path.relative_to(folder))] = [st.st_size, st.st_mtime_ns]
    return found


def shared(name: str, write: Callable[[Path], object]) -> Path:
    """The folder `name` of this session, which `write(folder)` fills the first time it is asked
    for (in whichever process asks first); to read only."""
    root = _root()
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a writer that failed in an earlier test
            folder.mkdir(parents=True)
            write(folder)
            done.write_text(json.dumps(_snapshot(folder)))
    return folder


def fixture(family: str, variant: str | None = None) -> Path:
    """`registry.write_fixture(folder, family, variant)` (tiny), shared: the model's folder."""
    from koe.engines import registry

    variant = variant or registry.spec(family).fixture_variants[0]

    def write(folder: Path) -> None:
        if Path(registry.write_fixture(folder, family, variant)) != folder:
            raise AssertionError(f"{family}'s fixture writer wrote {variant} somewhere other than the folder it was given")

    return shared(f"fixture-{family}-{variant}", write)


def check_unchanged() -> list[str]:
    """What changed in the session's shared folders since they were written: one line per folder
    that differs, naming the files added, removed or rewritten (none: an empty list)."""
    root = os.environ.get(ROOT)
    problems = []
    for done in sorted(Path(root).glob("*.done")) if root else ():
        name = done.name.removesuffix(".done")
        was, now = json.loads(done.read_text()), _snapshot(done.parent / name)
        if was != now:
            changed = sorted(set(was) ^ set(now) | {k for k in set(was) & set(now) if was[k] != now[k]})
            problems.append(f"the shared folder {name!r} was changed by a test (it is read by others; write a folder of its own): {', '.join(changed[:8])}")
    return problems
