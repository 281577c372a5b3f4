"""One model resolver: what a `--model`, `koe.load(...)`, the server's `model` field or a drop-in's
`from_pretrained(...)` names, turned into a model folder koe runs (torch-free).

For a string `spec`, in this order:

1. nothing: the configured default, else the only installed model;
2. a store name: the store's folder (a name wins over a same-named relative folder);
3. an existing folder path: that folder (refused for a client's request, `allow_paths=False`:
   a client names models, never this machine's folders, and such a name touches no file);
4. a hub id, `OWNER/NAME` or a release id a family lists (`SWivid/F5-TTS/F5TTS_v1_Base`):
   a. a store model pulled from it earlier (the store row's `origin`, "hub:REPO[/SUB]@SHA + ..."),
   b. the Hugging Face cache, read as huggingface_hub lays it out (`HF_HUB_CACHE`, `HF_HOME`,
      read when called): a release koe runs as it is (one repo: Qwen3-TTS, VoxCPM) is used
      from its snapshot folder, no copy; a release spanning several repos (F5-TTS: a checkpoint
      repo's subfolder + the Vocos repo) is assembled into the store from the cached files (hard
      links where the file system allows) with what its family's spec writes, and registered
      with its origin, so the next call finds it at (a);
   c. a download (`koe.service.store.hub.pull_model`) when the caller allows one and the hub is
      reachable; never when `HF_HUB_OFFLINE` is set. A client's request (`allow_paths=False`)
      may only download a release a family lists, never an arbitrary repo;
   d. else `Unavailable`: one message saying what was looked for, where, why nothing was
      downloaded, and the command to run; for an id no family lists that is close to one that
      is listed (a typo), `NotFound` naming that release instead.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from koe.service.errors import InvalidRequest, NotFound, StorageError, Unavailable
from koe.service.names import MAX_NAME_LENGTH, check_name, close_matches, did_you_mean, slug

if TYPE_CHECKING:
    from koe.engines.spec import FamilySpec, HubFiles, ReleasedModel
    from koe.service.config.settings import Settings
    from koe.service.store.models import ModelRef, ModelStore

log = logging.getLogger(__name__)

_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_HUB_ID = re.compile(rf"{_SEGMENT}/{_SEGMENT}(?:/{_SEGMENT})*")
_MAX_HUB_ID = 200
_TRUE = ("1", "on", "yes", "true")


# -- what a string is ------------------------------------------------------------------------------
def is_hub_id(text: str) -> bool:
    """`OWNER/NAME` or `OWNER/NAME/SUBFOLDER...` as the hub spells repo ids (no `..`, no leading
    `.`, `/` or `~`, no backslash): what a client may name besides a store name."""
    return isinstance(text, str) and len(text) <= _MAX_HUB_ID and ".." not in text and _HUB_ID.fullmatch(text) is not None


def looks_like_path(text: str) -> bool:
    """A string a user means as a folder path: a separator in it, or `.`/`~` in front."""
    return os.sep in text or bool(os.altsep and os.altsep in text) or text.startswith((".", "~")) or os.path.isabs(text)


def _is_name(text: str) -> bool:
    try:
        check_name(text, "model")
    except InvalidRequest:
        return False
    return True


# -- the Hugging Face cache, as huggingface_hub reads it -------------------------------------------
def hub_cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The Hugging Face hub cache folder now: `override`, else `HF_HUB_CACHE`, the legacy
    `HUGGINGFACE_HUB_CACHE`, `HF_HOME/hub`, `$XDG_CACHE_HOME/huggingface/hub`, `~/.cache/huggingface/hub`
    (huggingface_hub's own order; read on each call, not at import as `huggingface_hub.constants` does)."""
    env = os.environ
    if override:
        return Path(os.path.expandvars(os.fspath(override))).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    path = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(path)))


