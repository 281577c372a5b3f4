"""The model store: models kept under `KOE_HOME/models/<name>/` (a copy, or a symlink to a folder).

Everything here reads only files (each family's spec reads its configs; safetensors headers): no torch. `resolve` turns a
`--model` argument (a store name, a folder path, a hub id, or nothing for the configured default)
into a `ModelRef` the synthesizer loads (`koe.service.store.resolve` has the order: the store, a folder,
the Hugging Face cache, a download).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from koe.engines.base import Capabilities
from koe.service.errors import AlreadyExists, InvalidRequest, ModelFailed, NotFound, StorageError
from koe.service.fsio import atomic_folder, remove_tree, sweep_leftovers
from koe.service.names import check_name, close_matches, did_you_mean, slug
from koe.service.storage import Database, ModelRow
from koe.service.store.licenses import AcceptedLicenses, origin_license

if TYPE_CHECKING:
    from collections.abc import Callable

    from koe.engines.licenses import License
    from koe.service.config.settings import Settings
    from koe.service.store.resolve import Downloads

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
_SIGNATURE_FILES = 2000  # a model folder holds a few dozen; cap the walk of an odd one
RANDOM_WEIGHTS_NOTE = "RANDOM weights: a test model, it speaks noise, not speech"  # how every listing says it


def size_label(parameters: int) -> str:
    """A parameter count as people write a model's size: "11M", "0.9B", "1.9B", "2.4B" ("" when not known).

    From the count itself, never a config's size tag: a tiny random-weight folder in a release's layout
    keeps the release's tag but not its size."""
    if parameters <= 0:
        return ""
    if parameters >= 500_000_000:
        return f"{parameters / 1e9:.1f}".removesuffix(".0") + "B"
    if parameters >= 1_000_000:
        return f"{round(parameters / 1e6)}M"
    if parameters >= 1_000:
        return f"{round(parameters / 1e3)}K"
    return str(parameters)


def _named_size(tag: str | None) -> tuple[str, float] | None:
    """A family's size tag as people write it, and its parameters: "XbY" -> ("X.YB", X.Y e9), "2B" -> ("2B", 2e9);
    None for what is no size ("base", "")."""
    m = re.fullmatch(r"(\d+)b(\d+)|(\d+(?:\.\d+)?)([MB])", (tag or "").strip())
    if m is None:
        return None
    if m.group(1) is not None:
        text = f"{m.group(1)}.{m.group(2)}"
        return f"{text}B", float(text) * 1e9
    return f"{m.group(3)}{m.group(4)}", float(m.group(3)) * (1e9 if m.group(4) == "B" else 1e6)


