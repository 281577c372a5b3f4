"""Loaded models: load on first use, keep at most `resident_limit`, unload the idle ones.

Strategy: one entry per model key, each with its own lock that serializes calls into the engine
(engines are not re-entrant). `use(ref)` pins an entry while a request runs, so eviction (least
recently used first, when a new model needs room) and idle unload only ever drop unpinned models.
Two threads asking for the same unloaded model wait on one load.
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
from koe.service.models import ModelRef

log = logging.getLogger(__name__)


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


class ModelCache:
    """Engines by model key, loaded with `load(ref)`; thread-safe."""

    def __init__(
        self,
        load: Callable[[ModelRef], Engine],
        *,
        resident_limit: int = 1,
        idle_unload_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self.resident_limit = max(1, int(resident_limit))
        self.idle_unload_seconds = float(idle_unload_seconds)
        self._clock = clock
        self._entries: dict[str, LoadedModel] = {}
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
            self._make_room(exclude=key)
            started = time.perf_counter()
            engine = self._load(ref)
            now = self._clock()
            entry = LoadedModel(ref, engine, now, now, time.perf_counter() - started, in_use=1)
            with self._guard:
                self._entries[key] = entry
                self._loading.pop(key, None)
            log.info("loaded model %s in %.1f s", ref.name, entry.load_seconds)
            return entry

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
        close = getattr(engine, "close", None)  # every koe engine has one; test doubles may not
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - unloading goes on; the engine is dropped regardless
                log.exception("closing model %s failed", entry.ref.name)
        del engine
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