def hub_offline() -> bool:
    """`HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) is set: the hub is never contacted."""
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@dataclass(frozen=True)
class CachedRepo:
    """A repo's snapshot in the Hugging Face cache: its folder (`snapshots/<sha>`), commit and files."""

    repo: str
    folder: Path
    sha: str

    def files(self) -> list[str]:
        """Repo paths (POSIX) of the snapshot's files whose blobs are there (a dangling link is not a file)."""
        return sorted(p.relative_to(self.folder).as_posix() for p in self.folder.rglob("*") if p.is_file())

    def blob(self, path: str) -> Path:
        """The file the snapshot's `path` is (its links followed), which must lie in the repo's own
        cache folder (`models--OWNER--NAME`, where huggingface_hub keeps its blobs): a link that points
        anywhere else is `StorageError`, so nothing outside the cache is read, linked or copied."""
        storage = self.folder.parent.parent.resolve()
        target = (self.folder / path).resolve()
        if not target.is_relative_to(storage):
            raise StorageError(
                f"the Hugging Face cache's copy of {self.repo} has {path} linking outside the cache ({target}); not used",
                hint=f"remove that snapshot ({self.folder}) or the whole repo from the cache, then fetch it again",
            )
        return target


def cached_repo(repo: str, cache_dir: str | os.PathLike | None = None, patterns: list[str] | None = None) -> CachedRepo | None:
    """`repo`'s snapshot at `main` in the Hugging Face cache, as `snapshot_download(...,
    local_files_only=True)` finds it (refs/main -> snapshots/<sha>; a snapshot its cached file
    listing shows incomplete for `patterns` is refused); None when it is not there."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    cache = hub_cache_dir(cache_dir)
    if not cache.is_dir():
        return None
    try:
        folder = Path(snapshot_download(repo, cache_dir=str(cache), local_files_only=True, allow_patterns=patterns))
    except Exception:  # noqa: BLE001 - LocalEntryNotFoundError, IncompleteSnapshotError, a malformed cache: all are "not cached"
        return None
    if not folder.is_dir() or folder.parent.name != "snapshots":
        return None
    hit = CachedRepo(repo, folder, folder.name)
    for path in hit.files():
        hit.blob(path)  # every file's link stays in the repo's own cache folder
    return hit


# -- releases ----------------------------------------------------------------------------------------
def release_for(ref: str, arch: str | None = None) -> tuple[FamilySpec | None, ReleasedModel]:
    """(spec, release) a hub id means (with `arch`: `koe models pull ID --arch NAME`): a release a
    family lists (`find_release`), else the whole repo `OWNER/NAME` (spec None). `InvalidRequest`
    for a release koe does not run, a repo holding several releases (naming their ids), or an id
    that is neither."""
    from koe.engines import registry
    from koe.engines.spec import ReleasedModel, SpecError, find_release

    param = "arch" if arch else "model"
    try:
        found = find_release(registry.specs(), ref, arch)
    except SpecError as e:
        raise InvalidRequest(str(e), hint=_listed_hint(ref), param=param) from e
    if found is not None:
        return found
    if ref.count("/") != 1 or any(not part for part in ref.split("/")):
        raise InvalidRequest(f"hub id {ref!r} is no release koe knows and should look like OWNER/NAME", hint=_listed_hint(ref), param=param)
    return None, ReleasedModel(ref, "", "")


def release_name(release: ReleasedModel) -> str:
    """The store name a release installs as by default: its own name, else the hub id's last part."""
    return slug(release.name or release.ref.split("/")[-1])


def listed_ids() -> list[str]:
    """The hub ids of every release koe runs (what `server.pull_models` lets a request download)."""
    from koe.engines import registry

    return [r.ref for s in registry.specs() for r in s.released if not r.unsupported]


def close_release(ref: str) -> str | None:
    """The release id koe runs that `ref`, an id no family lists, is most likely a typo of (None when none is close)."""
    close = close_matches(ref, listed_ids(), n=1, cutoff=0.9)
    return close[0] if close else None


