"""The voice library under attack and faults (issue 13 items 4, 7, 10, 11): crafted archives are refused
before anything is written, bad folders and rows on disk are skipped with a warning, an overwrite is
atomic for readers in any thread or process, texts have length limits, and crash leftovers are swept
at start without touching another process's write in progress."""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import stat
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from koe.service import KoeHome, load_settings
from koe.service.errors import InvalidRequest, NotFound
from koe.service.fsio import atomic_folder, sweep_leftovers
from koe.service.storage import Database
from koe.service.voices.library import VoiceLibrary

SR = 16000
KOE = Path(sys.executable).with_name("koe")


def tone(seconds: float = 1.2, pitch: float = 150.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * pitch * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)


def wav(seconds: float = 1.2, pitch: float = 150.0) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, tone(seconds, pitch), SR, format="WAV", subtype="PCM_16")
    return buf.getvalue()


WAV = wav()
GOOD_META = {
    "format": 1,
    "name": "alice",
    "source": "clip",
    "created_at": 1.7e9,
    "ref_text": "Hello.",
    "description": "warm",
    "language": "english",
    "duration_s": 1.2,
    "sample_rate": SR,
}


@pytest.fixture
def library(tmp_path):
    return VoiceLibrary(tmp_path / "voices", Database(tmp_path / "koe.db"), max_reference_seconds=10)


def nothing_written(lib: VoiceLibrary) -> None:
    """No voice folder, no temp folder, no db row."""
    assert list(lib.root.iterdir()) == [] and lib.db.list_voices() == []


# -- crafted archives -------------------------------------------------------------------------------
def make_zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def make_tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def voice_archive(kind: str, meta: object = None, *, manifest: bytes | None = None, transcript: bytes | None = None) -> bytes:
    members = {"alice/reference.wav": WAV}
    if manifest is not None or meta is not None:
        members["alice/voice.json"] = manifest if manifest is not None else json.dumps(meta).encode()
    if transcript is not None:
        members["alice/transcript.txt"] = transcript
    return (make_zip if kind == "zip" else make_tar)(members)


BAD_FIELDS = [
    ("description", {"a": 1}),
    ("description", ["a"]),
    ("description", 5),
    ("description", "x" * 1001),
    ("ref_text", {"a": 1}),
    ("ref_text", "x" * 2001),
    ("ref_text", "a\u0000b"),
    ("ref_text", "a\ud800b"),
    ("language", 7),
    ("language", "x" * 65),
    ("language", "en\nglish"),
    ("name", 123),
    ("name", "../evil"),
    ("name", "x" * 65),
    ("name", {"n": "alice"}),
    ("source", "evil"),
    ("source", 1),
    ("created_at", "yesterday"),
    ("created_at", -1),
    ("created_at", True),
    ("created_at", 1e300),
    ("duration_s", "2"),
    ("duration_s", [1]),
    ("duration_s", 0),
    ("sample_rate", 16000.5),
    ("sample_rate", "16000"),
    ("sample_rate", 10**30),
    ("sample_rate", 1),
    ("sample_rate", False),
    ("format", 2),
    ("format", "1"),
    ("format", 0),
    ("koe_version", {"v": 1}),
    ("koe_version", "x" * 200),
]


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize(("field", "value"), BAD_FIELDS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_FIELDS)])
def test_a_wrong_field_in_voice_json_is_refused_and_nothing_is_written(library, kind, field, value):
    archive = voice_archive(kind, {**GOOD_META, field: value})
    with pytest.raises(InvalidRequest, match=field if field not in ("name",) else "name") as e:
        library.import_archive(archive)
    assert "Traceback" not in str(e.value) and len(str(e.value)) < 400  # short, never the huge value itself
    nothing_written(library)


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        (b"[1, 2]", "JSON object"),
        (b"not json", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"NaN", "JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON|over"),
        (b'{"description": "' + b"x" * 300_000 + b'"}', "over|too large"),
        (b'{"created_at": NaN}', "created_at"),
        (b'{"duration_s": Infinity}', "duration_s"),
        (b'{"sample_rate": ' + b"9" * 5000 + b"}", "valid JSON"),
    ],
    ids=["list", "garbage", "not-utf8", "nan", "deep", "huge", "nan-field", "inf-field", "huge-int"],
)
def test_a_malformed_voice_json_is_refused(library, kind, manifest, match):
    with pytest.raises(InvalidRequest, match=match):
        library.import_archive(voice_archive(kind, manifest=manifest))
    nothing_written(library)


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_a_transcript_that_is_not_utf8_or_too_long_is_refused(library, kind):
    with pytest.raises(InvalidRequest, match="not UTF-8") as e:
        library.import_archive(voice_archive(kind, GOOD_META, transcript=b"caf\xe9 \xff"))
    assert e.value.param == "ref_text"
    with pytest.raises(InvalidRequest, match="2001 characters") as e:
        library.import_archive(voice_archive(kind, GOOD_META, transcript=b"y" * 2001))
    assert e.value.param == "ref_text"
    nothing_written(library)
    assert library.import_archive(voice_archive(kind, GOOD_META, transcript=b"\xef\xbb\xbfBonjour.\n")).ref_text == "Bonjour."


