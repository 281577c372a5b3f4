"""The voice library: add / list / show / remove / export / import, safe names, atomic folders."""

import io
import json
import tarfile
import zipfile

import numpy as np
import pytest
import soundfile as sf

from koe.audio.io import load_audio
from koe.service.errors import AlreadyExists, InvalidRequest, NotFound
from koe.service.names import check_name
from koe.service.storage import Database
from koe.service.voices.library import VoiceLibrary

SR = 22050


def clip(seconds: float = 2.0, sr: int = SR, channels: int = 1, seed: int = 0) -> np.ndarray:
    """A speech-like test signal: a wobbling tone under noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * (150 + 30 * np.sin(3 * t)) * t) + 0.02 * rng.standard_normal(t.size)
    x = x.astype(np.float32)
    return np.stack([x, 0.5 * x], axis=1) if channels == 2 else x


@pytest.fixture
def library(tmp_path):
    return VoiceLibrary(tmp_path / "voices", Database(tmp_path / "koe.db"), max_reference_seconds=10)


@pytest.fixture
def wav_path(tmp_path):
    path = tmp_path / "ref.wav"
    sf.write(path, clip(channels=2), SR, subtype="PCM_16")
    return path


def test_add_keeps_a_normalized_copy_with_the_same_bits(library, wav_path):
    voice = library.add("alice", str(wav_path), "  Hello there.  ", language="english")
    assert voice.ref_text == "Hello there." and voice.sample_rate == SR and voice.duration_s == pytest.approx(2.0, abs=0.01)
    stored, sr = load_audio(voice.reference_path)
    original, _ = load_audio(wav_path)
    assert sr == SR and stored.ndim == 1
    np.testing.assert_array_equal(stored, original)  # mono float32 at its own rate: cloning sees the same samples
    assert (voice.folder / "transcript.txt").read_text().strip() == "Hello there."
    meta = json.loads((voice.folder / "voice.json").read_text())
    assert meta["name"] == "alice" and meta["ref_text"] == "Hello there." and meta["format"] == 1


def test_list_show_remove(library, wav_path):
    library.add("bob", str(wav_path))
    library.add("alice", wav_path.read_bytes(), "hi")
    assert [v.name for v in library.list()] == ["alice", "bob"]
    assert library.get("BOB").ref_text is None  # case-insensitive lookup; no transcript = timbre only
    assert library.get("alice").to_dict()["prepared_for"] == []
    library.remove("bob")
    assert [v.name for v in library.list()] == ["alice"]
    assert not (library.root / "bob").exists()
    with pytest.raises(NotFound, match="no voice named 'bob'; voices: alice"):
        library.get("bob")
    with pytest.raises(NotFound):
        library.remove("bob")


def test_duplicates_and_overwrite(library, wav_path):
    library.add("alice", str(wav_path), "one")
    with pytest.raises(AlreadyExists, match="already exists"):
        library.add("Alice", str(wav_path), "two")
    voice = library.add("ALICE", str(wav_path), "two", overwrite=True)
    assert voice.name == "alice" and library.get("alice").ref_text == "two"


@pytest.mark.parametrize("name", ["../x", "a/b", "a\\b", "..", ".hidden", "", "   ", "x" * 65, "con", "bad name", "é"])
def test_names_that_could_escape_or_break_are_refused(library, wav_path, name):
    with pytest.raises(InvalidRequest, match="name"):
        library.add(name, str(wav_path))
    with pytest.raises(InvalidRequest):
        check_name(name)
    assert list(library.root.iterdir()) == []


def test_bad_audio_is_refused_clearly(library, tmp_path):
    with pytest.raises(InvalidRequest, match="reference audio: .*silence"):
        library.add("quiet", (np.zeros(SR, np.float32), SR))
    with pytest.raises(InvalidRequest, match="at most 10 s"):
        library.add("long", (clip(12.0), SR))
    with pytest.raises(InvalidRequest, match="at least 1.0 s"):
        library.add("short", (clip(0.6), SR))
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not really audio")
    with pytest.raises(InvalidRequest, match="reference audio"):
        library.add("corrupt", str(bad))
    assert library.list() == []


def test_a_crash_mid_add_leaves_no_voice(library, wav_path, monkeypatch):
    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("koe.service.voices.library.atomic_write_text", crash)
    with pytest.raises(OSError):
        library.add("alice", str(wav_path), "hi")
    assert library.list() == [] and [p for p in library.root.iterdir()] == []


@pytest.mark.parametrize("archive_name", ["alice.zip", "alice.tar", "alice.tar.gz"])
def test_export_import_round_trip(library, wav_path, tmp_path, archive_name):
    original = library.add("alice", str(wav_path), "Hello there.", description="warm")
    archive = library.export("alice", tmp_path / archive_name)
    assert archive.exists()
    copy = library.import_archive(archive, "alice2")
    assert copy.ref_text == "Hello there." and copy.description == "warm" and copy.source == "import"
    np.testing.assert_array_equal(load_audio(copy.reference_path)[0], load_audio(original.reference_path)[0])
    with pytest.raises(AlreadyExists):
        library.import_archive(archive)  # keeps its exported name, which is taken
    library.remove("alice")
    assert library.import_archive(archive.read_bytes()).name == "alice"


def test_import_refuses_unsafe_archives(library, tmp_path, wav_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../../evil/reference.wav", wav_path.read_bytes())
    with pytest.raises(InvalidRequest, match="unsafe path"):
        library.import_archive(buf.getvalue(), "evil")
    tar_buf = io.BytesIO()
    with tarfile.open(fileobj=tar_buf, mode="w") as tf:
        info = tarfile.TarInfo("x/reference.wav")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(InvalidRequest, match="link"):
        library.import_archive(tar_buf.getvalue(), "evil")
    with pytest.raises(InvalidRequest, match="not a voice archive"):
        library.import_archive(b"garbage bytes", "evil")
    assert not (tmp_path / "evil").exists() and not library.exists("evil")
    library.add("v", str(wav_path))
    with pytest.raises(InvalidRequest, match="use a .zip"):
        library.export("v", tmp_path / "x.rar")


def test_database_is_rebuilt_from_folders(tmp_path, wav_path):
    db_path = tmp_path / "koe.db"
    lib = VoiceLibrary(tmp_path / "voices", Database(db_path))
    lib.add("alice", str(wav_path), "hi")
    db_path.unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"koe.db{suffix}").unlink(missing_ok=True)
    again = VoiceLibrary(tmp_path / "voices", Database(db_path))
    assert [v.name for v in again.list()] == ["alice"] and again.get("alice").ref_text == "hi"


def test_prompt_is_prepared_once_per_model_and_kept(library, wav_path):
    calls = []

    class Prompt:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def save(self, folder):
            (folder / "prompt.json").write_text(json.dumps({"tag": self.tag}))

        @classmethod
        def load(cls, folder):
            return cls(json.loads((folder / "prompt.json").read_text())["tag"])

    def prepare(voice):
        calls.append(voice.name)
        return Prompt(f"made-{len(calls)}")

    library.add("alice", str(wav_path), "hi")
    first = library.prompt_for("alice", "model-a", prepare, Prompt.load)
    again = library.prompt_for("alice", "model-a", prepare, Prompt.load)
    other = library.prompt_for("alice", "model-b", prepare, Prompt.load)
    assert (first.tag, again.tag, other.tag) == ("made-1", "made-1", "made-2")
    assert library.get("alice").prepared_for == ["model-a", "model-b"]
    with pytest.raises(InvalidRequest):
        library.prompt_for("alice", "../escape", prepare, Prompt.load)


def test_a_voice_is_checked_against_each_model_s_own_floor(library):
    """The library keeps any clip over its own floor; a model's floor (`Capabilities.min_reference_s`) applies when the voice is used with it."""
    library.add("brief", (clip(1.2), SR))
    assert library.check_reference("brief", 1.0, "model-a").name == "brief"
    with pytest.raises(InvalidRequest, match=r"voice 'brief' is 1\.20 s of audio; model-b clones from at least 1\.5 s") as refused:
        library.check_reference("BRIEF", 1.5, "model-b")
    assert refused.value.param == "voice" and "--overwrite" in refused.value.hint
