"""`koe models pull`: download a model from the Hugging Face hub into the store.

Online: each repo a release spans (the whole repo, or the files the family's `ReleasedModel`
names: a checkpoint repo's subfolder, a vocoder repo) is listed at the commit the revision names
(every file's size and checksum), then all their files are fetched together into a hidden partial
folder under `models/` by koe.service.store.download: one byte count for a progress bar, each file's
SHA-256 (git files: blob id) checked on the way, a cut connection or a rerun resumed from the bytes
on disk. The model folder is built beside its final place from those files, completed by the
family's spec (`assemble`: e.g. the config of the release's architecture), validated, and renamed
into place; the store row's origin records each repo's commit. Offline (no DNS / no route /
HF_HUB_OFFLINE): fails within `connect_timeout` seconds with a message saying how to get the files
by hand instead. The endpoint is `HF_ENDPOINT` as it is when a pull starts (default huggingface.co).
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse
from zipfile import BadZipFile

from koe.engines.spec import HubFiles
from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, StorageError, Unavailable
from koe.service.fsio import fsync_dir, remove_tree
from koe.service.names import check_name
from koe.service.store.licenses import accept_release_license
from koe.service.store.models import ModelDetails, ModelStore
from koe.service.store.resolve import hub_offline, release_for, release_name

if TYPE_CHECKING:
    from koe.engines.licenses import License
    from koe.engines.spec import ReleasedModel

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_HINT = (
    "download the model folder on a machine that is online (e.g. `huggingface-cli download {repo} --local-dir DIR`), "
    "copy it here, then `koe models import DIR` or pass `--model DIR`"
)


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def check_hub_reachable(timeout: float = 3.0, repo_id: str = "ID", hint: str | None = None) -> None:
    """Raise `Unavailable` (fast) when the hub cannot be reached: offline mode, no DNS, no route."""
    hint = hint or OFFLINE_HINT.format(repo=repo_id)
    if hub_offline():
        raise Unavailable("HF_HUB_OFFLINE is set, so the Hugging Face hub is not used", hint=hint)
    url = urlparse(_endpoint())
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise Unavailable(f"cannot reach the Hugging Face hub at {host}:{port} ({reason}); are you offline?", hint=hint) from e


def _download_command(source, local_dir: str) -> str:
    files = [posixpath.join(source.subfolder, f) for f in source.files]
    if any(c in f for f in files for c in "*?["):
        what = " --include " + " ".join(f"'{f}'" for f in files)
    else:
        what = "".join(f" {f}" for f in files) or (f" --include '{source.subfolder}/*'" if source.subfolder else "")
    return f"`huggingface-cli download {source.repo}{what} --local-dir {local_dir}`"


def _fetch_steps(source, folder: str) -> str:
    """How to get one source's files by hand into the model folder `folder` (huggingface-cli keeps
    each file's repo path under its --local-dir: a subfolder that lands elsewhere is then moved)."""
    if source.unpack:
        return _unpack_steps(source, folder)
    dest = posixpath.join(folder, source.dest) if source.dest else folder
    if not source.subfolder:
        return _download_command(source, dest)
    command = _download_command(source, folder)
    return command if source.subfolder == source.dest else f"{command} then move {posixpath.join(folder, source.subfolder)}/* into {dest}"


def _unpack_steps(source, folder: str) -> str:
    """How to get an `unpack` source by hand: download each archive, unzip it where the pull would, delete it."""
    into = posixpath.join(folder, source.dest) if source.dest else folder
    unzips = " ".join(f"`unzip {posixpath.join(folder, source.subfolder, f)} -d {into}`" for f in source.files)
    return f"{_download_command(source, folder)} then {unzips} (and delete the zip)"


