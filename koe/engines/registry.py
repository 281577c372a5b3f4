"""The families koe runs: a lazy table of specs, asked in turn which one a model folder holds.

As vLLM's model registry: a family costs nothing until asked (its spec module is imported on first
use; its engine only when a model is loaded). A built-in family is one line in `FAMILIES`; a family
in a package of its own registers its spec under the entry-point group `koe.families`:

    [project.entry-points."koe.families"]
    sine = "koe_sine.spec:SPEC"

The entry point's name is the family's name (the spec's `family`). A plugin that cannot be used (a
name a built-in family or another plugin already has, a target that does not import, an object that
is not a spec, a spec whose `family` is another name) is skipped with one logged warning saying why,
so one broken package never stops koe; asking for that family by name (`spec(name)`) is a
`FamilyPluginError` with the same reason.
"""

from __future__ import annotations

import importlib
import logging
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from koe.engines.spec import FamilySpec, ModelDescription, ModelInfo, SpecError, read_json, spec_demo_fixture, spec_native

log = logging.getLogger(__name__)

FAMILIES: dict[str, str] = {  # the built-in families; `families()` adds the installed plugins
    "qwen3_tts": "koe.engines.qwen3_tts.spec:SPEC",
    "f5_tts": "koe.engines.f5_tts.spec:SPEC",
    "voxcpm": "koe.engines.voxcpm.spec:SPEC",
    "omnivoice": "koe.engines.omnivoice.spec:SPEC",
    "cosyvoice": "koe.engines.cosyvoice.spec:SPEC",
    "gpt_sovits": "koe.engines.gpt_sovits.spec:SPEC",
}
DEMO_FAMILY = "qwen3_tts"  # `koe demo` builds a tiny random-weight model of this family
ENTRY_POINT_GROUP = "koe.families"
SPEC_MEMBERS = ("family", "title", "engine", "fixture", "fixture_variants", "released", "probe", "describe", "openai_voice")


class UnknownModelError(ValueError):
    """A folder that holds no model koe knows."""


class FamilyPluginError(UnknownModelError):
    """A family registered through the `koe.families` entry point that koe cannot use (the reason says why)."""


def import_target(target: str) -> Any:
    """The object a "module:name" target names (imports the module)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


_warned: set[str] = set()


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning("family plugin skipped: %s", reason)


def _distribution(entry: metadata.EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown package"


@cache
def _table() -> dict[str, str | FamilyPluginError]:
    """Every family's spec target, the built-ins first, then the plugins (or why a plugin is refused)."""
    table: dict[str, str | FamilyPluginError] = dict(FAMILIES)
    owners: dict[str, str] = {}
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {entry.name} = {entry.value!r} ({ENTRY_POINT_GROUP}, from {_distribution(entry)})"
        if entry.name in FAMILIES:
            table[entry.name] = FAMILIES[entry.name]  # the built-in family stays
            _warn_once(f"{where} names the built-in family {entry.name!r}")
            continue
        if entry.name in owners:
            table[entry.name] = FamilyPluginError(f"family {entry.name!r} is registered twice: by {owners[entry.name]} and by {where}; uninstall one")
            _warn_once(str(table[entry.name]))
            continue
        owners[entry.name] = where
        module, sep, attr = entry.value.partition(":")
        if not sep or not module.strip() or not attr.strip():
            table[entry.name] = FamilyPluginError(f"{where}: give 'package.module:SPEC'")
            _warn_once(str(table[entry.name]))
        else:
            table[entry.name] = f"{module.strip()}:{attr.strip()}"
    return table


def families() -> dict[str, str]:
    """Name -> "module:SPEC" of every family koe can use: the built-ins, then the installed plugins
    (`koe.families`) whose entry point is well formed (a plugin whose spec fails to import is
    found out, and skipped, when it is first asked for)."""
    return {name: target for name, target in _table().items() if not isinstance(target, FamilyPluginError)}


def refresh() -> None:
    """Read the installed plugins again (after a package was installed or removed in this process)."""
    _table.cache_clear()
    spec.cache_clear()
    _warned.clear()


