"""Loaded models: load on first use, keep at most `resident_limit`, unload the idle ones.

Strategy: one entry per model key, each with its own lock that serializes calls into the engine
(engines are not re-entrant). `use(ref)` pins an entry while a request runs, so eviction (least
recently used first, when a new model needs room) and idle unload only ever drop unpinned models.
Two threads asking for the same unloaded model wait on one load.

A load that fails, for any reason (corrupt weights, a bad config, out of memory), becomes a
`ModelFailed` (503) naming the reason, and is remembered per model (`failure(ref)`, `failures()`):
while the model's files stay as they were, requests fail at once with that error and the load is
tried again only after `retry_failed_after` seconds (a cause that passes, such as memory another
model held, heals without a restart). Replacing a file (a new size or mtime) retries at the next
request; a successful load forgets the failure.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from koe.engines.base import Engine
from koe.service.errors import KoeError, ModelFailed
from koe.service.store.models import ModelRef

log = logging.getLogger(__name__)
RAISED = {"raised": True}  # a log record's `extra`: its error is raised to the caller too, who reports it (the CLI prints it once, as its error)

RETRY_FAILED_AFTER_S = 60.0
_REASON_CHARS = 500
_FAILED_HINT = "check or reinstall its files (`koe doctor`); koe tries again when they change"


@dataclass
class LoadedModel:
    """A resident engine (`koe.engines.base.Engine`). Hold `lock` while calling into `engine`."""

    ref: ModelRef
    engine: Engine
    loaded_at: float
    last_used: float
    load_seconds: float
    in_use: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class LoadFailure:
    """Why a model's last load failed: `reason` (paths relative to its folder), when (`failed_at`,
    wall-clock seconds), how many loads failed in a row, and its files then (`signature`)."""

    ref: ModelRef
    reason: str
    failed_at: float
    attempts: int
    signature: tuple = field(repr=False)
    retry_at: float = field(default=0.0, repr=False)  # on the cache's clock

    @property
    def name(self) -> str:
        return self.ref.name

    def error(self, now: float) -> ModelFailed:
        """The error a request for this model gets now (`retry_after`: seconds until the next try)."""
        return ModelFailed(self.name, self.reason, retry_after=max(0.0, self.retry_at - now), hint=_FAILED_HINT)


def failure_reason(error: BaseException, ref: ModelRef) -> str:
    """One line saying why loading `ref` failed, e.g. "SafetensorError: Error while deserializing
    header: ...", with the model folder's path dropped (files are named relative to it)."""
    if isinstance(error, ModelFailed):
        text = error.reason
    elif isinstance(error, KoeError):
        text = error.message
    elif isinstance(error, OSError) and error.strerror:
        text = f"{error.strerror}: {error.filename}" if error.filename else f"{type(error).__name__}: {error.strerror}"
    else:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    text = " ".join(ref.relative(text).split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


class ModelCache:
    """Engines by model key, loaded with `load(ref)`; thread-safe."""

    def __init__(
        self,
        load: Callable[[ModelRef], Engine],
        *,
        resident_limit: int = 1,
        idle_unload_seconds: float = 0.0,
        retry_failed_after: float = RETRY_FAILED_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self.resident_limit = max(1, int(resident_limit))
        self.idle_unload_seconds = float(idle_unload_seconds)
        self.retry_failed_after = float(retry_failed_after)
        self._clock = clock
        self._entries: dict[str, LoadedModel] = {}
        self._failures: dict[str, LoadFailure] = {}
        self._loading: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._stop = threading.Event()

    @contextmanager
    def use(self, ref: ModelRef) -> Iterator[LoadedModel]:
        """The loaded model for `ref` (loading it if needed), pinned against unloading while inside."""
        entry = self._acquire(ref)
        try:
            yield entry
        finally:
            with self._guard:
                entry.in_use -= 1
                entry.last_used = self._clock()
            self._evict_over_limit()

    def _acquire(self, ref: ModelRef) -> LoadedModel:
        key = ref.key
        self.unload_idle()
        with self._guard:
            entry = self._take(key)
            if entry is not None:
                return entry
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._guard:
                entry = self._take(key)  # loaded by another thread while this one waited
                if entry is not None:
                    return entry
            self._refuse_if_failed(ref)
            self._make_room(exclude=key)
            started = time.perf_counter()
            failed: ModelFailed | None = None
            try:
                engine = self._load(ref)
            except Exception as e:  # noqa: BLE001 - every load failure is reported the same way: ModelFailed
                failed = self._record_failure(ref, e)  # logged with its traceback there
            if failed is not None:  # raised outside the except: the traceback (and the half-built engine) can go
                _release_memory()
                raise failed
            now = self._clock()
            entry = LoadedModel(ref, engine, now, now, time.perf_counter() - started, in_use=1)
            with self._guard:
                self._entries[key] = entry
                self._loading.pop(key, None)
                self._failures.pop(key, None)
            log.info("loaded model %s in %.1f s", ref.name, entry.load_seconds)
            return entry

    # -- failed loads ---------------------------------------------------------------------------
    def _refuse_if_failed(self, ref: ModelRef) -> None:
        """Raise the remembered `ModelFailed` while its files are unchanged and the retry time is not
        reached; return (so the caller loads) otherwise."""
        with self._guard:
            failed = self._failures.get(ref.key)
        if failed is None:
            return
        if self._stale(failed, ref):
            log.info("the files of model %s changed since it failed to load; trying again", ref.name)
            return
        now = self._clock()
        if now < failed.retry_at:
            raise failed.error(now)
        log.info("trying model %s again (%d failed loads so far)", ref.name, failed.attempts)

    def remember_failure(self, ref: ModelRef, error: ModelFailed) -> None:
        """Remember a failure found before loading (e.g. configs that could not be read while the
        request was planned): listed by `failures()` like a failed load, until the files change or
        a load succeeds. A failure already remembered for the same files is left as it is."""
        if self.failure(ref) is None:
            self._record_failure(ref, error, log_it=False)

    def _record_failure(self, ref: ModelRef, error: Exception, *, log_it: bool = True) -> ModelFailed:
        """Remember that loading `ref` failed with `error`; the `ModelFailed` to raise."""
        try:
            signature = ref.files_signature()
        except OSError:
            signature = ()
        now = self._clock()
        with self._guard:
            before = self._failures.get(ref.key)
            failed = LoadFailure(
                ref,
                failure_reason(error, ref),
                time.time(),
                (before.attempts if before else 0) + 1,
                signature,
                now + self.retry_failed_after,
            )
            self._failures[ref.key] = failed
        if log_it:
            log.error("model %s failed to load: %s", ref.name, failed.reason, exc_info=error, extra=RAISED)
        return failed.error(now)

    def failure(self, ref: ModelRef) -> LoadFailure | None:
        """The remembered failure of `ref`, if its files are still those it failed with (None when it
        never failed, loaded since, or its files changed: the next request tries it)."""
        with self._guard:
            failed = self._failures.get(ref.key)
        if failed is None or self._stale(failed, ref):
            return None
        return failed

    def failures(self) -> list[LoadFailure]:
        """Every remembered failure whose model's files are unchanged, by name."""
        with self._guard:
            remembered = list(self._failures.values())
        stale = [f for f in remembered if self._stale(f, f.ref)]
        with self._guard:
            for f in stale:  # files replaced: the next request tries again (under a new key if the weights changed)
                if self._failures.get(f.ref.key) is f:
                    del self._failures[f.ref.key]
        return sorted((f for f in remembered if f not in stale), key=lambda f: f.name)

    @staticmethod
    def _stale(failed: LoadFailure, ref: ModelRef) -> bool:
        try:
            return ref.files_signature() != failed.signature
        except OSError:
            return True

    def _take(self, key: str) -> LoadedModel | None:
        """The loaded entry for `key`, marked in use (caller holds the guard), or None."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.in_use += 1
            entry.last_used = self._clock()
        return entry

    def _make_room(self, exclude: str) -> None:
        """Unload least recently used, unpinned models until one more fits."""
        while True:
            with self._guard:
                if len(self._entries) < self.resident_limit:
                    return
                idle = [e for k, e in self._entries.items() if e.in_use == 0 and k != exclude]
                if not idle:
                    log.warning("all %d resident models are busy; loading one more over the limit", len(self._entries))
                    return
                victim = min(idle, key=lambda e: e.last_used)
                del self._entries[victim.ref.key]
            self._free(victim)

    def _evict_over_limit(self) -> None:
        with self._guard:
            over = len(self._entries) - self.resident_limit
            idle = sorted((e for e in self._entries.values() if e.in_use == 0), key=lambda e: e.last_used)[: max(0, over)]
            for e in idle:
                del self._entries[e.ref.key]
        for e in idle:
            self._free(e)

    def unload_idle(self, now: float | None = None) -> list[str]:
        """Unload models unused for `idle_unload_seconds` (0 = never); returns their names."""
        if self.idle_unload_seconds <= 0:
            return []
        now = self._clock() if now is None else now
        with self._guard:
            stale = [e for e in self._entries.values() if e.in_use == 0 and now - e.last_used >= self.idle_unload_seconds]
            for e in stale:
                del self._entries[e.ref.key]
        for e in stale:
            self._free(e)
        return [e.ref.name for e in stale]

    def unload(self, ref: ModelRef) -> bool:
        """Unload `ref` now if it is loaded and not in use; True if it was unloaded."""
        with self._guard:
            e = self._entries.get(ref.key)
            if e is None or e.in_use:
                return False
            del self._entries[ref.key]
        self._free(e)
        return True

    def loaded(self) -> list[LoadedModel]:
        """The resident models, most recently used first."""
        with self._guard:
            return sorted(self._entries.values(), key=lambda e: -e.last_used)

    def clear(self) -> None:
        """Unload every model not in use and stop the reaper."""
        self._stop.set()
        with self._guard:
            gone = [e for e in self._entries.values() if e.in_use == 0]
            for e in gone:
                del self._entries[e.ref.key]
        for e in gone:
            self._free(e)

    def start_reaper(self, interval: float = 30.0) -> None:
        """Run `unload_idle` every `interval` seconds on a daemon thread (for long-running servers)."""
        if self._reaper is not None or self.idle_unload_seconds <= 0:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                self.unload_idle()

        self._reaper = threading.Thread(target=loop, name="koe-model-reaper", daemon=True)
        self._reaper.start()

    def _free(self, entry: LoadedModel) -> None:
        """Close the engine (it frees its weights, caches, graphs and device memory) and drop it."""
        log.info("unloading model %s", entry.ref.name)
        with entry.lock:
            engine, entry.engine = entry.engine, None
        try:
            engine.close()
        except Exception as e:  # noqa: BLE001 - unloading goes on; the engine is dropped regardless
            log.error("closing model %s failed (%s: %s)", entry.ref.name, type(e).__name__, e, exc_info=e)
        del engine
        _release_memory()


def _release_memory() -> None:
    """Collect what a dropped (or half-built) engine held and give cached device memory back."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
