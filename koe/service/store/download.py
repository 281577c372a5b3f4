"""Resumable downloads from the Hugging Face hub: a repo's listing, then each file's bytes.

A listing (`list_repo`) is one call to the hub's API, `/api/models/REPO[/revision/REV]?blobs=true`:
the commit a revision names and every file's size and checksum (an LFS file's SHA-256, a git
file's blob id). A `Transfer` then fetches files from `/REPO/resolve/COMMIT/PATH` (following the
hub's redirect to its CDN) with huggingface_hub's HTTP session (its proxies, `HF_HUB_OFFLINE`, its
error types) into `parts/<checksum>-<path hash>.part`, hashing on the way; a cut connection is retried with a
`Range` request from the bytes on disk, and so is a rerun after an interruption (the part stays,
named by its content and path, so a file that changed on the hub starts anew). A file is moved into place
only once its size and checksum are right. One byte count covers every file, for one progress bar.

Why not huggingface_hub's `snapshot_download`: since 2.x it writes each file to a process-unique
temp file and deletes it on failure, so an interrupted pull started every file from byte 0 again;
and its request headers look up an "agent" registry at the endpoint read when huggingface_hub was
imported, not the one a pull is given (a request to huggingface.co that a loopback test, or a
mirror, did not ask for).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

CHUNK = 1 << 20
RETRY_WAITS_S = (0.5, 1.0, 2.0)  # waits before the retries of a file that made no progress since its last failure
WORKERS = 4  # files fetched at once
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repo at a commit: its path, size and checksum (LFS: SHA-256; git: blob id)."""

    path: str
    size: int | None
    sha256: str | None = None
    blob_id: str | None = None

    @property
    def key(self) -> str:
        """A name for its partial download that changes when its content does, one per path (two
        files of one repo may hold the same bytes: each is fetched into its own part)."""
        where = hashlib.sha1(self.path.encode()).hexdigest()
        content = self.sha256 or self.blob_id
        return f"{content}-{where[:16]}" if content else where


@dataclass(frozen=True)
class Listing:
    """A repo at one commit: `sha` and its files by path."""

    repo: str
    sha: str
    files: dict[str, RemoteFile]


class UnsafeListing(ValueError):
    """A listing koe will not act on: an entry whose path could land outside the download folder, a
    checksum or commit that is not in its hex form, or a body that is no listing at all. Raised by
    `list_repo`, before any file is touched."""


_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHA1 = re.compile(r"[0-9a-f]{40}")


def check_repo_path(path: object) -> str:
    """`path` if it is a plain relative POSIX path of a repo file (what the hub lists); else
    `UnsafeListing` saying why: absolute, a `..` or `.` or empty part, a backslash, a NUL or other
    control character, a drive letter."""
    if not isinstance(path, str) or not path:
        raise UnsafeListing(f"a file name that is not a name: {path!r}")
    why = (
        "is absolute"
        if path.startswith("/")
        else "has a backslash"
        if "\\" in path
        else "has a control character"
        if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in path)
        else "names a drive"
        if re.match(r"[A-Za-z]:", path)
        else "has a '..', '.' or empty part"
        if any(part in ("", ".", "..") for part in path.split("/"))
        else ""
    )
    if why:
        raise UnsafeListing(f"the file name {path!r} {why}")
    return path


def inside(root: Path, path: str) -> Path:
    """`root / path` for a repo path that `check_repo_path` passed, checked once more to resolve
    inside `root` (symbolic links followed); `UnsafeListing` otherwise."""
    target = root / check_repo_path(path)
    if not target.resolve().is_relative_to(root.resolve()):
        raise UnsafeListing(f"the file name {path!r} resolves outside {root}")
    return target


def _remote_file(sibling) -> RemoteFile:
    """The checked `RemoteFile` of a listing entry (huggingface_hub's `RepoSibling`)."""
    path = check_repo_path(sibling.rfilename)
    lfs = sibling.lfs
    size = lfs.size if lfs else sibling.size
    sha256 = lfs.sha256 if lfs else None
    blob_id = None if lfs else sibling.blob_id
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise UnsafeListing(f"{path!r} has a size that is not one: {size!r}")
    if lfs and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
        raise UnsafeListing(f"{path!r} has an LFS sha256 that is not 64 hex digits: {sha256!r}")
    if blob_id is not None and not (isinstance(blob_id, str) and _SHA1.fullmatch(blob_id)):
        raise UnsafeListing(f"{path!r} has a blob id that is not 40 hex digits: {blob_id!r}")
    return RemoteFile(path, size, sha256, blob_id)


class ChecksumMismatch(ValueError):
    """A downloaded file whose bytes are not those the hub lists (the file is removed)."""

    def __init__(self, path: str, actual: str, expected: str) -> None:
        super().__init__(f"checksum mismatch for {path} (got {actual[:12]}, hub says {expected[:12]})")
        self.path = path


