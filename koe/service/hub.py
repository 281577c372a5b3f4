"""`koe models pull`: download a model from the Hugging Face hub into the store.

Online: `huggingface_hub.snapshot_download` into a hidden partial folder under `models/` (a rerun
resumes the files already there), then every LFS file's SHA-256 is checked against the hub's, the
folder is validated as a model and renamed into place. Offline (no DNS / no route / HF_HUB_OFFLINE):
fails within `connect_timeout` seconds with a message saying how to use a local folder instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, Unavailable
from koe.service.fsio import fsync_dir, remove_tree
from koe.service.models import ModelDetails, ModelStore, detect_model, inspect_model
from koe.service.names import check_name, slug

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_HINT = (
    "download the model folder on a machine that is online (e.g. `huggingface-cli download {repo} --local-dir DIR`), "
    "copy it here, then `koe models import DIR` or pass `--model DIR`"
)


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def check_hub_reachable(timeout: float = 3.0, repo_id: str = "ID") -> None:
    """Raise `Unavailable` (fast) when the hub cannot be reached: offline mode, no DNS, no route."""
    hint = OFFLINE_HINT.format(repo=repo_id)
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


def pull_model(
    store: ModelStore,
    repo_id: str,
    *,
    name: str | None = None,
    revision: str | None = None,
    token: str | None = None,
    overwrite: bool = False,
    connect_timeout: float = 3.0,
    on_status: Callable[[str], None] | None = None,
) -> ModelDetails:
    """Download `repo_id` (e.g. "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice") into the store as `name`.

    Progress bars are huggingface_hub's own (on stderr). Raises `Unavailable` offline, `NotFound`
    for an unknown repo, `InvalidRequest` if what arrived is not a model koe runs or a checksum fails.
    """
    if not repo_id or repo_id.count("/") != 1 or any(not p for p in repo_id.split("/")):
        raise InvalidRequest(f"hub id {repo_id!r} should look like OWNER/NAME, e.g. Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")
    name = check_name(name, "model") if name else slug(repo_id.split("/")[-1])
    dest = store.root / name
    if (dest.exists() or store.db.get_model(name) is not None) and not overwrite:
        raise AlreadyExists(f"model {name!r} is already installed", hint="pass --overwrite or --name")
    status = on_status or (lambda msg: log.info(msg))
    check_hub_reachable(connect_timeout, repo_id)

    try:
        from huggingface_hub import HfApi, snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
    except ImportError as e:
        raise Unavailable("huggingface_hub is not installed", hint="pip install huggingface_hub") from e

    partial = store.root / f".{name}.partial"  # kept between runs: a rerun resumes
    try:
        status(f"looking up {repo_id} on {_endpoint()}")
        info = HfApi(endpoint=_endpoint()).model_info(repo_id, revision=revision, files_metadata=True, token=token, timeout=30)
        status(f"downloading {repo_id}@{(info.sha or revision or 'main')[:12]} into {partial}")
        snapshot_download(repo_id, revision=info.sha or revision, local_dir=partial, token=token, endpoint=_endpoint())
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise NotFound(f"no model {repo_id!r}{'@' + revision if revision else ''} on the hub (or it needs a token)") from e
    except HfHubHTTPError as e:
        raise Unavailable(f"the hub refused the download of {repo_id}: {e}", hint=OFFLINE_HINT.format(repo=repo_id)) from e
    except OSError as e:
        raise Unavailable(f"download of {repo_id} failed: {e}", hint="run the same command again to resume") from e

    status("verifying checksums")
    for sibling in info.siblings or []:
        lfs = getattr(sibling, "lfs", None)
        expected = getattr(lfs, "sha256", None) if lfs is not None else None
        local = partial / sibling.rfilename
        if expected and local.is_file():
            actual = _sha256(local)
            if actual != expected:
                local.unlink()
                raise InvalidRequest(f"checksum mismatch for {sibling.rfilename} (got {actual[:12]}, hub says {expected[:12]}); run pull again to fetch it anew")
    ref = detect_model(partial, name)
    details = inspect_model(ref)
    if details.missing:
        raise InvalidRequest(f"{repo_id} is not a complete model folder: missing {', '.join(details.missing)}")
    for leftover in (partial / ".cache",):
        if leftover.is_dir():
            remove_tree(leftover)
    if dest.exists() or dest.is_symlink():
        remove_tree(dest)
    os.replace(partial, dest)
    fsync_dir(store.root)
    return store.register(name, f"hub:{repo_id}@{info.sha or revision or 'main'}")