def offline_hint(release) -> str:
    """How to get `release` onto this machine by hand: the downloads, then `koe models import`."""
    sources = release.sources
    if len(sources) == 1 and not sources[0].files and not sources[0].subfolder and not release.arch:
        return OFFLINE_HINT.format(repo=release.repo_id)
    main, rest = sources[0], sources[1:]
    if main.dest or any(h.subfolder for h in rest):
        steps = ", ".join(_fetch_steps(h, "DIR") for h in sources)
        folder = "DIR"
    else:
        folder = posixpath.join("DIR", main.subfolder) if main.subfolder else "DIR"
        steps = ", ".join(
            [_download_command(main, "DIR"), *(_unpack_steps(h, folder) if h.unpack else _download_command(h, posixpath.join(folder, h.dest)) for h in rest)]
        )
    imports = f"`koe models import {folder}" + (f" --arch {release.arch}`" if release.arch else "`")
    return f"on a machine that is online: {steps}; copy {folder} here, then {imports}"


@dataclass
class _Fetched:
    """One source's files, downloaded into `local` (the repo's paths) at commit `sha`."""

    source: HubFiles
    local: Path
    files: list[str]
    sha: str


def _look_up(source, partial: Path, revision: str | None, token: str | None, hint: str, status: Callable[[str], None]) -> tuple[_Fetched, list]:
    """What to download of one source: its files at the commit `revision` names (checked against what
    the release lists), and the jobs that fetch them into the partial folder."""
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.utils import filter_repo_objects

    from koe.service.store.download import Job, UnsafeListing, file_url, inside, list_repo

    where = source.repo + (f"/{source.subfolder}" if source.subfolder else "")
    at = f"@{revision}" if revision else ""
    patterns = source.patterns()
    status(f"looking up {source.repo}{at} on {_endpoint()}")
    try:
        listing = list_repo(_endpoint(), source.repo, revision, token)
    except RevisionNotFoundError as e:
        raise NotFound(f"{source.repo} has no revision {revision!r} on the hub", hint="a branch, tag or commit of the repo", param="revision") from e
    except GatedRepoError as e:
        raise Unavailable(f"{source.repo} is gated: accept its terms on the hub, then pass a token (--token or HF_TOKEN)", hint=hint) from e
    except RepositoryNotFoundError as e:
        raise NotFound(f"no model {source.repo!r}{at} on the hub (or it needs a token)") from e
    except HfHubHTTPError as e:
        raise Unavailable(f"the hub refused the listing of {source.repo}: {e}", hint=hint) from e
    except UnsafeListing as e:
        raise _unsafe(source.repo, e) from e
    except Exception as e:
        if not _network_error(e):
            raise
        raise Unavailable(f"cannot list {source.repo} on the hub: {e}", hint=hint) from e
    wanted = list(filter_repo_objects(list(listing.files), allow_patterns=patterns))
    exact = patterns is not None and not any(c in p for p in patterns for c in "*?[")
    absent = [p for p in patterns if p not in listing.files] if exact else []
    if absent or not wanted:
        raise NotFound(f"{source.repo}{at} has no {', '.join(absent) or where + ' files'} on the hub", hint="is the hub id right? (`koe models pull --help`)")
    local = partial / source.repo.replace("/", "--")  # kept between runs: a rerun resumes
    try:
        jobs = [Job(file_url(_endpoint(), source.repo, listing.sha, p), listing.files[p], inside(local, p), partial / ".parts") for p in wanted]
    except UnsafeListing as e:
        raise _unsafe(source.repo, e) from e
    size = sum(j.file.size or 0 for j in jobs)
    status(f"{where}@{listing.sha[:12]}: {len(wanted)} file{'s' if len(wanted) != 1 else ''}, {byte_size(size)}")
    return _Fetched(source, local, wanted, listing.sha), jobs


def _unsafe(repo: str, e: Exception) -> Unavailable:
    """The error for a listing koe refuses (koe.service.store.download.UnsafeListing): nothing was written."""
    return Unavailable(
        f"refused the listing of {repo} from {_endpoint()}: {e}; no file was written or removed",
        hint="a hub or mirror you trust? check HF_ENDPOINT (unset: huggingface.co)",
    )


def _network_error(e: Exception) -> bool:
    from huggingface_hub.errors import OfflineModeIsEnabled

    from koe.service.store.download import http_client

    return isinstance(e, (http_client().TransportError, OfflineModeIsEnabled, OSError))