class Cancelled(Exception):
    """The transfer was stopped (Ctrl-C, or another file's failure that ends the pull)."""


def http_client():
    """The HTTP library of huggingface_hub's session (its errors, timeouts): httpx2 (huggingface_hub 2.x) or httpx (1.x)."""
    import importlib

    from huggingface_hub.utils import get_session

    return importlib.import_module(type(get_session()).__module__.split(".")[0])


def hub_headers(token: str | None) -> dict[str, str]:
    """koe's request headers: its user agent, and the token (given, or huggingface_hub's: HF_TOKEN, `hf auth login`)."""
    import huggingface_hub

    import koe

    headers = {"user-agent": f"koe/{koe.__version__}; hf_hub/{huggingface_hub.__version__}"}
    token = token or huggingface_hub.get_token()
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def list_repo(endpoint: str, repo: str, revision: str | None, token: str | None, timeout: float = 30.0) -> Listing:
    """The files of model repo `repo` at `revision` (default: its main branch). Raises huggingface_hub's
    errors (RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError, HfHubHTTPError) and its HTTP
    library's (`http_client`); `UnsafeListing` when any entry is unsafe (`check_repo_path`, the hex forms
    of checksums and the commit): a hostile endpoint or mirror must not place a file outside the store."""
    from huggingface_hub.hf_api import ModelInfo
    from huggingface_hub.utils import get_session, hf_raise_for_status

    url = f"{endpoint}/api/models/{repo}" + (f"/revision/{quote(revision, safe='')}" if revision else "")
    response = get_session().get(url, params={"blobs": True}, headers=hub_headers(token), timeout=timeout)
    hf_raise_for_status(response)
    try:
        body = response.json()
        info = ModelInfo(**body) if isinstance(body, dict) else None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise UnsafeListing(f"the listing is not one the hub writes ({type(e).__name__})") from e
    if info is None:
        raise UnsafeListing("the listing is not one the hub writes (not a JSON object)")
    if info.sha is not None and not (isinstance(info.sha, str) and _SHA1.fullmatch(info.sha)):
        raise UnsafeListing(f"the commit {info.sha!r} is not 40 hex digits")
    files: dict[str, RemoteFile] = {}
    for sibling in info.siblings or []:
        f = _remote_file(sibling)
        files[f.path] = f
    return Listing(repo, info.sha or revision or "main", files)


def file_url(endpoint: str, repo: str, sha: str, path: str) -> str:
    return f"{endpoint}/{repo}/resolve/{quote(sha, safe='')}/{quote(path)}"


def _hasher(f: RemoteFile):
    if f.sha256:
        return hashlib.sha256()
    h = hashlib.sha1()
    if f.blob_id and f.size is not None:
        h.update(b"blob %d\0" % f.size)  # a git blob id is the SHA-1 of this header and the bytes
    return h


def _hash_file(path: Path, h) -> int:
    """Feed `path`'s bytes to `h`; how many there were."""
    n = 0
    with open(path, "rb") as src:
        while block := src.read(CHUNK):
            h.update(block)
            n += len(block)
    return n


@dataclass(frozen=True)
class Job:
    """One file to fetch: from `url` to `dest`, its partial bytes in `parts`."""

    url: str
    file: RemoteFile
    dest: Path
    parts: Path


