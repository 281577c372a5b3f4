"""koe.db: SQLite (WAL) index of voices, installed models and the history of outputs.

Folders under KOE_HOME hold the files; the database is the index and the history. One connection
per thread, WAL journal and a busy timeout make it safe for a threaded server and for several
processes (a server and a CLI) at once.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koe.service.errors import StorageError

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS voices (
    name TEXT PRIMARY KEY COLLATE NOCASE,
    created_at REAL NOT NULL,
    source TEXT NOT NULL,
    ref_text TEXT,
    description TEXT,
    language TEXT,
    duration_s REAL NOT NULL,
    sample_rate INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY COLLATE NOCASE,
    added_at REAL NOT NULL,
    origin TEXT NOT NULL,          -- the folder it was imported from, or hub:<repo id>@<revision>
    linked INTEGER NOT NULL,       -- 1 when the store holds a symlink to `origin`
    family TEXT NOT NULL,
    variant TEXT NOT NULL,
    size TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outputs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    text TEXT NOT NULL,
    model TEXT NOT NULL,
    voice TEXT,
    format TEXT NOT NULL,
    duration_s REAL NOT NULL,
    path TEXT,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outputs_created ON outputs(created_at);
"""


@dataclass(frozen=True)
class VoiceRow:
    name: str
    created_at: float
    source: str
    ref_text: str | None
    description: str | None
    language: str | None
    duration_s: float
    sample_rate: int


@dataclass(frozen=True)
class ModelRow:
    name: str
    added_at: float
    origin: str
    linked: bool
    family: str
    variant: str
    size: str


@dataclass(frozen=True)
class OutputRow:
    id: int
    created_at: float
    text: str
    model: str
    voice: str | None
    format: str
    duration_s: float
    path: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


