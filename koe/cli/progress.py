"""Byte progress bars on stderr (done / total, speed, time left) for pulls and imports.

Shown on a terminal, or when asked (`--progress`); in a pipe or a log the commands stay quiet and
print one summary line at the end instead. `ByteProgress` is the `on_progress(done, total)` a pull
reports to (from its download threads: rich's Progress is thread-safe); `watch_copy` shows a folder
copy's bytes by watching the hidden temp folder it is written into.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from koe.cli.common import err
from koe.service.store.hub import byte_size


def wanted(asked: bool | None) -> bool:
    """Whether to draw bars: as asked, else when stderr is a terminal."""
    return err.is_terminal if asked is None else asked


class ByteProgress:
    """One bar for a byte count; call it with (done, total). Bytes there at the first call (a resumed
    download's) start the bar without counting towards its speed. Keeps `first`, `last` and the times
    for `summary()` whether drawn or not."""

    def __init__(self, description: str, show: bool) -> None:
        self.description = description
        self.show = show
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self.first: int | None = None
        self.last = self.total = 0
        self.started = self.ended = 0.0
        self._lock = threading.Lock()

    def __enter__(self) -> ByteProgress:
        if self.show:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(binary_units=False),
                TransferSpeedColumn(),
                TimeRemainingColumn(compact=True, elapsed_when_finished=True),
                console=err,
                transient=False,
            )
            self._progress.start()
        return self

    def __call__(self, done: int, total: int) -> None:
        with self._lock:
            now = time.monotonic()
            if self.first is None:
                self.first, self.started = done, now
            self.last, self.total, self.ended = done, total, now
            if self._progress is None:
                return
            if self._task is None:
                self._task = self._progress.add_task(self.description, total=total or None, completed=done)
            else:
                self._progress.update(self._task, completed=done, total=total or None)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    @property
    def fetched(self) -> int:
        """Bytes that moved during this run (not those already there)."""
        return self.last - (self.first or 0)

    def summary(self) -> str:
        took = max(self.ended - self.started, 1e-6)
        kept = f"; {byte_size(self.first)} already here" if self.first else ""
        return f"{byte_size(self.fetched)} in {took:.1f} s, {byte_size(self.fetched / took)}/s{kept}"


def tree_bytes(folder: Path) -> int:
    """The bytes of the files under `folder` (symlinks followed, as a copy reads them)."""
    total = 0
    for root, _dirs, files in os.walk(folder, followlinks=True):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


class watch_copy:
    """While a folder is copied into a hidden temp folder under `parent`, a bar of the bytes there
    (of `total`). Draws nothing unless `show`; polls a few times a second from a thread."""

    def __init__(self, parent: Path, total: int, description: str, show: bool, every_s: float = 0.2) -> None:
        self.parent, self.total, self.every_s = Path(parent), total, every_s
        self.bar = ByteProgress(description, show)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._before: set[str] = set()

    def __enter__(self) -> watch_copy:
        if self.bar.show:
            self._before = set(os.listdir(self.parent)) if self.parent.is_dir() else set()
            self.bar.__enter__()
            self.bar(0, self.total)
            self._thread = threading.Thread(target=self._poll, name="koe-copy-progress", daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                new = [self.parent / n for n in os.listdir(self.parent) if n.startswith(".") and n.endswith(".tmp") and n not in self._before]
            except OSError:
                continue
            self.bar(min(sum(tree_bytes(p) for p in new if p.is_dir()), self.total), self.total)

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            if exc_type is None:
                self.bar(self.total, self.total)
            self.bar.__exit__(exc_type, *exc)


class FirstUseProgress:
    """`on_progress(done, total)` for a download nobody announced (a hub id's first use in `koe speak`,
    `koe.load` through the CLI, `koe serve`'s default): the bar starts at the first report, stops
    when the bytes are all there, and prints the summary line when not drawn."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self._bar: ByteProgress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = ByteProgress("downloading", self.show).__enter__()
        self._bar(done, total)
        if total and done >= total:
            bar, self._bar = self._bar, None
            bar.__exit__(None, None, None)
            err.print(f"[dim]  downloaded {bar.summary()}[/]")
