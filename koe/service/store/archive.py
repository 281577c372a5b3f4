"""Unpacking a zip archive a pull downloaded (a model's data the hub keeps zipped, e.g. GPT-SoVITS's
`G2PWModel.zip`) into the model folder being built, refusing what could harm the machine.

The archive's bytes were checked against the hub's checksum on the way, but the hub (or a mirror
`HF_ENDPOINT` names) is not trusted with the paths inside it. `unpack_zip` reads the whole table of
contents before it writes a byte, and refuses the archive (`UnsafeArchive`) when a member:

- has a name that could land outside the folder: absolute, a drive, a backslash, a `..`, `.` or
  empty part, a control character (`koe.service.store.download.check_repo_path`), or one that
  resolves outside through a link already there;
- is not a plain file or folder (a symbolic link, a device, a FIFO) or is encrypted;
- is named twice, or is both a file and a folder, or would replace a file already in the folder;
- or when the archive unpacks to more than `max_ratio` times its own size (a "zip bomb": deflate
  reaches ~1000×; real model data 1–10×), or has more than `max_members` members.

Files are written with mode 0644 and folders 0755 whatever the archive says (no setuid or
executable bits); each member's bytes are counted as they are written and the member refused if
they pass its listed size; zipfile checks each member's CRC. macOS's `__MACOSX/` resource forks
are skipped (never content). Nothing is cleaned up here: the caller unpacks into a temp folder it
drops on failure.
"""

from __future__ import annotations

import errno
import shutil
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path

from koe.service.store.download import UnsafeListing, check_repo_path, inside

__all__ = ["UnsafeArchive", "place_file", "unpack_zip", "MAX_MEMBERS", "MAX_RATIO"]

MAX_RATIO = 100
MAX_MEMBERS = 100_000
CHUNK = 1 << 20
SKIPPED_ROOTS = ("__MACOSX",)


class UnsafeArchive(ValueError):
    """An archive koe will not unpack, and why; raised before anything of it is written (a member
    longer than it claims: while it is written)."""


_NOT_PLAIN = {stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}


def _kind(info: zipfile.ZipInfo) -> str:
    """ "dir", "file", or what else the member's Unix mode says it is."""
    kind = stat.S_IFMT(info.external_attr >> 16)
    if info.is_dir() and kind in (0, stat.S_IFDIR):
        return "dir"
    if kind in (0, stat.S_IFREG) and not info.filename.endswith("/"):
        return "file"
    return _NOT_PLAIN.get(kind, f"of file type {oct(kind)}")


def _members(archive: zipfile.ZipFile, folder: Path, name: str, max_members: int) -> list[tuple[zipfile.ZipInfo, str, Path]]:
    """Each member to unpack (info, "dir"/"file", its path in `folder`), every check made."""
    infos = archive.infolist()
    if len(infos) > max_members:
        raise UnsafeArchive(f"{name} has {len(infos)} members, more than the {max_members} koe unpacks")
    seen: set[str] = set()
    files: set[str] = set()
    folders: set[str] = set()  # every folder a member's path goes through
    out = []
    for info in infos:
        path = info.filename.rstrip("/")
        try:
            check_repo_path(path)
        except UnsafeListing as e:
            raise UnsafeArchive(f"{name}: {e}") from None
        if path.split("/")[0] in SKIPPED_ROOTS:
            continue
        kind = _kind(info)
        if kind not in ("dir", "file"):
            raise UnsafeArchive(f"{name}: {path!r} is {kind}, not a plain file or folder")
        if info.flag_bits & 0x1:
            raise UnsafeArchive(f"{name}: {path!r} is encrypted")
        if path in seen:
            raise UnsafeArchive(f"{name} names {path!r} twice")
        parents = {path.rsplit("/", i)[0] for i in range(1, path.count("/") + 1)}
        both = (files & parents) or ({path} & folders if kind == "file" else set())
        if both:
            raise UnsafeArchive(f"{name}: {next(iter(both))!r} is a file and a folder")
        seen.add(path)
        folders |= parents | ({path} if kind == "dir" else set())
        if kind == "file":
            files.add(path)
        try:
            target = inside(folder, path)
        except UnsafeListing as e:
            raise UnsafeArchive(f"{name}: {e}") from None
        if target.is_symlink() or (kind == "file" and target.exists()) or (kind == "dir" and target.exists() and not target.is_dir()):
            raise UnsafeArchive(f"{name}: {path!r} would replace {target}")
        out.append((info, kind, target))
    return out


def unpack_zip(archive_path: str | Path, folder: str | Path, *, max_ratio: int = MAX_RATIO, max_members: int = MAX_MEMBERS) -> list[str]:
    """Unpack the zip at `archive_path` into `folder` (made if missing), as the module says; the
    members' paths (POSIX, relative to `folder`) that were written. `UnsafeArchive` for an archive
    refused, `zipfile.BadZipFile` for one that is no zip or is damaged, OSError (ENOSPC) when the
    disk has not the room its listed sizes need."""
    archive_path, folder = Path(archive_path), Path(folder)
    name = archive_path.name
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive_path) as archive:
        members = _members(archive, folder, name, max_members)
        total = sum(info.file_size for info, kind, _ in members if kind == "file")
        size = archive_path.stat().st_size
        if total > max_ratio * max(size, 1):
            raise UnsafeArchive(f"{name} unpacks to {total} bytes, more than {max_ratio}× its own {size}")
        free = shutil.disk_usage(folder).free
        if total > free:
            raise OSError(errno.ENOSPC, f"unpacking {name} needs {total} bytes; {free} are free at {folder}")
        for info, kind, target in members:
            if kind == "dir":
                target.mkdir(mode=0o755, parents=True, exist_ok=True)
            else:
                target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                _write(archive, info, target, name)
    return [info.filename.rstrip("/") for info, kind, _ in members if kind == "file"]


def _write(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, name: str) -> None:
    """One member's bytes into a new file at `target` (never through a link: O_EXCL), at most its listed size."""
    written = 0
    with archive.open(info) as source, open(target, "xb") as out:
        while chunk := source.read(CHUNK):
            written += len(chunk)
            if written > info.file_size:
                raise UnsafeArchive(f"{name}: {info.filename!r} holds more than the {info.file_size} bytes it lists")
            out.write(chunk)
    target.chmod(0o644)


def place_file(source, rfilename: str, file: Path, folder: Path, link: Callable[[Path, Path], None]) -> None:
    """Put `rfilename` of the hub source `source` (koe.engines.spec.HubFiles), downloaded or cached
    at `file`, into the model folder being built: unpacked under its `dest` when the source says
    `unpack`, else `link(file, target)` at its place (checked to stay inside `folder`)."""
    if source.unpack:
        unpack_zip(file, inside(folder, source.dest) if source.dest else folder)
        return
    target = inside(folder, source.in_folder(rfilename))
    target.parent.mkdir(parents=True, exist_ok=True)
    link(file, target)