def test_symlink_members_are_refused(library):
    info = zipfile.ZipInfo("alice/reference.wav")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(InvalidRequest, match="link"):
        library.import_archive(buf.getvalue(), "evil")
    tbuf = io.BytesIO()
    with tarfile.open(fileobj=tbuf, mode="w") as tf:
        link = tarfile.TarInfo("alice/voice.json")
        link.type = tarfile.SYMTYPE
        link.linkname = "../../koe.toml"
        tf.addfile(link)
        ref = tarfile.TarInfo("alice/reference.wav")
        ref.size = len(WAV)
        tf.addfile(ref, io.BytesIO(WAV))
    with pytest.raises(InvalidRequest, match="link"):
        library.import_archive(tbuf.getvalue(), "evil")
    nothing_written(library)


def _patch_zip_sizes(data: bytes, size: int) -> bytes:
    """Make every member claim `size` uncompressed bytes (local headers and central directory)."""
    b = bytearray(data)
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        i = b.find(sig)
        while i != -1:
            b[i + off : i + off + 4] = size.to_bytes(4, "little")
            i = b.find(sig, i + 4)
    return bytes(b)


def test_zip_bombs_are_refused_with_bounded_memory(library):
    bomb = make_zip({"alice/reference.wav": b"\0" * (32 << 20)})  # 32 MiB of zeros, ~32 KiB compressed
    with pytest.raises(InvalidRequest, match="damaged"):  # claims 4 KiB: only that much is inflated, then the CRC fails
        library.import_archive(_patch_zip_sizes(bomb, 4096), "bomb")
    with pytest.raises(InvalidRequest, match="too large"):  # claims 4 GiB: refused before inflating anything
        library.import_archive(_patch_zip_sizes(bomb, 0xFFFFFFF0), "bomb")
    nothing_written(library)


def test_tar_bombs_duplicates_and_member_floods_are_refused(library):
    huge = tarfile.TarInfo("alice/reference.wav")
    huge.size = 10**12  # the header claims a terabyte; no data follows
    with pytest.raises(InvalidRequest, match="too large"):
        library.import_archive(huge.tobuf(format=tarfile.PAX_FORMAT), "bomb")
    skipped = tarfile.TarInfo("alice/padding.bin")
    skipped.size = 10**12  # an unwanted member is not read, but still counts
    with pytest.raises(InvalidRequest, match="too large"):
        library.import_archive(skipped.tobuf(format=tarfile.PAX_FORMAT), "bomb")
    with pytest.raises(InvalidRequest, match="too many|too large"):
        library.import_archive(make_tar({f"alice/x{i}.txt": b"x" for i in range(100)} | {"alice/reference.wav": WAV}), "flood")
    with pytest.raises(InvalidRequest, match="more than one"):
        library.import_archive(make_zip({"a/reference.wav": WAV, "b/reference.wav": WAV}), "dup")
    nothing_written(library)


