"""Voice archives: the .zip, .tar, .tar.gz or .tgz a voice is exported to and imported from.

An archive holds `<voice>/reference.wav`, `<voice>/transcript.txt` and `<voice>/voice.json`. Reading
one is hardened: only those three members are read, each within its size limit, and members with
absolute paths, `..`, links, devices or duplicates, too many members or too many unpacked bytes
are refused as `InvalidRequest`, before any data is written anywhere.
"""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path

from koe.service.errors import InvalidRequest, KoeError, NotFound
from koe.service.voices.manifest import MAX_MANIFEST_BYTES, MAX_REFERENCE_BYTES, REFERENCE, TRANSCRIPT, VOICE_JSON, VoiceLimits

MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
MAX_UNPACKED_BYTES = 512 * 1024 * 1024  # all members of a tar together, skipped ones included
MAX_MEMBERS = 64
_ARCHIVE_FILES = (REFERENCE, TRANSCRIPT, VOICE_JSON)


def archive_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if name.endswith(".tar"):
        return "tar"
    raise InvalidRequest(f"archive {path.name!r}: use a .zip, .tar, .tar.gz or .tgz name")


def _member_file(member: str) -> str | None:
    """The voice file a member names (`reference.wav` or `<voice>/reference.wav`), None to skip; unsafe paths raise."""
    parts = member.replace("\\", "/").split("/")
    if member.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]) or "\x00" in member:
        raise InvalidRequest(f"voice archive member {member[:200]!r} has an unsafe path")
    parts = [p for p in parts if p not in ("", ".")]
    if len(parts) in (1, 2) and parts[-1] in _ARCHIVE_FILES:
        return parts[-1]
    return None


def _member_limit(f: str, limits: VoiceLimits) -> int:
    """The most bytes a wanted member may hold (a transcript: 4 UTF-8 bytes a character, plus slack)."""
    if f == VOICE_JSON:
        return MAX_MANIFEST_BYTES
    if f == TRANSCRIPT:
        return 4 * limits.transcript_chars + 64 * 1024
    return MAX_REFERENCE_BYTES


def _archive_bytes(archive: str | Path | bytes) -> tuple[bytes, str]:
    if isinstance(archive, (bytes, bytearray)):
        data, label = bytes(archive), "<upload>"
    else:
        path = Path(archive)
        if not path.is_file():
            raise NotFound(f"no such archive: {path}")
        if path.stat().st_size > MAX_ARCHIVE_BYTES:
            raise InvalidRequest(f"voice archive {path.name} is too large (over {MAX_ARCHIVE_BYTES >> 20} MiB)")
        try:
            data = path.read_bytes()
        except OSError as e:
            raise InvalidRequest(f"cannot read the voice archive {path.name}: {e.strerror}") from e
        label = path.name
    if len(data) > MAX_ARCHIVE_BYTES:
        raise InvalidRequest(f"voice archive {label} is too large (over {MAX_ARCHIVE_BYTES >> 20} MiB)")
    return data, label


def read_archive(archive: str | Path | bytes, limits: VoiceLimits) -> dict[str, bytes]:
    """The wanted members of a .zip or .tar(.gz) voice archive, each read within its limit; anything
    unsafe, oversized or damaged is `InvalidRequest`."""
    data, label = _archive_bytes(archive)
    try:
        if zipfile.is_zipfile(io.BytesIO(data)):
            return _read_zip(data, limits)
        return _read_tar(data, label, limits)
    except KoeError:
        raise
    except (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, OSError, RuntimeError, ValueError, NotImplementedError) as e:
        raise InvalidRequest(f"voice archive {label} is damaged: {e}") from e


def _wanted(files: dict[str, bytes], name: str, size: int, limits: VoiceLimits) -> str | None:
    """The voice file member `name` holds (None to skip it), after the checks every kind of archive shares."""
    f = _member_file(name)
    if f is None:
        return None
    if f in files:
        raise InvalidRequest(f"voice archive holds more than one {f}")
    if size > _member_limit(f, limits):
        raise InvalidRequest(f"voice archive member {name[:200]!r} is too large", param="ref_text" if f == TRANSCRIPT else None)
    return f


def _read_zip(data: bytes, limits: VoiceLimits) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise InvalidRequest(f"voice archive has {len(infos)} members; a voice has 3")
        for info in infos:
            if info.is_dir():
                _member_file(info.filename)  # still refuse unsafe paths
                continue
            f = _wanted(files, info.filename, info.file_size, limits)
            if f is None:
                continue
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind and kind != stat.S_IFREG:
                raise InvalidRequest(f"voice archive member {info.filename[:200]!r} is a link or device; refused")
            limit = _member_limit(f, limits)
            with zf.open(info) as fh:  # reads at most the size it claims, then checks the CRC
                blob = fh.read(limit + 1)
            if len(blob) > limit:
                raise InvalidRequest(f"voice archive member {info.filename[:200]!r} is too large")
            files[f] = blob
    return files


def _read_tar(data: bytes, label: str, limits: VoiceLimits) -> dict[str, bytes]:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except tarfile.TarError as e:
        raise InvalidRequest(f"{label} is not a voice archive (.zip or .tar): {e}") from e
    files: dict[str, bytes] = {}
    count = unpacked = 0
    with tf:
        while (m := tf.next()) is not None:  # one header at a time: the sizes are checked before any data is read
            count += 1
            unpacked += max(m.size, 0)
            if count > MAX_MEMBERS or unpacked > MAX_UNPACKED_BYTES:
                raise InvalidRequest(f"voice archive {label} is too large or has too many members")
            if m.isdir():
                _member_file(m.name)
                continue
            f = _wanted(files, m.name, m.size, limits)
            if f is None:
                continue
            if not m.isfile():
                raise InvalidRequest(f"voice archive member {m.name[:200]!r} is a link or device; refused")
            fobj = tf.extractfile(m)
            blob = fobj.read(_member_limit(f, limits) + 1) if fobj is not None else b""
            files[f] = blob
    return files


def write_archive(files: dict[str, bytes], kind: str, folder: str, mtime: float) -> bytes:
    """An archive of `kind` (see `archive_kind`) holding each of `files` as `<folder>/<file>`."""
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for f, data in files.items():
                zf.writestr(f"{folder}/{f}", data)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz" if kind == "tar.gz" else "w") as tf:
            for f, data in files.items():
                info = tarfile.TarInfo(f"{folder}/{f}")
                info.size = len(data)
                info.mtime = int(mtime)
                info.mode = 0o644
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()