def _not_a_release(ref: str, close: str) -> NotFound:
    """The short answer for a hub id that is nowhere here and is close to a release koe runs: that
    release, not the hub's state nor a pull of the typo."""
    return NotFound(f"no model {ref!r} here, and it is no release koe knows", hint=did_you_mean([close]), param="model")


def _listed_hint(ref: str) -> str | None:
    from koe.engines import registry

    repo = "/".join(ref.split("/")[:2]).lower()
    ids = [r.ref for s in registry.specs() for r in s.released if not r.unsupported and r.repo_id.lower() == repo]
    return f"koe runs: {', '.join(ids)}" if ids else None


def _runs_as_is(release: ReleasedModel) -> bool:
    """A release whose one repo is a complete model folder (nothing to pick, move or write)."""
    (main, *rest) = release.sources
    return not rest and not main.subfolder and not main.dest and not release.arch


# -- the resolver ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Downloads:
    """May a hub id that is not here be downloaded? `why_not` says why not, for the message;
    `listed_only`: only a release a family lists (a client's request, never an arbitrary repo);
    `accept_license`: the caller accepts the licence of a release that needs acceptance
    (`koe.load(..., accept_license=True)`; a client's request never does)."""

    allowed: bool
    why_not: str = ""
    listed_only: bool = False
    accept_license: bool = False


def downloads_for(settings: Settings | None, *, client: bool) -> Downloads:
    """The download policy `settings` set: `models.download` for the CLI and the Python API; a
    client's request (the server) downloads only with `server.pull_models`, and only releases a
    family lists. No settings: the defaults (download yes, the server no)."""
    download = settings.models.download if settings is not None else True
    pull = settings.server.pull_models if settings is not None else False
    if not download:
        return Downloads(False, "downloads are off (models.download = false, KOE_MODELS__DOWNLOAD)", client)
    if client and not pull:
        return Downloads(False, "this server does not download models (server.pull_models = false)", True)
    return Downloads(True, listed_only=client)


def resolve_model(
    store: ModelStore,
    spec: str | os.PathLike | None,
    default: str | None = None,
    *,
    allow_paths: bool = True,
    downloads: Downloads = Downloads(True),
    cache_dir: str | os.PathLike | None = None,
    on_status: Callable[[str], None] | None = None,
) -> ModelRef:
    """The model `spec` means, in the order of the module doc. Raises `InvalidRequest`, `NotFound`
    or `Unavailable` saying what to do instead.

    `allow_paths=False` (a client's request) refuses anything but a store name or a hub id in
    `spec` before looking at a file; `default` is the operator's and may be a path."""
    from koe.service.store.models import detect_model

    given = spec is not None and str(spec).strip() != ""
    s = str(os.fspath(spec) if given else (default or "")).strip()
    if given and not allow_paths and not (_is_name(s) or is_hub_id(s)):
        raise InvalidRequest("model must be an installed model's name or a hub id (OWNER/NAME), not a folder path", param="model")
    if not s:
        return _only_installed(store)
    paths = allow_paths or not given  # the operator's default may be a folder
    if paths and not (_is_name(s) and store.db.get_model(s) is not None):  # a store name wins over a same-named folder
        if Path(s).expanduser().is_dir() or (looks_like_path(s) and not is_hub_id(s)):
            return detect_model(s)  # NotFound names a folder that is not there
    if is_hub_id(s):
        operators = Downloads(downloads.allowed, downloads.why_not, accept_license=downloads.accept_license)  # the operator's: any repo
        return _from_hub(store, s, downloads if given else operators, cache_dir, on_status)
    return store.get(s).ref  # a typo's NotFound says "did you mean"


