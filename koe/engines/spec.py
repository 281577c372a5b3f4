"""What a family says about a model folder without loading it (torch-free).

Each family's `spec.py` defines a `FamilySpec` named `SPEC`; the registry imports it lazily. The
service plans requests, lists models and maps OpenAI voice names from these answers alone.
"""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from koe.engines.base import Capabilities
from koe.engines.licenses import License
from koe.runtime.files import read_json_object


@dataclass(frozen=True)
class ModelInfo:
    """Which family a folder holds, and its variant and size as the family names them."""

    family: str
    variant: str
    size: str


@dataclass(frozen=True)
class ModelDescription:
    """A model folder as its family reads it: capabilities, files it needs, files it lacks.

    `weight_files` are the checkpoint files (for sizes and parameter counts); `uses` says in one
    line what the model is for; `extra` holds family facts worth showing (`koe models info`);
    `random_weights`: the folder carries koe's random-weights marker (`has_random_weights`);
    `license`: the licence of the model the folder holds (`koe.engines.licenses`; None: not declared).
    """

    info: ModelInfo
    capabilities: Capabilities
    required_files: tuple[str, ...]
    missing: tuple[str, ...]
    weight_files: tuple[Path, ...]
    stored_dtype: str
    uses: str
    extra: dict[str, Any] | None = None
    random_weights: bool = False
    license: License | None = None

    @property
    def parameters(self) -> int:
        """The weights' element count: from the safetensors headers, and from PyTorch checkpoints
        (`.pt`, `.pth`, `.bin`, read with `weights_only` onto the meta device: no weight is loaded)."""
        return sum(
            safetensors_parameters(p) if p.suffix == ".safetensors" else checkpoint_parameters(p)
            for p in self.weight_files
            if p.suffix in (".safetensors", *CHECKPOINT_SUFFIXES)
        )


@dataclass(frozen=True)
class VoiceAlias:
    """What an OpenAI voice name means on a model: a preset speaker, or a voice description."""

    speaker: str | None = None
    design: str | None = None


@dataclass(frozen=True)
class HubFiles:
    """Files a pull fetches from one hub repo into a model folder.

    `files` are names or glob patterns (as huggingface_hub's `allow_patterns`) relative to
    `subfolder` of `repo`; empty means everything there. They land under `dest` of the model folder
    (at their path relative to `subfolder`). Plain names (no glob among them) must all exist in the
    repo; a list with globs must match at least one file. `unpack`: the files are zip archives (data
    the hub keeps zipped), each unpacked under `dest` instead (koe.service.store.archive checks
    every member), the archive itself not kept.
    """

    repo: str
    files: tuple[str, ...] = ()
    subfolder: str = ""
    dest: str = ""
    unpack: bool = False

    @property
    def key(self) -> str:
        """ "REPO[/SUBFOLDER]": how a store row's origin names this source ("hub:KEY@SHA")."""
        return self.repo + (f"/{self.subfolder}" if self.subfolder else "")

    def in_folder(self, rfilename: str) -> str:
        """Where the repo file `rfilename` lands in the model folder: under `dest`, at its path
        relative to `subfolder` (POSIX)."""
        rel = posixpath.relpath(rfilename, self.subfolder) if self.subfolder else rfilename
        return posixpath.join(self.dest, rel) if self.dest else rel

    def patterns(self) -> list[str] | None:
        """The repo paths (or globs) to fetch, as huggingface_hub's `allow_patterns`; None: all of it."""
        if self.files:
            return [posixpath.join(self.subfolder, f) if self.subfolder else f for f in self.files]
        return [f"{self.subfolder}/*"] if self.subfolder else None