# -- limits -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"ref_text": "x" * 2001}, "ref_text"),
        ({"description": "x" * 1001}, "description"),
        ({"language": "x" * 65}, "language"),
        ({"description": {"a": 1}}, "description"),
        ({"ref_text": 5}, "ref_text"),
        ({"ref_text": "a\ud800"}, "ref_text"),
        ({"description": "a\x00b"}, "description"),
        ({"source": "other"}, "source"),
    ],
)
def test_add_refuses_bad_texts_naming_the_param(library, kwargs, param):
    with pytest.raises(InvalidRequest) as e:
        library.add("alice", WAV, **kwargs)
    assert e.value.param == param
    nothing_written(library)


def test_the_limits_come_from_the_settings(tmp_path):
    settings = load_settings(tmp_path / "home", flags={"server": {"max_transcript_chars": 10, "max_description_chars": 5}}, environ={})
    home = KoeHome(settings)
    with pytest.raises(InvalidRequest, match="at most 10") as e:
        home.voices.add("alice", WAV, "eleven char")
    assert e.value.param == "ref_text"
    with pytest.raises(InvalidRequest, match="at most 5"):
        home.voices.add("alice", WAV, "ok", description="sixsix")
    assert home.voices.add("alice", WAV, "   ten chars!   ", description="five").ref_text == "ten chars!"  # counted stripped


def test_the_server_names_the_field_over_its_limit(tmp_path):
    home = KoeHome(load_settings(tmp_path / "home", environ={}))
    with TestClient(create_app_for(home)) as client:
        files = {"file": ("a.wav", WAV, "audio/wav")}
        r = client.post("/v1/audio/voices", data={"name": "alice", "transcript": "x" * 2001}, files=files)
        assert r.status_code == 400 and r.json()["error"]["param"] == "transcript", r.text
        r = client.post("/v1/audio/voices", data={"name": "alice", "ref_text": "x" * 2001}, files=files)
        assert r.status_code == 400 and r.json()["error"]["param"] == "ref_text", r.text
        r = client.post("/v1/audio/voices", data={"name": "alice", "description": "x" * 1001}, files=files)
        assert r.status_code == 400 and r.json()["error"]["param"] == "description", r.text
        assert client.get("/v1/audio/voices").json()["data"] == []


def create_app_for(home: KoeHome):
    from koe.server import create_app

    return create_app(home)