class Transfer:
    """Fetch files (`run`), several at once, resuming each from its partial bytes; `on_progress(done, total)`
    sees the bytes of every file together (those already on disk count as done from the start).

    `resumed` is how many bytes were on disk before (whole files and parts), `fetched` how many came
    over the network in this run.
    """

    def __init__(
        self,
        jobs: Iterable[Job],
        headers: dict[str, str],
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.jobs = sorted(jobs, key=lambda j: -(j.file.size or 0))  # the big files first: they set the pace
        self.headers = headers
        self.timeouts = (connect_timeout, read_timeout)
        self.on_progress = on_progress
        self.total = sum(j.file.size or 0 for j in self.jobs)
        self.done = self.resumed = self.fetched = 0
        self.cancel = threading.Event()
        self._lock = threading.Lock()
        self._present: dict[Path, int] | None = None  # bytes on disk per file when the run began, counted as done

    def prepare(self) -> int:
        """Count the bytes already on disk (whole files, parts) as done; the bytes still to fetch. `OSError`
        (ENOSPC) when the disk has less room than that."""
        self._present = {}
        for j in self.jobs:
            part = j.parts / f"{j.file.key}.part"
            have = j.dest.stat().st_size if j.dest.is_file() else part.stat().st_size if part.is_file() else 0
            self._present[j.dest] = have if j.file.size is None or have <= j.file.size else 0
        self.done = self.resumed = sum(self._present.values())
        need = sum(max((j.file.size or 0) - self._present[j.dest], 0) for j in self.jobs)
        if self.jobs:
            self.jobs[0].parts.mkdir(parents=True, exist_ok=True)
            free = shutil.disk_usage(self.jobs[0].parts).free
            if free < need:
                raise OSError(28, f"not enough disk space: {need / 1e9:.1f} GB to download, {free / 1e9:.1f} GB free", str(self.jobs[0].parts))
        return need

    def run(self) -> None:
        """Fetch every file; a failed file does not stop the others (their bytes are kept for a rerun).
        The first failure is raised once all are done; an interrupt stops all at their next chunk."""
        if self._present is None:
            self.prepare()
        if self.on_progress:
            self.on_progress(self.done, self.total)
        if not self.jobs:
            return
        pool = ThreadPoolExecutor(max_workers=min(WORKERS, len(self.jobs)), thread_name_prefix="koe-pull")
        futures = [pool.submit(self._fetch, j) for j in self.jobs]
        try:
            wait(futures)
        except BaseException:  # Ctrl-C: every file stops at its next chunk, its bytes kept
            self.cancel.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        for fut in futures:
            if fut.exception() is not None:
                raise fut.exception()

    def _count(self, n: int, resumed: bool = False) -> None:
        """`n` more bytes done (fewer, when bytes counted as there turn out wrong)."""
        if not n:
            return
        with self._lock:
            self.done += n
            if resumed:
                self.resumed += n
            else:
                self.fetched += n
            done = self.done
        if self.on_progress:
            self.on_progress(done, self.total)

    def _fetch(self, job: Job) -> None:
        f, dest = job.file, job.dest
        credited = self._present.get(dest, 0)  # counted as done already
        if dest.is_file():  # complete from an earlier run: kept if its bytes are right
            h = _hasher(f)
            if f.size is None or dest.stat().st_size == f.size:
                _hash_file(dest, h)
                if _matches(f, h):
                    self._count(dest.stat().st_size - credited, resumed=True)
                    return
            dest.unlink()
        job.parts.mkdir(parents=True, exist_ok=True)
        part = _Part(job.parts / f"{f.key}.part", _hasher(f))
        if part.path.is_file() and f.size is not None and part.path.stat().st_size > f.size:
            part.path.unlink()
        if part.path.is_file():
            part.have = _hash_file(part.path, part.hash)
        self._count(part.have - credited, resumed=True)
        failures = 0
        while True:
            before = part.have
            try:
                self._stream(job, part)
                break
            except Exception as e:
                if self.cancel.is_set() or not _transient(e):
                    raise
                failures = 1 if part.have > before else failures + 1
                if failures > len(RETRY_WAITS_S):
                    raise
                time.sleep(RETRY_WAITS_S[failures - 1])
        if f.size is not None and part.have != f.size:
            raise OSError(f"{f.path}: the hub sent {part.have} bytes, its listing says {f.size}")
        if not _matches(f, part.hash):
            part.path.unlink(missing_ok=True)
            raise ChecksumMismatch(f.path, part.hash.hexdigest(), f.sha256 or f.blob_id or "")
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part.path, dest)

    def _stream(self, job: Job, part: _Part) -> None:
        """One GET of the rest of `job`'s file (from byte `part.have`), appended to the part file."""
        from huggingface_hub.utils import get_session, hf_raise_for_status

        http = http_client()
        headers = {**self.headers, "accept-encoding": "identity"}  # the bytes as stored: sizes, hashes and ranges hold
        if part.have:
            headers["range"] = f"bytes={part.have}-"
        timeout = http.Timeout(self.timeouts[1], connect=self.timeouts[0])
        with get_session().stream("GET", job.url, headers=headers, timeout=timeout, follow_redirects=True) as r:
            if r.status_code == 416 or (part.have and r.status_code == 200):  # the range was not served: the file anew
                self._count(-part.have, resumed=True)
                part.restart(_hasher(job.file))
                if r.status_code == 416:
                    raise http.RemoteProtocolError("range not satisfiable; fetching the file anew")
            if r.status_code >= 400:
                r.read()
                hf_raise_for_status(r)
            with open(part.path, "ab") as out:
                for chunk in r.iter_raw():  # as they arrive: a cut loses none that came
                    if self.cancel.is_set():
                        raise Cancelled("download stopped")
                    out.write(chunk)
                    part.hash.update(chunk)
                    part.have += len(chunk)
                    self._count(len(chunk))


@dataclass
class _Part:
    """A file's partial download: its path, the bytes there, their running hash."""

    path: Path
    hash: object
    have: int = 0

    def restart(self, fresh_hash) -> None:
        self.path.unlink(missing_ok=True)
        self.hash, self.have = fresh_hash, 0


def _matches(f: RemoteFile, h) -> bool:
    expected = f.sha256 or f.blob_id
    return not expected or h.hexdigest() == expected


def _transient(e: Exception) -> bool:
    """A failure worth retrying: the network (a cut, a timeout) or the hub's 5xx/429."""
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(e, http_client().TransportError):
        return True
    if isinstance(e, HfHubHTTPError):
        return getattr(e.response, "status_code", None) in TRANSIENT_STATUS
    return False