class Database:
    """Thread-safe access to koe.db. Each thread gets its own connection; writes are transactions."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._init_lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._init_lock:
                conn = self._connection()
                conn.executescript(_SCHEMA)  # idempotent; executescript manages its own transaction
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as e:
            raise StorageError(f"cannot open the database {self.path}: {e}") from e
        except OSError as e:
            raise StorageError(f"cannot create {self.path.parent}: {e.strerror}") from e

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=True)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE ... COMMIT, rolled back on error)."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @property
    def journal_mode(self) -> str:
        return str(self._connection().execute("PRAGMA journal_mode").fetchone()[0])

    # -- voices ---------------------------------------------------------------------------------
    def put_voice(self, row: VoiceRow) -> None:
        """Insert or replace a voice's index row."""
        with self.transaction() as db:
            db.execute("DELETE FROM voices WHERE name = ?", (row.name,))
            db.execute(
                "INSERT INTO voices VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (row.name, row.created_at, row.source, row.ref_text, row.description, row.language, row.duration_s, row.sample_rate),
            )

    def get_voice(self, name: str) -> VoiceRow | None:
        r = self._connection().execute("SELECT * FROM voices WHERE name = ?", (name,)).fetchone()
        return VoiceRow(**dict(r)) if r else None

    def list_voices(self) -> list[VoiceRow]:
        rows = self._connection().execute("SELECT * FROM voices ORDER BY name COLLATE NOCASE").fetchall()
        return [VoiceRow(**dict(r)) for r in rows]

    def delete_voice(self, name: str) -> bool:
        with self.transaction() as db:
            return db.execute("DELETE FROM voices WHERE name = ?", (name,)).rowcount > 0

    # -- models ---------------------------------------------------------------------------------
    def put_model(self, row: ModelRow) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM models WHERE name = ?", (row.name,))
            db.execute(
                "INSERT INTO models VALUES (?, ?, ?, ?, ?, ?, ?)",
                (row.name, row.added_at, row.origin, int(row.linked), row.family, row.variant, row.size),
            )

    def get_model(self, name: str) -> ModelRow | None:
        r = self._connection().execute("SELECT * FROM models WHERE name = ?", (name,)).fetchone()
        return _model_row(r) if r else None

    def list_models(self) -> list[ModelRow]:
        rows = self._connection().execute("SELECT * FROM models ORDER BY name COLLATE NOCASE").fetchall()
        return [_model_row(r) for r in rows]

    def delete_model(self, name: str) -> bool:
        with self.transaction() as db:
            return db.execute("DELETE FROM models WHERE name = ?", (name,)).rowcount > 0

    # -- outputs history ------------------------------------------------------------------------
    def add_output(self, *, text: str, model: str, voice: str | None, format: str, duration_s: float, path: str | None, metadata: dict[str, Any]) -> int:
        """Record one synthesized output; returns its id."""
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO outputs (created_at, text, model, voice, format, duration_s, path, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (time.time(), text, model, voice, format, float(duration_s), path, json.dumps(metadata, default=str)),
            )
            return int(cur.lastrowid)

    def set_output_path(self, output_id: int, path: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE outputs SET path = ? WHERE id = ?", (path, output_id))

    def list_outputs(self, limit: int = 50, on_damaged: Callable[[StorageError], None] | None = None) -> list[OutputRow]:
        """The most recent outputs first. A damaged row raises its `StorageError`; with `on_damaged`, it is given
        there and skipped."""
        rows = self._connection().execute("SELECT * FROM outputs ORDER BY id DESC LIMIT ?", (int(limit),)).fetchall()
        good = []
        for r in rows:
            try:
                good.append(_output_row(r))
            except StorageError as e:
                if on_damaged is None:
                    raise
                on_damaged(e)
        return good

    def get_output(self, output_id: int) -> OutputRow | None:
        """Output `output_id` (None when there is none); a damaged row raises `StorageError`."""
        r = self._connection().execute("SELECT * FROM outputs WHERE id = ?", (int(output_id),)).fetchone()
        return _output_row(r) if r else None

    def has_output(self, output_id: int) -> bool:
        """Whether row `output_id` is there (damaged or not)."""
        return self._connection().execute("SELECT 1 FROM outputs WHERE id = ?", (int(output_id),)).fetchone() is not None

    def count_outputs(self) -> int:
        return int(self._connection().execute("SELECT COUNT(*) FROM outputs").fetchone()[0])

    def delete_outputs(self, ids: list[int] | None = None) -> list[OutputRow]:
        """Remove the history rows `ids` (None: every row) in one transaction; returns the rows removed."""
        with self.transaction() as db:
            if ids is None:
                rows = db.execute("SELECT * FROM outputs ORDER BY id").fetchall()
                db.execute("DELETE FROM outputs")
            else:
                marks = ", ".join("?" * len(ids))
                rows = db.execute(f"SELECT * FROM outputs WHERE id IN ({marks}) ORDER BY id", [int(i) for i in ids]).fetchall() if ids else []
                if rows:
                    db.execute(f"DELETE FROM outputs WHERE id IN ({marks})", [int(i) for i in ids])
        return [_output_row(r, damaged_ok=True) for r in rows]


def _output_row(r: sqlite3.Row, damaged_ok: bool = False) -> OutputRow:
    """A history row as koe wrote it, else `StorageError` naming what is damaged (with `damaged_ok`: its id and path only)."""
    d = dict(r)
    try:
        d["metadata"] = json.loads(d["metadata"])
        why = "" if isinstance(d["metadata"], dict) else "its metadata is no JSON object"
    except (TypeError, ValueError):
        why = "its metadata is not JSON"
    numbers, texts = ("created_at", "duration_s"), ("text", "model", "format")
    bad = [k for k in numbers if not isinstance(d[k], int | float)] + [k for k in texts if not isinstance(d[k], str)]
    bad += [k for k in ("voice", "path") if d[k] is not None and not isinstance(d[k], str)]
    why = why or (f"its {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not what koe writes" if bad else "")
    if not why:
        return OutputRow(**d)
    if damaged_ok:
        path = d["path"] if isinstance(d["path"], str) else None
        return OutputRow(d["id"], 0.0, "", "", None, "", 0.0, path)
    raise StorageError(f"output {d['id']} in koe.db is damaged: {why}", hint=f"koe history delete {d['id']} removes it")


def _model_row(r: sqlite3.Row) -> ModelRow:
    d = dict(r)
    d["linked"] = bool(d["linked"])
    return ModelRow(**d)
