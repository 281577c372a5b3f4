"""koe.db (SQLite WAL, thread-safe) and atomic writes (a crash never leaves half a file or folder)."""

import os
import threading

import pytest

from koe.service.fsio import atomic_folder, atomic_write_bytes, atomic_writer, remove_tree, sweep_leftovers
from koe.service.storage import Database, VoiceRow


def test_database_is_wal_and_indexes_voices(tmp_path):
    db = Database(tmp_path / "koe.db")
    assert db.journal_mode == "wal"
    db.put_voice(VoiceRow("Alice", 1.0, "clip", "hi", None, None, 3.0, 24000))
    assert db.get_voice("alice").name == "Alice"  # names are case-insensitive
    assert [v.name for v in db.list_voices()] == ["Alice"]
    assert db.delete_voice("ALICE") and db.get_voice("Alice") is None


def test_outputs_history_from_many_threads(tmp_path):
    db = Database(tmp_path / "koe.db")
    errors = []

    def work(i: int) -> None:
        try:
            for j in range(10):
                db.add_output(text=f"{i}-{j}", model="m", voice=None, format="wav", duration_s=1.0, path=None, metadata={"i": i})
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = db.list_outputs(limit=1000)
    assert len(rows) == 80 and len({r.id for r in rows}) == 80
    assert Database(tmp_path / "koe.db").list_outputs(limit=1)[0].id == rows[0].id  # a second opener sees it


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    path = tmp_path / "out.bin"
    atomic_write_bytes(path, b"old")
    with pytest.raises(RuntimeError):
        with atomic_writer(path) as f:
            f.write(b"half a new fi")
            raise RuntimeError("crash mid-write")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no temp file left
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new"


def test_atomic_folder_appears_complete_or_not_at_all(tmp_path):
    final = tmp_path / "voice"
    with pytest.raises(RuntimeError):
        with atomic_folder(final) as tmp:
            (tmp / "a.txt").write_text("a")
            assert not final.exists()
            raise RuntimeError("crash while writing the folder")
    assert not final.exists() and list(tmp_path.iterdir()) == []
    with atomic_folder(final) as tmp:
        (tmp / "a.txt").write_text("a")
    assert (final / "a.txt").read_text() == "a"
    with pytest.raises(FileExistsError):
        with atomic_folder(final) as tmp:
            (tmp / "b.txt").write_text("b")
    with atomic_folder(final, replace=True) as tmp:
        (tmp / "b.txt").write_text("b")
    assert sorted(p.name for p in final.iterdir()) == ["b.txt"]


def test_remove_tree_and_sweep(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    remove_tree(link)
    assert not link.exists() and (target / "keep").exists()  # a link's target is left alone
    remove_tree(target)
    assert not target.exists()
    stale = tmp_path / ".voice.123.tmp"
    stale.mkdir()
    fresh = tmp_path / ".other.456.tmp"
    fresh.mkdir()
    os.utime(stale, (0, 0))
    sweep_leftovers(tmp_path)
    assert not stale.exists() and fresh.exists()  # only old leftovers go; a write in progress stays
