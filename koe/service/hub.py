"""`koe models pull`: download a model from the Hugging Face hub into the store.

Online: `huggingface_hub.snapshot_download` of each repo a release spans (the whole repo, or the
files the family's `ReleasedModel` names: a checkpoint repo's subfolder, a vocoder repo) into a
hidden partial folder under `models/` (a rerun resumes the files already there); every LFS file's
SHA-256 is checked against the hub's; the model folder is built beside its final place from those
files, completed by the family's spec (`assemble`: e.g. the config of the release's architecture),
validated, and renamed into place. Offline (no DNS / no route / HF_HUB_OFFLINE): fails within
`connect_timeout` seconds with a message saying how to get the files by hand instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from koe.engines.spec import HubFiles
from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, StorageError, Unavailable
from koe.service.fsio import atomic_folder, fsync_dir, remove_tree
from koe.service.models import ModelDetails, ModelStore
from koe.service.names import check_name, slug

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
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _release(repo_id: str, arch: str | None):
    """(spec, release) that `koe models pull repo_id [--arch arch]` means; (None, whole repo) for a
    repo no family lists."""
    from koe.engines import registry
    from koe.engines.spec import ReleasedModel, SpecError, find_release

    try:
        found = find_release(registry.specs(), repo_id, arch)
    except SpecError as e:
        raise InvalidRequest(str(e), param="arch" if arch else "model") from e
    if found is not None:
        return found
    if not repo_id or repo_id.count("/") != 1 or any(not p for p in repo_id.split("/")):
        raise InvalidRequest(f"hub id {repo_id!r} should look like OWNER/NAME, e.g. Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")
    return None, ReleasedModel(repo_id, "", "")


def _download_command(source, local_dir: str) -> str:
    files = [posixpath.join(source.subfolder, f) for f in source.files]
    if any(c in f for f in files for c in "*?["):
        what = " --include " + " ".join(f"'{f}'" for f in files)
    else:
        what = "".join(f" {f}" for f in files) or (f" --include '{source.subfolder}/*'" if source.subfolder else "")
    return f"`huggingface-cli download {source.repo}{what} --local-dir {local_dir}`"


def offline_hint(release) -> str:
    """How to get `release` onto this machine by hand: the downloads, then `koe models import`."""
    sources = release.sources
    if len(sources) == 1 and not sources[0].files and not sources[0].subfolder and not release.arch:
        return OFFLINE_HINT.format(repo=release.repo_id)
    main, rest = sources[0], sources[1:]
    if main.dest or any(h.subfolder for h in rest):
        steps = ", ".join(_download_command(h, f"DIR/{h.dest}" if h.dest else "DIR") for h in sources)
        folder = "DIR"
    else:
        folder = posixpath.join("DIR", main.subfolder) if main.subfolder else "DIR"
        steps = ", ".join([_download_command(main, "DIR"), *(_download_command(h, posixpath.join(folder, h.dest)) for h in rest)])
    imports = f"`koe models import {folder}" + (f" --arch {release.arch}`" if release.arch else "`")
    return f"on a machine that is online: {steps}; copy {folder} here, then {imports}"


@dataclass
class _Fetched:
    """One source's files, downloaded into `local` (the repo's paths) at commit `sha`."""

    source: HubFiles
    local: Path
    files: list[str]
    sha: str


def _patterns(source) -> list[str] | None:
    if source.files:
        return [posixpath.join(source.subfolder, f) for f in source.files]
    return [f"{source.subfolder}/*"] if source.subfolder else None


def _fetch(source, partial: Path, revision: str | None, token: str | None, hint: str, status: Callable[[str], None]) -> _Fetched:
    """Download one source's files (resuming what `partial` holds) and check their SHA-256s."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.utils import filter_repo_objects

    where = source.repo + (f"/{source.subfolder}" if source.subfolder else "")
    local = partial / source.repo.replace("/", "--")  # kept between runs: a rerun resumes
    patterns = _patterns(source)
    try:
        status(f"looking up {source.repo} on {_endpoint()}")
        info = HfApi(endpoint=_endpoint()).model_info(source.repo, revision=revision, files_metadata=True, token=token, timeout=30)
        siblings = {s.rfilename: s for s in info.siblings or []}
        wanted = list(filter_repo_objects(list(siblings), allow_patterns=patterns))
        exact = patterns is not None and not any(c in p for p in patterns for c in "*?[")
        absent = [p for p in patterns if p not in siblings] if exact else []
        if absent or not wanted:
            raise NotFound(f"{source.repo}{'@' + revision if revision else ''} has no {', '.join(absent) or where + ' files'} on the hub",
                           hint="is the hub id right? (`koe models pull --help`)")  # fmt: skip
        sha = info.sha or revision or "main"
        status(f"downloading {where}@{sha[:12]} ({len(wanted)} files) into {local}")
        snapshot_download(source.repo, revision=info.sha or revision, local_dir=local, allow_patterns=patterns, token=token, endpoint=_endpoint())
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise NotFound(f"no model {source.repo!r}{'@' + revision if revision else ''} on the hub (or it needs a token)") from e
    except HfHubHTTPError as e:
        raise Unavailable(f"the hub refused the download of {source.repo}: {e}", hint=hint) from e
    except OSError as e:
        raise Unavailable(f"download of {source.repo} failed: {e}", hint="run the same command again to resume") from e

    status(f"verifying checksums ({source.repo})")
    for rfilename in wanted:
        path = local / rfilename
        if not path.is_file():
            raise Unavailable(f"download of {source.repo} is incomplete: {rfilename} is missing", hint="run the same command again to resume")
        lfs = getattr(siblings[rfilename], "lfs", None)
        expected = getattr(lfs, "sha256", None) if lfs is not None else None
        if expected:
            actual = _sha256(path)
            if actual != expected:
                path.unlink()
                raise InvalidRequest(f"checksum mismatch for {rfilename} (got {actual[:12]}, hub says {expected[:12]}); run pull again to fetch it anew")
    return _Fetched(source, local, wanted, sha)