@dataclass(frozen=True)
class ReleasedModel:
    """A published checkpoint koe knows: its hub id, variant and size, and what a pull fetches.

    `files`: the hub files the model folder is made of, possibly from several repos (a checkpoint
    repo's subfolder and a vocoder repo); empty means the whole `repo_id` as it is (a snapshot).
    `arch`: the architecture name handed to the spec's `assemble` once downloaded (a release that
    carries no config). `id`: the name `koe models pull` also takes for it (default `repo_id`,
    e.g. "OWNER/NAME/SUBFOLDER"); `name`: the store's default name. `unsupported`: set for a
    release koe knows but does not run yet, the message a pull of it fails with. `license`: the
    licence it is released under (`koe.engines.licenses.License`; None: not declared); one that
    `needs_acceptance` is accepted once, before the first pull of a model under it.
    """

    repo_id: str
    variant: str
    size: str
    files: tuple[HubFiles, ...] = ()
    arch: str | None = None
    id: str = ""
    name: str = ""
    unsupported: str = ""
    license: License | None = None

    @property
    def ref(self) -> str:
        return self.id or self.repo_id

    @property
    def sources(self) -> tuple[HubFiles, ...]:
        return self.files or (HubFiles(self.repo_id),)


@dataclass(frozen=True)
class Assembly:
    """What finishing a model folder adds (paths relative to the folder): text files to write and
    files to copy in from elsewhere (e.g. a vocoder downloaded on its own). Empty: nothing to add."""

    write: Mapping[str, str] = field(default_factory=dict)
    copy: Mapping[str, Path] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.write or self.copy)


class FamilySpec(Protocol):
    """A family's torch-free face (see module doc).

    Optional members (the helpers below supply the defaults for a spec without them):
    `archs`, the architecture names `assemble` can write a config for (default none);
    `assemble(folder, arch, vocoder) -> Assembly`, what a folder still needs to be complete
    (default: nothing, and `arch` / `vocoder` are refused); `custom_release(ref, arch)`, what a
    pull of a repo not in `released` fetches when given one of `archs`; `trainers`, the training
    methods the family runs, {"speaker" or "finetune": "module:function"} (default none;
    `koe.service.training` calls a "speaker" function as Qwen3-TTS's `finetune.run.train_speaker`
    is called, a "finetune" one as F5-TTS's `finetune.run.train`: model, data, out, settings); `bench`, the
    "module:NAME" of the family's benchmark declaration (a `koe.engines.benchmark.FamilyBench`,
    imported only by `koe bench`; default none: `koe bench` lists the family and refuses it);
    `native`, the "module:Class" of the family's native API, what `koe.load` returns (a subclass of
    `koe.engines.native.TTS` holding the engine; default `TTS` itself);
    `demo_fixture`, the "module:function" `koe demo` builds its model with (called as `fixture` is,
    with the first of `fixture_variants`): one that also builds on a runtime-only install, saying
    what it fell back to with a `FixtureNote` warning (default: `fixture`).
    """

    family: str
    title: str
    engine: str  # "module:Class" of the engine, imported only to load a model
    released: tuple[ReleasedModel, ...]
    fixture: str  # "module:function" writing a random-weight folder: f(folder, variant, size="tiny") -> Path
    fixture_variants: tuple[str, ...]  # the variants that function can write (the first is the demo's)

    def probe(self, folder: Path) -> ModelInfo | None:
        """This family's info for `folder`, or None if the folder is not one of its models."""
        ...

    def describe(self, folder: Path) -> ModelDescription:
        """Capabilities and files of a folder `probe` accepted (reads configs only)."""
        ...

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        """What OpenAI voice `name` (alloy, echo, ...) means on this model, or None."""
        ...


class SpecError(ValueError):
    """A folder a family claims but cannot read (malformed config), or one it cannot complete as asked."""


# -- the optional hooks, with their defaults (the service calls these, never the hooks directly) ------


def spec_archs(spec: FamilySpec) -> tuple[str, ...]:
    """The architecture names `spec` can write a config for (its `archs`; none by default)."""
    return tuple(getattr(spec, "archs", ()) or ())