def _only_installed(store: ModelStore) -> ModelRef:
    installed = store.list()
    if len(installed) == 1:
        return installed[0].ref
    raise InvalidRequest(
        "no model given and no default set",
        hint="pass --model NAME|PATH|HUB_ID, or set models.default in koe.toml / KOE_MODELS__DEFAULT"
        + (f"; installed: {', '.join(d.ref.name for d in installed)}" if installed else "; `koe demo` builds a test model"),
        param="model",
    )


def pulled_from(store: ModelStore, release: ReleasedModel) -> ModelRef | None:
    """The store model pulled (or assembled from the cache) from `release` earlier, if any: the
    one whose origin's first source is the release's first source."""
    want = release.sources[0].key.lower()
    for row in store.db.list_models():
        first = (row.origin or "").split(" + ")[0]
        if first.startswith("hub:") and first[4:].rpartition("@")[0].lower() == want and (store.root / row.name).is_dir():
            return store.get(row.name).ref
    return None


def _from_hub(store: ModelStore, ref: str, downloads: Downloads, cache_dir, on_status) -> ModelRef:
    from koe.service.fsio import path_lock

    spec, release = release_for(ref)
    found = pulled_from(store, release)
    if found is not None:
        return found
    cache = hub_cache_dir(cache_dir)
    hit = _from_cache(store, spec, release, cache)
    if isinstance(hit, _Assemble):
        with path_lock(store.root):  # one assembly at a time; another may have just done it
            return pulled_from(store, release) or _assemble(store, spec, release, hit)
    if not isinstance(hit, str):
        return hit
    close = close_release(ref) if spec is None else None
    if downloads.listed_only and spec is None:
        if close:
            raise _not_a_release(ref, close)
        raise NotFound(
            f"no model {ref!r} here (not in the store nor in the Hugging Face cache), and a request may only download a release koe lists",
            hint=f"koe lists: {', '.join(listed_ids())}",
            param="model",
        )
    why = _why_not(downloads)
    if why:
        raise _not_a_release(ref, close) if close else _unavailable(release, cache, hit, why, client=downloads.listed_only)
    with path_lock(store.root):  # one download at a time into this store
        found = pulled_from(store, release)
        if found is not None:
            return found
        return _download(store, release, cache, hit, on_status, close, downloads)


def _why_not(downloads: Downloads) -> str:
    """Why nothing is downloaded now ("" when it may be)."""
    if not downloads.allowed:
        return downloads.why_not or "downloads are off"
    if hub_offline():
        return "HF_HUB_OFFLINE is set, so the Hugging Face hub is not used"
    return ""


def _unavailable(release: ReleasedModel, cache: Path, missing: str, why: str, *, client: bool = False) -> Unavailable:
    """The one message for a hub id that is nowhere here and is not downloaded now: what, where, why
    not, and the command to run (for a client's request: what the server's operator can do)."""
    from koe.service.store.hub import offline_hint

    if client:
        hint = f"on the server, `koe models pull {release.ref}` installs it (or server.pull_models = true lets requests download it)"
    else:
        hint = f"run `koe models pull {release.ref}` where the hub is reachable; or, {offline_hint(release)}"
    return Unavailable(f"{release.ref} is in neither the model store nor the Hugging Face cache ({cache}; {missing}), and {why}", hint=hint, param="model")