def _place(fetched: _Fetched, folder: Path) -> None:
    """Put a source's files into the model folder being built (hard links to the downloads)."""
    source = fetched.source
    for rfilename in fetched.files:
        rel = PurePosixPath(rfilename)
        if source.subfolder:
            rel = rel.relative_to(source.subfolder)
        target = folder / source.dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()
        try:
            os.link(fetched.local / rfilename, target)
        except OSError:
            shutil.copy2(fetched.local / rfilename, target)


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
) -> ModelDetails:
    """Download `repo_id` (e.g. "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice") into the store as `name`.

    A release a family lists (`ReleasedModel`) is fetched as it says: some files of a repo's
    subfolder, and files from other repos (a vocoder), then completed by the family's spec for
    its architecture (`arch`, or the release's: a config written for it). `repo_id` may be such a
    release's own id (e.g. "OWNER/NAME/SUBFOLDER"); a repo that holds several releases needs
    `arch` to pick one. Any other repo is fetched whole. `revision` applies to `repo_id`'s repo.

    Progress bars are huggingface_hub's own (on stderr). Raises `Unavailable` offline, `NotFound`
    for an unknown repo or file, `InvalidRequest` for a release koe does not run, or if what
    arrived is not a model koe runs or a checksum fails. Nothing is installed until the folder is
    complete and valid; the downloads are kept (hidden) until then, so a rerun resumes.
    """
    from koe.service.models import apply_assembly, plan_assembly, spec_for, validate_folder

    spec, release = _release((repo_id or "").strip(), arch)
    name = check_name(name, "model") if name else slug(release.name or release.ref.split("/")[-1])
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

    partial = store.root / f".{name}.partial"  # kept between runs: a rerun resumes
    fetched = [_fetch(h, partial, revision if h.repo == release.repo_id else None, token, hint, status) for h in release.sources]
    status(f"assembling {name}")
    tmp = None
    try:
        with atomic_folder(dest, replace=overwrite) as tmp:
            for f in fetched:
                _place(f, tmp)
            apply_assembly(tmp, plan_assembly(spec or spec_for(tmp), tmp, release.arch))
            validate_folder(tmp, release.ref)
    except InvalidRequest as e:
        if tmp is not None:  # name the repo, not the temp folder
            e.message = e.message.replace(str(tmp), release.ref)
        raise
    except OSError as e:
        raise StorageError(f"cannot install {release.ref} as {name!r}: {e}") from e
    remove_tree(partial)
    fsync_dir(store.root)
    origin = " + ".join(f"hub:{f.source.repo}{'/' + f.source.subfolder if f.source.subfolder else ''}@{f.sha}" for f in fetched)
    return store.register(name, origin)