@dataclass(frozen=True)
class ModelRef:
    """A model ready to load: its display name, folder, family/variant/size, and a stable cache key."""

    name: str
    path: Path
    family: str
    variant: str
    size: str
    installed: bool = False

    @property
    def key(self) -> str:
        """Stable id of these weights (name + a hash of the folder and its weights' size and mtime).

        Keys the model cache and each voice's prepared prompts, so new weights get new prompts.
        """
        real = self.path.resolve()
        h = hashlib.sha1(str(real).encode())
        for w in sorted(real.glob("*.safetensors")):
            st = w.stat()
            h.update(f"{w.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        return f"{slug(self.name)[:40]}-{h.hexdigest()[:10]}"

    def files_signature(self) -> tuple[tuple[str, int, int], ...]:
        """(relative path, size, mtime) of every file in the folder (symlinks followed): changes when
        any file is replaced, grows or shrinks. The model cache retries a failed load when it does."""
        real = self.path.resolve()
        out = []
        for p in sorted(real.rglob("*"))[:_SIGNATURE_FILES]:
            try:
                st = p.stat()
            except OSError:
                continue  # a dangling link or a file removed meanwhile
            if not p.is_dir():
                out.append((str(p.relative_to(real)), st.st_size, st.st_mtime_ns))
        return tuple(out)

    def relative(self, text: str) -> str:
        """`text` (an error message) with this model folder's absolute path dropped, so it names files
        as `config.json` or `speech_tokenizer/model.safetensors`."""
        roots = {str(self.path.absolute()), str(self.path.resolve())}
        for root in sorted(roots, key=len, reverse=True):
            text = text.replace(root + os.sep, "").replace(root, ".")
        return text


@dataclass(frozen=True)
class ModelDetails:
    """What a model folder holds and needs, read from its files (`capabilities`: its family's answer).

    `random_weights`: the folder is one of koe's random-weight test models (its marker file);
    `license`: the model's licence, as the release it was pulled from declares it, else as its
    family describes the folder (None: not declared)."""

    ref: ModelRef
    weights_bytes: int
    parameters: int
    stored_dtype: str
    speakers: list[str]
    languages: list[str]
    missing: list[str]
    origin: str | None = None
    linked: bool = False
    added_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    capabilities: Capabilities | None = None
    uses: str = ""
    random_weights: bool = False
    license: License | None = None

    @property
    def ok(self) -> bool:
        return not self.missing

    @property
    def size(self) -> str:
        """The model's size as people name it: the release's own ("0.6B", "2B") where the weights agree
        with it (within a factor of two: a released 0.6B Qwen3-TTS holds 0.9 B parameters with its codec),
        else from the parameter count ("11M" for a tiny folder in the 0.6B layout); never a raw tag."""
        named = _named_size(self.ref.size)
        if named and (not self.parameters or 0.5 <= self.parameters / named[1] <= 2):
            return named[0]
        return size_label(self.parameters)

    def memory_bytes(self, dtype: str) -> int:
        """Bytes the weights take in memory at `dtype` (float32 / bfloat16 / float16)."""
        return self.parameters * _DTYPE_BYTES.get(dtype, 4)


def detect_model(folder: str | Path, name: str | None = None) -> ModelRef:
    """A `ModelRef` for a model folder, or `InvalidRequest` saying why it is not one koe runs."""
    from koe.engines.registry import UnknownModelError, detect

    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise NotFound(f"model folder not found: {folder}", param="model")
    try:
        info = detect(folder)
    except UnknownModelError as e:
        raise InvalidRequest(str(e), param="model") from e
    return ModelRef(name or folder.resolve().name, folder, info.family, info.variant, info.size)


def inspect_model(ref: ModelRef) -> ModelDetails:
    """Files, weight size, parameter count and capabilities of a model folder (torch-free).

    A folder whose configs cannot be read raises `InvalidRequest` (a folder the caller named), or
    `ModelFailed` (503) for an installed model: its files broke on the server, not in the request.
    """
    from koe.engines.registry import UnknownModelError, describe
    from koe.engines.spec import SpecError

    try:
        d = describe(ref.path)
    except (UnknownModelError, SpecError, OSError) as e:
        if ref.installed:
            raise ModelFailed(ref.name, ref.relative(str(e)), hint="check or reinstall its files") from e
        if isinstance(e, OSError):
            raise
        raise InvalidRequest(str(e), param="model") from e
    caps = d.capabilities
    return ModelDetails(
        ref=ref,
        weights_bytes=sum(p.stat().st_size for p in d.weight_files if p.is_file()),
        parameters=d.parameters,
        stored_dtype=d.stored_dtype,
        speakers=list(caps.speakers),
        languages=list(caps.languages),
        missing=list(d.missing),
        extra=dict(d.extra or {}),
        capabilities=caps,
        uses=d.uses,
        random_weights=d.random_weights,
        license=d.license,
    )


def import_hint() -> str | None:
    """How to import a checkpoint released without its config (None when no family takes --arch)."""
    from koe.engines import registry
    from koe.engines.spec import known_archs, spec_archs

    if not any(spec_archs(s) for s in registry.specs()):
        return None
    return f"for a checkpoint released without its config, pass --arch NAME (`koe models import DIR --arch NAME`), NAME from {known_archs(registry.specs())}"


def spec_for(folder: Path, arch: str | None = None):
    """The family spec that completes `folder`: the one that knows `arch`, else the one that claims
    the folder. `InvalidRequest` for an unknown or unsupported `arch`, one of another family than
    the folder's, or a folder no family claims (saying how to import it)."""
    from koe.engines import registry
    from koe.engines.spec import SpecError, arch_owner

    try:
        info = registry.detect(folder)
    except registry.UnknownModelError as e:
        if arch is None:
            raise InvalidRequest(str(e), hint=import_hint(), param="model") from e
        info = None
    if arch is None:
        return registry.spec(info.family)
    try:
        owner = arch_owner(registry.specs(), arch)
    except SpecError as e:
        raise InvalidRequest(str(e), param="arch") from e
    if info is not None and info.family != owner.family:
        raise InvalidRequest(f"{folder} holds a {registry.spec(info.family).title} model; {arch} is an architecture of {owner.title}", param="arch")
    return owner


def plan_assembly(spec, folder: Path, arch: str | None = None, vocoder: Path | None = None):
    """What `folder` still needs to be a complete model (the spec's answer); `InvalidRequest` saying
    what is missing and how to supply it."""
    from koe.engines.spec import SpecError, assemble_folder

    try:
        return assemble_folder(spec, folder, arch, vocoder)
    except SpecError as e:
        raise InvalidRequest(str(e), param="arch" if arch else "model") from e


def apply_assembly(folder: Path, assembly) -> None:
    """Write and copy what `plan_assembly` said into `folder` (a temp folder being built)."""
    for rel, text in assembly.write.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for rel, source in assembly.copy.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()
        shutil.copyfile(source, target)


def validate_folder(folder: Path, name: str) -> ModelRef:
    """A `ModelRef` for the folder just built, or `InvalidRequest` if it is not a complete model."""
    ref = detect_model(folder, name)
    details = inspect_model(ref)
    if details.missing:
        raise InvalidRequest(f"{name} is not a complete model folder: missing {', '.join(details.missing)}", param="model")
    return ref


def build_release_folder(dest: Path, release, spec, place: Callable[[Path], None], *, replace: bool = False) -> None:
    """Build the model folder `dest` of a hub `release`: `place(tmp)` puts its files into a hidden
    temp folder, the family's spec completes it (`plan_assembly`: e.g. the config of the release's
    architecture), it is validated and renamed into place. Nothing is left behind on failure; an
    `InvalidRequest` names the release, not the temp folder."""
    tmp = None
    try:
        with atomic_folder(dest, replace=replace) as tmp:
            place(tmp)
            apply_assembly(tmp, plan_assembly(spec or spec_for(tmp), tmp, release.arch))
            validate_folder(tmp, release.ref)
    except InvalidRequest as e:
        if tmp is not None:
            e.message = e.message.replace(str(tmp), release.ref)
        raise


class ModelStore:
    """Installed models: list, import, info, remove, pull, and resolving `--model` arguments.

    `settings` set the download policy of `resolve` (`models.download`, `server.pull_models`);
    without them the defaults hold (download on first use; a client's request never downloads).
    `on_status(text)` hears a first-use download's steps (default: the log), `on_progress(done,
    total)` its bytes (as `koe.service.store.hub.pull_model` reports them). `licenses`: the model
    licences accepted in this store (`koe.service.store.licenses`)."""

    def __init__(self, root: str | Path, db: Database, *, settings: Settings | None = None) -> None:
        self.root = Path(root)
        self.db = db
        self.settings = settings
        self.on_status: Callable[[str], None] | None = None
        self.on_progress: Callable[[int, int], None] | None = None
        self.licenses = AcceptedLicenses(self.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create the model folder {self.root}: {e.strerror}") from e
        sweep_leftovers(self.root)

    def list(self) -> list[ModelDetails]:
        """Installed models (those whose folder is still there), by name."""
        out = []
        for row in self.db.list_models():
            path = self.root / row.name
            if path.is_dir():
                out.append(self._details(row))
        return out

    def get(self, name: str) -> ModelDetails:
        """The installed model called `name`; `NotFound` lists those there are."""
        check_name(name, "model")
        row = self.db.get_model(name)
        if row is None or not (self.root / row.name).is_dir():
            known = [d.ref.name for d in self.list()]
            raise NotFound(
                f"no model named {name!r} in the store; installed: {', '.join(known) if known else '(none)'}",
                hint=did_you_mean(close_matches(name, known)) or "koe models import PATH, koe models pull ID, or pass a folder path or a hub id (OWNER/NAME)",
                param="model",
            )
        return self._details(row)

    def import_model(
        self,
        path: str | Path,
        name: str | None = None,
        *,
        link: bool = False,
        overwrite: bool = False,
        arch: str | None = None,
        vocoder: str | Path | None = None,
    ) -> ModelDetails:
        """Add the model folder at `path` to the store as `name` (default: the folder's name).

        The folder is validated first (its family claims it, required files are present). A
        release that carries no config is completed on the way in by its family's spec: `arch`
        names its architecture (the config written for it), `vocoder` a folder holding its vocoder
        (else the folder's own). `link=True` stores a symlink instead of a copy (a folder that
        needs completing cannot be linked). A copy is made in a temp folder, completed, validated
        and renamed into place, so an interrupted or failed import leaves nothing behind.
        """
        src = Path(path).expanduser().resolve()
        if not src.is_dir():
            raise NotFound(f"model folder not found: {src}", param="model")
        voc = Path(vocoder).expanduser().resolve() if vocoder is not None else None
        if voc is not None and not voc.is_dir():
            raise NotFound(f"vocoder folder not found: {voc}", param="vocoder")
        spec = spec_for(src, arch)
        assembly = plan_assembly(spec, src, arch, voc)
        if assembly and link:
            raise InvalidRequest(
                f"{src} needs files added ({', '.join([*assembly.write, *assembly.copy])}), so it cannot be linked",
                hint="import it without --link (a copy)",
                param="model",
            )
        ref = None
        if not assembly:
            ref = detect_model(src)
            details = inspect_model(ref)
            if details.missing:
                raise InvalidRequest(f"{src} is not a complete model folder: missing {', '.join(details.missing)}", param="model")
        name = check_name(name, "model") if name else slug(src.name)
        dest = self.root / name
        if (self.db.get_model(name) is not None or dest.exists() or dest.is_symlink()) and not overwrite:
            raise AlreadyExists(f"model {name!r} is already installed", hint="remove it first, pass --overwrite, or choose --name")
        if dest.exists() and dest.resolve() == src:
            raise InvalidRequest(f"{src} is already the store's folder for {name!r}")
        try:
            if link:
                tmp = self.root / f".{name}.{os.getpid()}.link.tmp"
                tmp.unlink(missing_ok=True)
                os.symlink(src, tmp, target_is_directory=True)
                if dest.exists() or dest.is_symlink():
                    remove_tree(dest)
                os.replace(tmp, dest)
            else:
                with atomic_folder(dest, replace=overwrite) as tmp:
                    shutil.copytree(src, tmp, dirs_exist_ok=True, symlinks=False)
                    if assembly:
                        apply_assembly(tmp, assembly)
                        ref = validate_folder(tmp, name)
        except OSError as e:
            raise StorageError(f"cannot install {src} as {name!r}: {e}") from e
        row = ModelRow(name, time.time(), str(src), link, ref.family, ref.variant, ref.size)
        self.db.put_model(row)
        return self._details(row)

    def register(self, name: str, origin: str) -> ModelDetails:
        """Index a folder already complete at `models/<name>` (used by `pull`)."""
        ref = detect_model(self.root / name, name)
        row = ModelRow(name, time.time(), origin, False, ref.family, ref.variant, ref.size)
        self.db.put_model(row)
        return self._details(row)

    def remove(self, name: str) -> None:
        """Uninstall `name` (a linked model's own folder is left alone)."""
        d = self.get(name)
        self.db.delete_model(d.ref.name)
        remove_tree(self.root / d.ref.name)

    def resolve(
        self,
        spec: str | os.PathLike | None,
        default: str | None = None,
        *,
        allow_paths: bool = True,
        download: bool | Downloads | None = None,
        cache_dir: str | os.PathLike | None = None,
    ) -> ModelRef:
        """The model a request means: `spec` (a store name, a folder path or a hub id), else
        `default`, else the only installed model (`koe.service.store.resolve.resolve_model` has the
        order). Raises `NotFound`/`InvalidRequest`/`Unavailable` with what to do instead.

        `allow_paths=False` (the server: a client names models, never this machine's folders)
        refuses a folder path in `spec`; `default` is the operator's and may be one. `download`:
        None follows the settings (`downloads_for`), True/False allows or forbids a first-use
        download. `cache_dir`: the Hugging Face cache to read instead of HF_HUB_CACHE's."""
        from koe.service.store.resolve import Downloads, downloads_for, resolve_model

        if download is None:
            policy = downloads_for(self.settings, client=not allow_paths)
        elif isinstance(download, Downloads):
            policy = download
        else:
            policy = Downloads(download, "this call does not download", listed_only=not allow_paths)
        return resolve_model(self, spec, default, allow_paths=allow_paths, downloads=policy, cache_dir=cache_dir, on_status=self.on_status)

    def _details(self, row: ModelRow) -> ModelDetails:
        path = self.root / row.name
        ref = ModelRef(row.name, path, row.family, row.variant, row.size, installed=True)
        try:
            d = inspect_model(ref)
        except ModelFailed as e:
            return ModelDetails(ref, 0, 0, "?", [], [], [f"unreadable: {e.reason}"], row.origin, row.linked, row.added_at, license=origin_license(row.origin))
        except (OSError, ValueError, InvalidRequest) as e:
            return ModelDetails(
                ref, 0, 0, "?", [], [], [f"unreadable: {ref.relative(str(e))}"], row.origin, row.linked, row.added_at, license=origin_license(row.origin)
            )
        return replace(d, origin=row.origin, linked=row.linked, added_at=row.added_at, license=origin_license(row.origin) or d.license)