def _download(
    store: ModelStore, release: ReleasedModel, cache: Path, missing: str, on_status, close: str | None = None, downloads: Downloads = Downloads(True)
) -> ModelRef:
    """Pull `release` into the store. `close`: the release koe runs that an unlisted id is near, named
    instead when the hub cannot be reached or has no such repo (the typo, not the hub, is the news).
    A licence that needs acceptance must have been accepted in the store, or be accepted by
    `downloads.accept_license` (never by a client's request): else `LicenseNotAccepted`, first."""
    from koe.service.store.hub import check_hub_reachable, pull_model
    from koe.service.store.licenses import accept_release_license

    hint = None
    if downloads.listed_only:
        hint = f"a request cannot accept a licence: on the server, `koe models pull {release.ref}` asks for it (--accept-license accepts it)"
    elif not downloads.accept_license:
        hint = f"`koe models pull {release.ref}` asks for it (--accept-license accepts it); Python: koe.load(..., accept_license=True)"
    accept_release_license(store.licenses, release, accept=downloads.accept_license and not downloads.listed_only, hint=hint)
    try:
        check_hub_reachable(3.0, release.repo_id)
    except Unavailable as e:
        raise (_not_a_release(release.ref, close) if close else _unavailable(release, cache, missing, f"the hub cannot be reached ({e.message})")) from e
    name = free_name(store, release)
    news = f"{release.ref} is not in the model store or the Hugging Face cache: downloading it into {store.root / name}"
    if on_status is not None:
        on_status(news)
    else:
        log.warning(news)  # nobody is told the steps: the log says a download happens
    try:
        return pull_model(store, release.ref, name=name, on_status=on_status, on_progress=store.on_progress, accept_license=True).ref  # accepted above
    except NotFound as e:
        if close:
            raise _not_a_release(release.ref, close) from e
        raise


def free_name(store: ModelStore, release: ReleasedModel) -> str:
    """The store name for `release`: its own (the hub id's last part), with -2, -3, ... when taken."""
    base = release_name(release)
    name, n = base, 1
    while store.db.get_model(name) is not None or (store.root / name).exists() or (store.root / name).is_symlink():
        n += 1
        name = f"{base[: MAX_NAME_LENGTH - len(str(n)) - 1]}-{n}"
    return name


# -- from the cache ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Assemble:
    """Every source of a multi-repo release found in the cache: (source, snapshot, repo paths)."""

    parts: tuple[tuple[HubFiles, CachedRepo, tuple[str, ...]], ...]


def _from_cache(store: ModelStore, spec, release: ReleasedModel, cache: Path) -> ModelRef | _Assemble | str:
    """The release from the cache: a ModelRef (used in place), an `_Assemble` plan, or a string
    saying what the cache lacks."""
    from koe.engines.registry import UnknownModelError, describe
    from koe.engines.spec import SpecError
    from koe.service.store.models import ModelRef

    if _runs_as_is(release):
        hit = cached_repo(release.repo_id, cache)
        if hit is None:
            return f"no {release.repo_id}"
        try:
            d = describe(hit.folder)
        except (UnknownModelError, SpecError, OSError) as e:
            return f"its copy of {release.repo_id} is not a model koe runs ({str(e).replace(str(hit.folder), 'snapshot')})"
        if d.missing:
            return f"its copy of {release.repo_id} lacks {', '.join(d.missing)}"
        info = d.info
        return ModelRef(release.name or release.repo_id.split("/")[-1], hit.folder, info.family, info.variant, info.size)
    parts, lacking = [], []
    for source in release.sources:
        patterns = source.patterns()
        hit = cached_repo(source.repo, cache, patterns)
        if hit is None:
            lacking.append(f"no {source.key}")
            continue
        picked, absent = _pick(hit.files(), patterns)
        if absent:
            lacking.append(f"{source.repo} lacks {', '.join(absent)}")
            continue
        parts.append((source, hit, tuple(picked)))
    if lacking:
        return "; ".join(lacking)
    return _Assemble(tuple(parts))


def _pick(files: list[str], patterns: list[str] | None) -> tuple[list[str], list[str]]:
    """(files `patterns` select, the plain names among them that are absent); all files when None.
    A list with globs must match at least one file, as a pull requires."""
    from huggingface_hub.utils import filter_repo_objects

    if patterns is None:
        return files, ([] if files else ["any file"])
    picked = list(filter_repo_objects(files, allow_patterns=patterns))
    if any(c in p for p in patterns for c in "*?["):
        return picked, ([] if picked else [" or ".join(patterns)])
    return picked, [p for p in patterns if p not in files]