def spec_demo_fixture(spec: FamilySpec) -> str:
    """The "module:function" `koe demo` builds the family's model with (its `demo_fixture`, else its `fixture`)."""
    return getattr(spec, "demo_fixture", None) or spec.fixture


def spec_native(spec: FamilySpec) -> str:
    """The "module:Class" of the family's native API (its `native`, else the generic `koe.engines.native.TTS`)."""
    return getattr(spec, "native", None) or "koe.engines.native:TTS"


def spec_bench(spec: FamilySpec) -> Any | None:
    """The family's benchmark declaration (its `bench`, imported now), or None when it declares none."""
    target = getattr(spec, "bench", None)
    if not target:
        return None
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _unsupported_release(spec: FamilySpec, arch: str) -> ReleasedModel | None:
    return next((r for r in spec.released if r.arch == arch and r.unsupported), None)


def known_archs(specs: Iterable[FamilySpec]) -> str:
    """Every spec's architecture names for messages: "A, B (Family one); C (Family two)"."""
    parts = [f"{', '.join(spec_archs(s))} ({s.title})" for s in specs if spec_archs(s)]
    return "; ".join(parts) or "(none)"


def arch_owner(specs: Iterable[FamilySpec], arch: str) -> FamilySpec:
    """The spec that knows architecture `arch`; `SpecError` if none does, or if it is a release koe
    knows but does not run yet (its `unsupported` message)."""
    specs = list(specs)
    for s in specs:
        release = _unsupported_release(s, arch)
        if release is not None:
            raise SpecError(release.unsupported)
        if arch in spec_archs(s):
            return s
    raise SpecError(f"unknown architecture {arch!r}; koe knows: {known_archs(specs)}")


def assemble_folder(spec: FamilySpec, folder: Path, arch: str | None = None, vocoder: Path | None = None) -> Assembly:
    """What `folder` still needs to be a complete model of `spec`'s family (its `assemble` hook):
    the config of architecture `arch`, the vocoder from the folder `vocoder`, ... `SpecError` says
    what is missing and how to supply it. A spec without the hook needs nothing and takes neither."""
    hook = getattr(spec, "assemble", None)
    if hook is not None:
        return hook(Path(folder), arch, Path(vocoder) if vocoder is not None else None)
    if arch is not None:
        raise SpecError(f"{spec.title} model folders carry their own config: an architecture (--arch) does not apply")
    if vocoder is not None:
        raise SpecError(f"{spec.title} model folders hold their own decoder: a separate vocoder (--vocoder) does not apply")
    return Assembly()


def find_release(specs: Iterable[FamilySpec], ref: str, arch: str | None = None) -> tuple[FamilySpec, ReleasedModel] | None:
    """The release `ref` (a hub id, or a release's `id`) with architecture `arch` means, and its
    spec; None for a repo no spec lists when no `arch` is given (pulled whole, as it is).

    `SpecError` for a release koe does not run yet, an `arch` no spec knows or one that
    contradicts `ref`, and a repo holding several releases when `arch` does not pick one.
    """
    specs = list(specs)
    ref = ref.strip().strip("/")
    exact = [(s, r) for s in specs for r in s.released if r.id and r.id == ref]
    if exact:
        s, r = exact[0]
        if arch is not None and r.arch is not None and arch != r.arch:
            raise SpecError(f"{ref} is {r.arch}, not {arch}: drop --arch, or pull {r.repo_id} --arch {arch}")
        if r.unsupported:
            raise SpecError(r.unsupported)
        return s, r
    in_repo = [(s, r) for s in specs for r in s.released if r.repo_id == ref]
    if arch is not None:
        in_repo = [(s, r) for s, r in in_repo if r.arch == arch]
    if len(in_repo) == 1:
        s, r = in_repo[0]
        if r.unsupported:
            raise SpecError(r.unsupported)
        return s, r
    if len(in_repo) > 1:
        runs = [r for _, r in in_repo if not r.unsupported]
        names = ", ".join(str(r.arch or r.variant) for r in runs)
        raise SpecError(f"{ref} holds several models: pass --arch NAME (one of {names}), or pull {runs[0].ref if runs else ref}")
    if arch is None:
        return None
    s = arch_owner(specs, arch)
    hook = getattr(s, "custom_release", None)
    if hook is not None:
        return s, hook(ref, arch)
    if ref.count("/") != 1 or any(not p for p in ref.split("/")):
        raise SpecError(f"hub id {ref!r} should look like OWNER/NAME")
    return s, ReleasedModel(ref, arch, "", arch=arch)