@cache
def spec(family: str) -> FamilySpec:
    """The spec of `family` (imported on first use); `FamilyPluginError` for a plugin koe cannot use."""
    table = _table()
    target = table.get(family)
    if target is None:
        raise UnknownModelError(f"unknown model family {family!r}; koe runs: {', '.join(families())}")
    if isinstance(target, FamilyPluginError):
        raise target
    if family in FAMILIES:
        return import_target(target)
    try:
        found = import_target(target)
    except Exception as e:  # noqa: BLE001 - a third-party package: any failure to import is its own, named here
        raise FamilyPluginError(f"family plugin {family!r} ({target}) does not import: {type(e).__name__}: {e}") from e
    lacks = [m for m in SPEC_MEMBERS if not hasattr(found, m)]
    if lacks:
        raise FamilyPluginError(f"family plugin {family!r} ({target}) is not a family spec: it has no {', '.join(lacks)} (see koe.engines.spec.FamilySpec)")
    if found.family != family:
        raise FamilyPluginError(f"family plugin {family!r} ({target}) is a spec of family {found.family!r}: name the entry point {found.family!r}")
    return found


def specs() -> list[FamilySpec]:
    """The spec of every usable family, built-ins first; a plugin koe cannot use is skipped with a warning."""
    found = []
    for name in families():
        try:
            found.append(spec(name))
        except FamilyPluginError as e:
            _warn_once(str(e))
    return found


def detect(folder: str | Path) -> ModelInfo:
    """Family, variant and size of the model in `folder`: the first spec that claims it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UnknownModelError(f"{folder}: not a folder")
    for s in specs():
        info = s.probe(folder)
        if info is not None:
            return info
    names = ", ".join(s.title for s in specs())
    config = folder / "config.json"
    if config.is_file():
        try:
            model_type = read_json(config).get("model_type")
        except SpecError as e:
            raise UnknownModelError(str(e)) from e
        raise UnknownModelError(f"{folder}: model_type {model_type!r} is not supported; koe runs: {names}")
    if not any(folder.glob("*.yaml")):
        raise UnknownModelError(f"{folder}: no config.json — is this a model folder? koe runs: {names}")
    raise UnknownModelError(f"{folder}: not a model koe knows (layout not recognised); koe runs: {names}")


def describe(folder: str | Path) -> ModelDescription:
    """What the model in `folder` can do and which files it needs, without loading weights."""
    info = detect(folder)
    return spec(info.family).describe(Path(folder))


def engine_class(family: str) -> Any:
    """The engine class of `family` (imports its torch code)."""
    return import_target(spec(family).engine)


def write_fixture(folder: str | Path, family: str = DEMO_FAMILY, variant: str | None = None, size: str = "tiny", **options: Any) -> Path:
    """A small random-weight model of `family` in its released on-disk layout (tests, `koe demo`).

    `options`: keywords of the family's fixture writer (Qwen3-TTS: `vocabulary=`, see
    `koe.engines.qwen3_tts.text.vocab`)."""
    s = spec(family)
    return import_target(s.fixture)(Path(folder), variant or s.fixture_variants[0], size, **options)


def write_demo_fixture(folder: str | Path, family: str = DEMO_FAMILY) -> Path:
    """The tiny random-weight model `koe demo` builds for `family` (its first fixture variant), with
    the family's demo fixture writer: one that builds on a runtime-only install, warning
    (`koe.engines.spec.FixtureNote`) about what it fell back to."""
    s = spec(family)
    return import_target(spec_demo_fixture(s))(Path(folder), s.fixture_variants[0], "tiny")


def load_engine(folder: str | Path, device=None, dtype=None, precision=None):
    """Load the model in `folder` with its family's engine (the contract, `koe.engines.base.Engine`)."""
    info = detect(folder)
    return engine_class(info.family).load(folder, device=device, dtype=dtype, precision=precision)


def load_native(folder: str | Path, device=None, dtype=None, precision=None):
    """Load the model in `folder` behind its family's native API (`koe.engines.native.TTS` or the
    family's subclass, the spec's `native`), which holds the engine: what `koe.load` returns."""
    engine = load_engine(folder, device=device, dtype=dtype, precision=precision)
    return import_target(spec_native(spec(engine.family)))(engine)