def _assemble(store: ModelStore, spec, release: ReleasedModel, plan: _Assemble) -> ModelRef:
    """Build the release's koe folder in the store from the cached files (hard links, else symbolic
    links to the blobs, else copies), completed by its family's spec, validated and registered."""
    from zipfile import BadZipFile

    from koe.service.store.archive import UnsafeArchive, place_file
    from koe.service.store.hub import refused_archive
    from koe.service.store.models import build_release_folder

    name = free_name(store, release)

    def place(tmp: Path) -> None:
        for source, hit, files in plan.parts:
            for rfilename in files:
                place_file(source, rfilename, hit.blob(rfilename), tmp, _link)

    try:
        build_release_folder(store.root / name, release, spec, place)
    except (UnsafeArchive, BadZipFile) as e:
        raise refused_archive(release, e, cached=True) from e
    except OSError as e:
        raise StorageError(f"cannot install {release.ref} from the Hugging Face cache as {name!r}: {e}") from e
    origin = " + ".join(f"hub:{source.key}@{hit.sha}" for source, hit, _ in plan.parts)
    log.info("%s assembled from the Hugging Face cache into %s", release.ref, store.root / name)
    return store.register(name, origin).ref


def _link(blob: Path, target: Path) -> None:
    """`target` as a hard link to a cached file's blob (`CachedRepo.blob`); a symbolic link or a copy where that fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(blob, target)
        return
    except OSError:
        pass
    try:
        os.symlink(blob, target)
    except OSError:
        shutil.copy2(blob, target)


# -- for koe.load and the drop-ins --------------------------------------------------------------------
def is_folder_spec(spec: str | os.PathLike) -> bool:
    """`spec` means a folder as it is (a `PathLike`, or a path-like string that is a folder or no hub
    id), so `koe.load` and the drop-ins load it without opening KOE_HOME, as they always did."""
    if isinstance(spec, os.PathLike):
        return True
    s = str(spec)
    return looks_like_path(s) and (Path(s).expanduser().is_dir() or not is_hub_id(s))


def model_folder(spec: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None, local_files_only: bool = False, accept_license: bool = False) -> Path:
    """The folder `koe.load(spec)` or a drop-in's `from_pretrained(spec)` loads: a folder spec as it
    is (`is_folder_spec`), else what the resolver makes of `spec` with the store of KOE_HOME
    (`KoeHome.open()`, its settings): a store name, a hub id pulled into the store, the Hugging Face
    cache (`cache_dir`: a drop-in's `cache_dir=`), or a download when `models.download` allows
    and `local_files_only` is not set; a release whose licence needs acceptance is downloaded only
    once it is accepted (earlier, in the store, or now: `accept_license=True`)."""
    if is_folder_spec(spec):
        return Path(os.fspath(spec)).expanduser()
    from koe.service.home import KoeHome

    home = KoeHome.open()
    bar = _TqdmBytes()
    home.models.on_progress = bar
    try:
        downloads = Downloads(False, "local_files_only=True was passed") if local_files_only else downloads_for(home.settings, client=False)
        downloads = replace(downloads, accept_license=accept_license)
        return home.models.resolve(str(spec), download=downloads, cache_dir=cache_dir).path
    finally:
        bar.close()
        home.close()


class _TqdmBytes:
    """`on_progress(done, total)` for a download the Python API starts (`koe.load("OWNER/NAME")`,
    `from_pretrained`): a tqdm byte bar on stderr, as huggingface_hub draws its own
    (`HF_HUB_DISABLE_PROGRESS_BARS=1` turns it off). tqdm comes with huggingface_hub."""

    def __init__(self) -> None:
        self._bar = None

    def __call__(self, done: int, total: int) -> None:
        if os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "").strip().lower() in _TRUE:
            return
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total or None, initial=done, unit="B", unit_scale=True, unit_divisor=1000, desc="downloading")
        if total and self._bar.total != total:
            self._bar.total = total
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