# -- bad folders and rows on disk -------------------------------------------------------------------
def put_folder(root: Path, name: str, meta: object | None = GOOD_META, *, reference: bytes | None = WAV, raw: bytes | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    if raw is not None:
        (folder / "voice.json").write_bytes(raw)
    elif meta is not None:
        (folder / "voice.json").write_text(json.dumps(meta))
    if reference is not None:
        (folder / "reference.wav").write_bytes(reference)
    return folder


def bad_folders(root: Path) -> list[str]:
    """A good voice `good` and a zoo of bad folders; their names."""
    put_folder(root, "good", {**GOOD_META, "name": "good"})
    put_folder(root, "brick", {**GOOD_META, "description": {"a": 1}})  # the folder that bricked the install
    put_folder(root, "badjson", raw=b"{not json")
    put_folder(root, "types", {**GOOD_META, "sample_rate": "fast", "duration_s": None})
    put_folder(root, "noref", GOOD_META, reference=None)
    put_folder(root, "nojson", None)
    put_folder(root, "bad name", GOOD_META)
    put_folder(root, "con", GOOD_META)
    put_folder(root, "huge", {**GOOD_META, "ref_text": "x" * 100_000})
    put_folder(root, "emptyref", GOOD_META, reference=b"")
    fifo = put_folder(root, "fifo", GOOD_META, reference=None)
    os.mkfifo(fifo / "reference.wav")  # reading it would block forever
    put_folder(root, "devzero", GOOD_META, reference=None)
    (root / "devzero" / "reference.wav").symlink_to("/dev/zero")
    (put_folder(root, "jsondir", None) / "voice.json").mkdir()
    (root / "stray-file.txt").write_text("not a voice")
    return ["brick", "badjson", "types", "noref", "nojson", "bad name", "con", "huge", "emptyref", "fifo", "devzero", "jsondir"]


def test_bad_folders_are_skipped_with_a_warning(tmp_path, caplog):
    root = tmp_path / "voices"
    bad = bad_folders(root)
    with caplog.at_level(logging.WARNING, logger="koe.service.voices.library"):
        lib = VoiceLibrary(root, Database(tmp_path / "koe.db"))
    assert [v.name for v in lib.list()] == ["good"] and lib.get("good").ref_text == "Hello."
    warned = caplog.text
    for name in bad:
        assert f"{name}" in warned, name
    assert "stray-file" not in warned
    for name in ("brick", "types", "noref"):
        with pytest.raises(NotFound):
            lib.get(name)
    lib.remove("brick")  # a damaged voice can still be removed
    assert not (root / "brick").exists()
    lib.add("brick", WAV, "fixed", overwrite=True)
    assert lib.get("brick").ref_text == "fixed"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_folder_is_skipped(tmp_path, caplog):
    root = tmp_path / "voices"
    put_folder(root, "locked")
    (root / "locked" / "voice.json").chmod(0)
    with caplog.at_level(logging.WARNING):
        lib = VoiceLibrary(root, Database(tmp_path / "koe.db"))
    assert lib.list() == [] and "locked" in caplog.text


def test_damaged_db_rows_never_break_a_listing(tmp_path, caplog):
    root = tmp_path / "voices"
    lib = VoiceLibrary(root, Database(tmp_path / "koe.db"))
    lib.add("alice", WAV, "Hi.")
    lib.add("bob", WAV)
    with sqlite3.connect(tmp_path / "koe.db") as conn:
        conn.execute("UPDATE voices SET sample_rate = 'abc', ref_text = ? WHERE name = 'alice'", ("x" * 5000,))
        conn.execute("INSERT INTO voices VALUES ('../../etc', 1.0, 'clip', NULL, NULL, NULL, 2.0, 16000)")
        conn.execute("INSERT INTO voices VALUES ('ghost', 'when?', 'clip', NULL, NULL, NULL, 2.0, 16000)")
    with caplog.at_level(logging.WARNING):
        listed = {v.name: v for v in lib.list()}
    assert sorted(listed) == ["alice", "bob"] and listed["alice"].ref_text == "Hi."  # read from alice's voice.json
    assert "damaged" in caplog.text
    again = VoiceLibrary(root, Database(tmp_path / "koe.db"))  # the next start repairs the index from the folders
    assert [r.name for r in again.db.list_voices()] == ["alice", "bob"] and again.db.get_voice("alice").sample_rate == 16000


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")} | {"KOE_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([str(KOE), *args], env=env, capture_output=True, text=True, timeout=120)


def test_the_real_cli_lists_past_bad_folders_and_refuses_a_crafted_archive(tmp_path):
    home = tmp_path / "home"
    bad_folders(home / "voices")
    r = run_cli(home, "voices", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert [v["name"] for v in json.loads(r.stdout)] == ["good"]
    assert "skipped" in r.stderr and "Traceback" not in r.stderr
    evil = tmp_path / "evil.zip"
    evil.write_bytes(voice_archive("zip", {**GOOD_META, "name": "evil", "description": {"a": 1}}))
    r = run_cli(home, "voices", "import", str(evil))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("error:")] == ["error: voice.json: 'description' must be text, not an object"]
    assert not (home / "voices" / "evil").exists() and not [p for p in (home / "voices").iterdir() if p.name.startswith(".")]


def test_the_server_lists_past_bad_folders(tmp_path):
    home_dir = tmp_path / "home"
    bad_folders(home_dir / "voices")
    home = KoeHome(load_settings(home_dir, environ={}))
    with TestClient(create_app_for(home)) as client:
        r = client.get("/v1/audio/voices")
        assert r.status_code == 200 and [v["name"] for v in r.json()["data"]] == ["good"]
        assert client.get("/v1/audio/voices/brick").status_code == 404
        assert client.get("/v1/audio/voices/good").json()["transcript"] == "Hello."


# -- atomic overwrite -------------------------------------------------------------------------------
def _hammer(lib: VoiceLibrary, versions: dict[str, np.ndarray], stop: threading.Event, min_reads: int, readers: int = 4):
    """`readers` threads get voice "v" and read its reference until `stop` is set and `min_reads` are done."""
    counts = {"reads": 0, "not_found": 0, "torn": 0, "other": 0}
    guard = threading.Lock()

    def read() -> None:
        while not (stop.is_set() and counts["reads"] >= min_reads):
            try:
                v = lib.get("v")
                samples = sf.read(io.BytesIO(v.reference_path.read_bytes()), dtype="float32")[0]
                ok = v.ref_text in versions and any(np.array_equal(samples, x) for x in versions.values())
                key = "reads" if ok else "torn"
            except NotFound:
                key = "not_found"
            except Exception:  # noqa: BLE001 - counted and asserted
                key = "other"
            with guard:
                counts[key] += 1
            time.sleep(0.0005)  # let the writer run: the GIL would otherwise go to the readers

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in threads:
        t.start()
    return counts, threads


def _versions(lib: VoiceLibrary) -> dict[str, np.ndarray]:
    """Add voice "v" as "one" and "two" in turn; {ref_text: its reference's samples} (a float WAV's bytes carry
    a timestamp, so versions are told by their samples)."""
    out = {}
    for text, pitch in (("one", 150.0), ("two", 230.0)):
        out[text] = sf.read(lib.add("v", wav(1.2, pitch), text, overwrite=True).reference_path, dtype="float32")[0]
    assert not np.array_equal(out["one"], out["two"])
    return out


def test_overwrites_are_atomic_for_readers_in_threads(library):
    versions = _versions(library)
    clips = {text: wav(1.2, p) for text, p in (("one", 150.0), ("two", 230.0))}
    stop = threading.Event()
    counts, threads = _hammer(library, versions, stop, min_reads=800)
    for i in range(30):
        text = ("one", "two")[i % 2]
        library.add("v", clips[text], text, overwrite=True)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert counts["reads"] >= 800 and counts["not_found"] == counts["torn"] == counts["other"] == 0, counts
    assert [p.name for p in library.root.iterdir()] == ["v"]  # every old folder was removed


def test_overwrites_without_atomic_exchange_still_never_404(library, monkeypatch):
    monkeypatch.setattr("koe.service.fsio.exchange", lambda a, b: False)  # e.g. a file system without RENAME_EXCHANGE
    versions = _versions(library)
    stop = threading.Event()
    counts, threads = _hammer(library, versions, stop, min_reads=200)
    for i in range(10):
        text = ("one", "two")[i % 2]
        library.add("v", wav(1.2, 150.0 if text == "one" else 230.0), text, overwrite=True)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert counts["not_found"] == 0 and counts["torn"] == 0, counts  # `get` waits out the two renames


WRITER = """
import sys, io, numpy as np, soundfile as sf
from koe.service.storage import Database
from koe.service.voices.library import VoiceLibrary
root, db, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
lib = VoiceLibrary(root, Database(db))
clips = {}
for text, pitch in (("one", 150.0), ("two", 230.0)):
    t = np.arange(int(1.2 * 16000)) / 16000
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * pitch * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32), 16000, format="WAV", subtype="PCM_16")
    clips[text] = buf.getvalue()
for i in range(n):
    text = ("one", "two")[i % 2]
    lib.add("v", clips[text], text, overwrite=True)
"""


def test_overwrites_are_atomic_for_readers_in_another_process(library, tmp_path):
    versions = _versions(library)
    stop = threading.Event()
    counts, threads = _hammer(library, versions, stop, min_reads=800)
    writer = subprocess.run([sys.executable, "-c", WRITER, str(library.root), str(library.db.path), "20"], capture_output=True, text=True, timeout=120)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert writer.returncode == 0, writer.stderr
    assert counts["reads"] >= 800 and counts["not_found"] == counts["torn"] == counts["other"] == 0, counts


# -- sweeping crash leftovers -----------------------------------------------------------------------
def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_leftovers_of_dead_writers_go_at_any_age_and_live_ones_stay(tmp_path):
    root = tmp_path / "voices"
    root.mkdir()
    dead = dead_pid()
    gone = [root / f".alice.{dead}.k3j4h5l6.tmp", root / f".bob.{dead}.abcd1234.deleted", root / f".x.{os.getpid()}.ab12.deleted"]
    for p in gone:
        p.mkdir()
        (p / "reference.wav").write_bytes(b"half")
    (root / f".clip.wav.{dead}.zz99aa00.tmp").write_bytes(b"half a file")
    gone.append(root / f".clip.wav.{dead}.zz99aa00.tmp")
    mine = root / f".carol.{os.getpid()}.qwerty12.tmp"  # this process is alive: a write in progress
    mine.mkdir()
    put_folder(root, "good", {**GOOD_META, "name": "good"})
    prompt_left = root / "good" / "prompts" / f".model-a.{dead}.aaaa1111.tmp"
    prompt_left.mkdir(parents=True)
    lib = VoiceLibrary(root, Database(tmp_path / "koe.db"))
    assert not any(p.exists() for p in gone) and not prompt_left.exists()
    assert mine.exists() and [v.name for v in lib.list()] == ["good"] and lib.get("good").prepared_for == []


def test_a_locked_temp_of_a_writer_in_another_pid_namespace_stays(tmp_path):
    """The pid names a process this namespace cannot see, but its writer holds the lock: kept."""
    dead = dead_pid()
    with atomic_folder(tmp_path / "alice") as tmp:
        disguised = tmp.rename(tmp_path / f".alice.{dead}.abcdef12.tmp")  # the held descriptor follows the folder
        assert sweep_leftovers(tmp_path) == [] and disguised.exists()
        disguised.rename(tmp)
    assert (tmp_path / "alice").is_dir()


HOLDER = """
import sys, time
from koe.service.fsio import atomic_folder
with atomic_folder(sys.argv[1]) as tmp:
    (tmp / "reference.wav").write_bytes(b"partial")
    print(tmp, flush=True)
    time.sleep(60)
"""


def test_start_leaves_a_running_writers_temp_and_sweeps_it_after_kill_9(tmp_path):
    home_dir = tmp_path / "home"
    voices = home_dir / "voices"
    voices.mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", HOLDER, str(voices / "alice")], stdout=subprocess.PIPE, text=True)
    try:
        tmp = Path(writer.stdout.readline().strip())
        assert tmp.is_dir() and tmp.name.startswith(f".alice.{writer.pid}.")
        KoeHome(load_settings(home_dir, environ={}))  # e.g. `koe serve` starting while `koe voices add` writes
        assert tmp.is_dir()
    finally:
        writer.kill()  # kill -9: no cleanup runs
        writer.wait()
    assert tmp.is_dir()
    KoeHome(load_settings(home_dir, environ={}))
    assert not tmp.exists() and list(voices.iterdir()) == []


def test_model_store_and_outputs_leftovers_are_swept_at_start(tmp_path):
    settings = load_settings(tmp_path / "home", environ={})
    dead = dead_pid()
    model_left = settings.models_dir / f".tiny.{dead}.abcd1234.tmp"
    model_left.mkdir(parents=True)
    link_left = settings.models_dir / f".tiny.{dead}.link.tmp"
    link_left.symlink_to(tmp_path)
    out_left = settings.outputs_dir / "2026-01-01" / f".000001.wav.{dead}.abcd1234.tmp"
    out_left.parent.mkdir(parents=True)
    out_left.write_bytes(b"half")
    KoeHome(settings)
    assert not model_left.exists() and not link_left.is_symlink() and not out_left.exists()
    assert tmp_path.is_dir()  # a link's target is left alone


def test_sweep_keeps_fresh_unowned_names_from_older_versions(tmp_path):
    fresh = tmp_path / ".alice.k3j4h5l6.tmp"  # no pid: its writer cannot be told, so only its age decides
    old = tmp_path / ".bob.a1b2c3d4.tmp"
    fresh.mkdir()
    old.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert sweep_leftovers(tmp_path) == [old] and fresh.exists()


def test_the_cli_refuses_a_transcript_file_that_is_not_utf8_or_too_long(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from koe.cli.main import app

    for var in [v for v in os.environ if v.startswith("KOE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("KOE_HOME", str(tmp_path / "home"))
    clip = tmp_path / "clip.wav"
    clip.write_bytes(WAV)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café".encode("latin-1"))
    r = CliRunner().invoke(app, ["voices", "add", "alice", "--ref", str(clip), "--ref-text-file", str(latin1)])
    assert r.exit_code == 2 and "not UTF-8" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["voices", "add", "alice", "--ref", str(clip), "--description", "d" * 1001])
    assert r.exit_code == 2 and "at most 1000" in r.output
    assert list((tmp_path / "home" / "voices").iterdir()) == []
