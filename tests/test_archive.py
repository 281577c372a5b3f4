"""koe.service.store.archive: a zip from the hub is unpacked only when every member is safe."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from koe.service.store.archive import UnsafeArchive, unpack_zip


def make_zip(path: Path, members: dict[str, bytes | None], *, modes: dict[str, int] | None = None, compression=zipfile.ZIP_DEFLATED) -> Path:
    """A zip of `members` (name -> bytes; None: a folder entry), each with the Unix mode `modes` gives."""
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name + ("/" if data is None and not name.endswith("/") else ""))
            info.compress_type = compression
            mode = (modes or {}).get(name, (stat.S_IFDIR | 0o755) if data is None else (stat.S_IFREG | 0o644))
            info.external_attr = mode << 16 | (0x10 if data is None else 0)
            z.writestr(info, data or b"")
    return path


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_model_archive_unpacks_into_the_folder_as_plain_files(tmp_path):
    archive = make_zip(
        tmp_path / "G2PWModel.zip",
        {"G2PWModel": None, "G2PWModel/g2pW.onnx": b"onnx" * 100, "G2PWModel/config.py": b"x = 1\n", "G2PWModel/data/chars.txt": b"a\n"},
        modes={"G2PWModel/config.py": stat.S_IFREG | 0o4755},  # setuid and executable bits are not kept
    )
    out = tmp_path / "model"
    written = unpack_zip(archive, out)
    assert sorted(written) == ["G2PWModel/config.py", "G2PWModel/data/chars.txt", "G2PWModel/g2pW.onnx"]
    assert files_under(out) == {"G2PWModel/config.py": b"x = 1\n", "G2PWModel/data/chars.txt": b"a\n", "G2PWModel/g2pW.onnx": b"onnx" * 100}
    assert stat.S_IMODE((out / "G2PWModel/config.py").stat().st_mode) == 0o644


def test_macos_resource_forks_are_skipped(tmp_path):
    archive = make_zip(tmp_path / "a.zip", {"nltk_data/x.json": b"{}", "__MACOSX/nltk_data/._x.json": b"\0\5\26\7"})
    unpack_zip(archive, tmp_path / "out")
    assert files_under(tmp_path / "out") == {"nltk_data/x.json": b"{}"}


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../outside.txt", "'..'"),
        ("G2PWModel/../../outside.txt", "'..'"),
        ("/etc/cron.d/koe", "absolute"),
        ("C:/Windows/evil.dll", "drive"),
        ("G2PWModel\\..\\..\\outside.txt", "backslash"),
        ("G2PWModel/./x", "'.'"),
        ("G2PWModel//x", "empty part"),
        ("G2PWModel/x\nnewline", "control character"),
    ],
)
def test_a_member_named_to_land_outside_the_folder_refuses_the_archive_before_any_byte(tmp_path, name, why):
    archive = make_zip(tmp_path / "bad.zip", {"G2PWModel/first.txt": b"first", name: b"pwned"})
    out = tmp_path / "deep" / "model"
    with pytest.raises(UnsafeArchive, match=why):
        unpack_zip(archive, out)
    assert files_under(tmp_path / "deep") == {}
    assert not (tmp_path / "outside.txt").exists()


@pytest.mark.parametrize(
    ("mode", "kind"),
    [(stat.S_IFLNK | 0o777, "symbolic link"), (stat.S_IFCHR | 0o644, "device"), (stat.S_IFIFO | 0o644, "FIFO"), (stat.S_IFSOCK | 0o644, "socket")],
)
def test_a_link_or_special_file_refuses_the_archive(tmp_path, mode, kind):
    archive = make_zip(tmp_path / "bad.zip", {"G2PWModel/ok.txt": b"ok", "G2PWModel/link": b"/etc/passwd"}, modes={"G2PWModel/link": mode})
    with pytest.raises(UnsafeArchive, match=kind):
        unpack_zip(archive, tmp_path / "out")
    assert files_under(tmp_path / "out") == {}


def test_a_member_through_a_link_already_in_the_folder_is_refused(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "G2PWModel")
    archive = make_zip(tmp_path / "a.zip", {"G2PWModel/g2pW.onnx": b"x"})
    with pytest.raises(UnsafeArchive, match="resolves outside"):
        unpack_zip(archive, out)
    assert list(elsewhere.iterdir()) == []


def test_a_file_already_in_the_folder_is_not_replaced(tmp_path):
    out = tmp_path / "out"
    (out / "G2PWModel").mkdir(parents=True)
    (out / "G2PWModel" / "config.py").write_bytes(b"mine")
    with pytest.raises(UnsafeArchive, match="would replace"):
        unpack_zip(make_zip(tmp_path / "a.zip", {"G2PWModel/config.py": b"theirs"}), out)
    assert (out / "G2PWModel" / "config.py").read_bytes() == b"mine"


def test_a_name_given_twice_or_as_file_and_folder_is_refused(tmp_path):
    twice = tmp_path / "twice.zip"
    with zipfile.ZipFile(twice, "w") as z:
        z.writestr("G2PWModel/a.txt", b"1")
        with pytest.warns(UserWarning, match="Duplicate name"):
            z.writestr("G2PWModel/a.txt", b"2")
    with pytest.raises(UnsafeArchive, match="twice"):
        unpack_zip(twice, tmp_path / "out")
    for members in ({"x": b"file", "x/y": b"under it"}, {"x/y": b"under it", "x": b"file"}):
        with pytest.raises(UnsafeArchive, match="a file and a folder"):
            unpack_zip(make_zip(tmp_path / "both.zip", members), tmp_path / "out")
    assert files_under(tmp_path / "out") == {}


def test_a_zip_bomb_is_refused_by_its_listed_size_before_anything_is_written(tmp_path):
    archive = make_zip(tmp_path / "bomb.zip", {"G2PWModel/zeros.bin": bytes(20 << 20)})
    assert archive.stat().st_size < (20 << 20) // 100
    with pytest.raises(UnsafeArchive, match="more than 100×"):
        unpack_zip(archive, tmp_path / "out")
    assert files_under(tmp_path / "out") == {}
    assert unpack_zip(archive, tmp_path / "allowed", max_ratio=2000) == ["G2PWModel/zeros.bin"]  # the limit is the ratio


def test_too_many_members_are_refused(tmp_path):
    archive = make_zip(tmp_path / "many.zip", {f"d/{i}": b"" for i in range(11)}, compression=zipfile.ZIP_STORED)
    with pytest.raises(UnsafeArchive, match="11 members, more than the 10"):
        unpack_zip(archive, tmp_path / "out", max_members=10)


def test_an_encrypted_member_is_refused(tmp_path):
    archive = make_zip(tmp_path / "enc.zip", {"G2PWModel/a.txt": b"secret"}, compression=zipfile.ZIP_STORED)
    data = bytearray(archive.read_bytes())
    central = data.rindex(b"PK\x01\x02")
    data[central + 8] |= 0x1  # the central directory's "encrypted" flag bit
    archive.write_bytes(bytes(data))
    with pytest.raises(UnsafeArchive, match="encrypted"):
        unpack_zip(archive, tmp_path / "out")


def test_a_member_longer_than_it_lists_yields_no_more_than_its_listed_bytes(tmp_path):
    """A central directory that under-states a member's size (to slip past the ratio check): zipfile
    stops at the listed size and its CRC check fails; no extra byte reaches the disk."""
    archive = make_zip(tmp_path / "liar.zip", {"G2PWModel/a.bin": b"A" * 4096}, compression=zipfile.ZIP_STORED)
    data = bytearray(archive.read_bytes())
    central = data.rindex(b"PK\x01\x02")
    data[central + 24 : central + 28] = (16).to_bytes(4, "little")  # uncompressed size: 16
    archive.write_bytes(bytes(data))
    with pytest.raises((zipfile.BadZipFile, UnsafeArchive)):
        unpack_zip(archive, tmp_path / "out")
    assert all(len(b) <= 16 for b in files_under(tmp_path / "out").values())


def test_a_file_that_is_no_zip_is_a_bad_zip(tmp_path):
    (tmp_path / "not.zip").write_bytes(b"<html>an error page</html>")
    with pytest.raises(zipfile.BadZipFile):
        unpack_zip(tmp_path / "not.zip", tmp_path / "out")