def byte_size(n: float) -> str:
    """Bytes (or bytes per second) for a person: 2.4 GB, 512 MB, 3 KB (decimal units, as the hub shows sizes)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _download(jobs: list, fetched: list[_Fetched], token: str | None, connect_timeout: float, status, on_progress) -> None:
    """Fetch every job (resuming), then say how much came; koe errors for what went wrong."""
    from huggingface_hub.errors import HfHubHTTPError

    from koe.service.store.download import Cancelled, ChecksumMismatch, Transfer, hub_headers

    transfer = Transfer(jobs, hub_headers(token), connect_timeout=max(connect_timeout, 10.0), on_progress=on_progress)
    repos = ", ".join(dict.fromkeys(f.source.repo for f in fetched))
    try:
        need = transfer.prepare()
        kept = transfer.total - need
        status(f"downloading {byte_size(need)} from {repos}" + (f" ({byte_size(kept)} already here)" if kept > 0 else ""))
        started = time.monotonic()
        transfer.run()
    except ChecksumMismatch as e:
        raise InvalidRequest(f"{e}; run pull again to fetch it anew") from e
    except (Cancelled, KeyboardInterrupt):
        status(f"stopped; {byte_size(transfer.done)} of {byte_size(transfer.total)} kept: run the same command again to resume")
        raise
    except HfHubHTTPError as e:
        code = getattr(e.response, "status_code", None)
        if code in (401, 403, 404):
            raise NotFound(f"the hub refused a file of {repos} ({code}): {str(e).splitlines()[0]}", hint="does it need a token? (--token or HF_TOKEN)") from e
        answer = f"{code} {getattr(e.response, 'reason_phrase', '')}".strip()
        raise Unavailable(f"download from {repos} failed: the hub answered {answer}", hint=_resume_hint(transfer)) from e
    except OSError as e:
        if e.errno == 28:
            raise StorageError(f"{e.strerror}", hint="free some space (or set KOE_HOME to a bigger disk), then pull again") from e
        raise Unavailable(f"download from {repos} failed: {e}", hint=_resume_hint(transfer)) from e
    except Exception as e:
        if not _network_error(e):
            raise
        raise Unavailable(f"download from {repos} failed: {e}", hint=_resume_hint(transfer)) from e
    took = time.monotonic() - started
    status(f"downloaded {byte_size(transfer.fetched)} in {took:.1f} s, {byte_size(transfer.fetched / max(took, 1e-6))}/s; checksums verified")


def _resume_hint(transfer) -> str:
    return f"run the same command again to resume ({byte_size(transfer.done)} of {byte_size(transfer.total)} are kept)"


def _place(fetched: _Fetched, folder: Path) -> None:
    """Put a source's files into the model folder being built (hard links to the downloads, or
    unpacked: koe.service.store.archive.place_file); every path is checked to stay inside its folder."""
    from koe.service.store.archive import place_file
    from koe.service.store.download import inside

    for rfilename in fetched.files:
        place_file(fetched.source, rfilename, inside(fetched.local, rfilename), folder, _hard_link)


def _hard_link(source: Path, target: Path) -> None:
    if target.exists() or target.is_symlink():
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def refused_archive(release, e: Exception, cached: bool = False):
    """The error for an archive of `release` koe does not unpack, downloaded (or in the Hugging Face
    cache, `cached`): refused as unsafe (koe.service.store.archive.UnsafeArchive), or no zip at all."""
    where = "in the Hugging Face cache" if cached else f"from {_endpoint()}"
    if isinstance(e, BadZipFile):
        return InvalidRequest(f"an archive of {release.ref} {where} is not a zip koe can read ({e}); nothing was installed")
    return Unavailable(
        f"refused an archive of {release.repo_id} {where}: {e}; nothing was installed",
        hint="a hub, mirror or cache you trust? check HF_ENDPOINT (unset: huggingface.co)" + (" and HF_HUB_CACHE" if cached else ""),
    )


def pull_model(
    store: ModelStore,
    repo_id: str,
    *,
    arch: str | None = None,
    name: str | None = None,
    revision: str | None = None,
    token: str | None = None,
    overwrite: bool = False,
    connect_timeout: float = 3.0,
    on_status: Callable[[str], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    accept_license: bool = False,
    ask_license: Callable[[License, ReleasedModel], bool] | None = None,
    license_hint: str | None = None,
) -> ModelDetails:
    """Download `repo_id` (e.g. "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice") into the store as `name`.

    A release a family lists (`ReleasedModel`) is fetched as it says: some files of a repo's
    subfolder, and files from other repos (a vocoder), then completed by the family's spec for
    its architecture (`arch`, or the release's: a config written for it). `repo_id` may be such a
    release's own id (e.g. "OWNER/NAME/SUBFOLDER"); a repo that holds several releases needs
    `arch` to pick one. Any other repo is fetched whole. `revision` applies to `repo_id`'s repo.

    Every repo is listed first (its commit, each file's size and checksum), then all files are
    fetched together (koe.service.store.download): `on_status(text)` hears each step (with the sizes
    before any byte is fetched), `on_progress(done, total)` the bytes of the whole release (those
    already on disk from an interrupted run count as done). The store row's origin records each
    repo's commit: "hub:REPO[/SUBFOLDER]@SHA" joined by " + ".

    A release whose licence needs acceptance (`ReleasedModel.license`) is pulled only once the
    licence is accepted in this store (`koe.service.store.licenses`): accepted earlier,
    `accept_license=True`, or `ask_license(license, release)` answering True (`koe models pull`
    asks on a terminal); each of the last two records it. Else `LicenseNotAccepted` (403), raised
    before anything is looked up or downloaded, with `license_hint` (default: the CLI flag and this
    argument) saying how to accept it.

    Raises `LicenseNotAccepted` as said above, `Unavailable` offline or when the hub fails mid-way (the bytes so far are kept),
    `NotFound` for an unknown repo, revision or file, `InvalidRequest` for a release koe does not
    run, or if what arrived is not a model koe runs or a checksum fails. Nothing is installed until
    the folder is complete and valid; the downloads are kept (hidden) until then, so a rerun resumes,
    from the last byte of each file.
    """
    from koe.service.store.models import build_release_folder

    spec, release = release_for((repo_id or "").strip(), arch)
    name = check_name(name, "model") if name else release_name(release)
    dest = store.root / name
    if (dest.exists() or store.db.get_model(name) is not None) and not overwrite:
        raise AlreadyExists(f"model {name!r} is already installed", hint="pass --overwrite or --name")
    status = on_status or (lambda msg: log.info(msg))
    hint = offline_hint(release)
    check_hub_reachable(connect_timeout, release.repo_id, hint=hint)
    try:
        import huggingface_hub  # noqa: F401
    except ImportError as e:
        raise Unavailable("huggingface_hub is not installed", hint="pip install huggingface_hub") from e

    accept_release_license(store.licenses, release, accept=accept_license, ask=ask_license, hint=license_hint)  # before any byte
    partial = store.root / f".{name}.partial"  # kept between runs: a rerun resumes
    looked = [_look_up(h, partial, revision if h.repo == release.repo_id else None, token, hint, status) for h in release.sources]
    fetched = [f for f, _ in looked]
    jobs = {j.dest: j for _, found in looked for j in found}  # a file two sources of one repo name is fetched once
    _download(list(jobs.values()), fetched, token, connect_timeout, status, on_progress)
    status(f"assembling {name}")
    from koe.service.store.archive import UnsafeArchive
    from koe.service.store.download import UnsafeListing

    try:
        build_release_folder(dest, release, spec, lambda tmp: [_place(f, tmp) for f in fetched], replace=overwrite)
    except UnsafeListing as e:
        raise _unsafe(release.repo_id, e) from e
    except (UnsafeArchive, BadZipFile) as e:
        raise refused_archive(release, e) from e
    except OSError as e:
        raise StorageError(f"cannot install {release.ref} as {name!r}: {e}") from e
    remove_tree(partial)
    fsync_dir(store.root)
    origin = " + ".join(f"hub:{f.source.key}@{f.sha}" for f in fetched)
    return store.register(name, origin)