def folder_config(folder: Path, name: str = "config.json") -> dict[str, Any] | None:
    """The JSON object in `folder`'s `name`, or None where there is none or it is not one (what a
    spec's `probe` reads before it claims a folder: an unreadable config is another family's, or none)."""
    path = Path(folder) / name
    if not path.is_file():
        return None
    try:
        return read_json_object(path)
    except ValueError:
        return None


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; `SpecError` naming the file if it is not one (`read_json_object`)."""
    return read_json_object(path, SpecError)


def safetensors_dtype(path: Path) -> str | None:
    """The dtype most tensors in a safetensors file have (from its header), e.g. "bfloat16"."""
    header = safetensors_header(path)
    counts: dict[str, int] = {}
    for k, v in header.items():
        if k != "__metadata__" and isinstance(v, dict):
            counts[v.get("dtype", "?")] = counts.get(v.get("dtype", "?"), 0) + 1
    names = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
    return names.get(max(counts, key=counts.get)) if counts else None


def safetensors_parameters(path: Path) -> int:
    """Element count of a safetensors file, from its JSON header alone (0 if unreadable)."""
    total = 0
    for k, v in safetensors_header(path).items():
        if k != "__metadata__" and isinstance(v, dict):
            total += math.prod(int(d) for d in v.get("shape", []))
    return total


CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin")  # the names PyTorch checkpoints are released under


def checkpoint_parameters(path: Path) -> int:
    """Element count of a PyTorch checkpoint's tensors (a state dict, possibly nested), read with
    `weights_only=True` onto the meta device (0 if unreadable). Imports torch."""
    import torch

    try:
        state = torch.load(path, map_location="meta", weights_only=True, mmap=True)
    except Exception:
        return 0

    def count(value: Any) -> int:
        if isinstance(value, torch.Tensor):
            return value.numel()
        if isinstance(value, dict):
            return sum(count(v) for v in value.values())
        return 0

    return count(state)


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file ({} if unreadable)."""
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if n <= 0 or n > 100_000_000:
                return {}
            header = json.loads(f.read(n))
    except (OSError, ValueError, RecursionError):  # RecursionError: a header nested too deeply to parse
        return {}
    return header if isinstance(header, dict) else {}


# -- random weights ------------------------------------------------------------------------------------

RANDOM_WEIGHTS_FILE = "RANDOM_WEIGHTS.txt"  # koe's marker in a folder its fixture writers made: the weights are random


def mark_random_weights(folder: Path, writer: str) -> None:
    """Mark `folder` as holding random weights (what each family's fixture writer, `writer`, calls last).

    A file of its own, not a config key: upstream's loaders read these folders strictly and never
    look at it, and a folder made from a real release never has it."""
    (Path(folder) / RANDOM_WEIGHTS_FILE).write_text(
        f"The weights in this folder are random: {writer} wrote them for tests, benchmarks and trying koe offline.\n"
        "It speaks noise, not speech. For real speech, pull or import a released model (`koe models pull --help`).\n",
        encoding="utf-8",
    )


class FixtureNote(UserWarning):
    """What a demo fixture writer fell back to (e.g. a stand-in for a package the runtime lacks);
    `koe demo` shows it to the user."""


def has_random_weights(folder: Path) -> bool:
    """Whether `folder` carries koe's random-weights marker (`mark_random_weights`)."""
    return (Path(folder) / RANDOM_WEIGHTS_FILE).is_file()
