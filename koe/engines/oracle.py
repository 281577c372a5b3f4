"""The upstream oracle of a family: upstream's own code at a pinned version, which its parity tests
compare against.

koe never imports an oracle. Each one is upstream in a virtualenv of its own at the root of a
source checkout, run in a child process by the tests (`tests/oracle_harness.py`) and by
`koe bench --compare upstream`. Upstream is either a pinned PyPI release (`package`) or, for a
family with no faithful release on PyPI, its source tree at a pinned commit (`source`): a folder
`<repo>@<commit>` in a folder of upstream checkouts at the pinned commits (the Makefile's
`UPSTREAM_SOURCES`), copied into the virtualenv when it is built (upstream may write into its own
tree; the checkouts stay read-only) and put on its path with a .pth file.

A family declares its oracle in its own folder, as an `UpstreamOracle` (torch-free, like the spec:
the declaration is read before any virtualenv exists): a registered family names it from its spec
(`oracle = "module:NAME"`); a family under construction (modules and parity tests, no engine or
spec yet) by having `koe/engines/<family>/oracle.py` define `ORACLE`, which makes its oracle built
and its parity tests run without the family being registered (its folder's name is its name; once
registered, its spec names the same declaration). A family in a package of its own (its licence is
not koe's: `families/` in this repository) names its declaration under the entry-point group
`koe.oracles` (`indextts = "koe_indextts.oracle:ORACLE"`) until its spec does. `make oracle` builds
every declared oracle (the Makefile reads them through `scripts/oracles.py`) but those marked
`goldens_only` (upstream too costly to run in every test run: its tests compare with committed
golden files, which `make goldens-FAMILY` regenerates), `make oracle-FAMILY` one (also named as
its venv: `make oracle-f5`).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

SOURCE_FORM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*@[0-9a-f]{7,40}")
ENGINES = Path(__file__).resolve().parent  # koe/engines: the families' folders
ENTRY_POINT_GROUP = "koe.oracles"  # the declarations of families in packages of their own


@dataclass(frozen=True)
class UpstreamOracle:
    """How to build a family's oracle virtualenv and where its scripts are (paths relative to the
    checkout's root).

    Upstream, one of: `package`, the release, pinned ("f5-tts==1.1.22"), installed with `--no-deps`
    (its own requirements name far more than inference imports); `source`, its source tree at a
    pinned commit ("CosyVoice@ace7c47": that folder of the upstream checkouts), copied to
    `<venv>/src/<repo>` at build, with `source_paths` (folders inside it, "." its root) put on the
    venv's path. `requirements`: pip requirement files installed with their dependencies; `nodeps`:
    files installed with `--no-deps` (packages that depend on torch, so pip never pulls a second
    torch); `build_isolation=False` builds those of them that are source distributions in the venv
    itself, with the setuptools and wheel its requirements pin (for sdists an isolated build's newest
    setuptools cannot build). `shares_torch`: the virtualenv takes torch and the common packages of
    the oracle that installs torch (the first declared one that does not share) through a .pth file,
    then adds its own; otherwise it installs torch itself (the build `make` picks for the machine).
    `scripts`: the folder of its oracle scripts (`run_oracle` runs `<scripts>/<name>.py`);
    `<scripts>/stubs`, when present, comes first on their PYTHONPATH (stand-ins for training-only or
    native-only imports). `python_env`: the environment variable that names another virtualenv's
    python instead of `<venv>/bin/python`. `goldens_only`: no test runs upstream; its scripts
    (`<scripts>/golden_<topic>.py`) write the golden files the family's tests compare with, so
    `make oracle` leaves this venv out, `make test` too unless some golden of the family was not
    made on this kind of CPU, and `make goldens-FAMILY` builds it.
    `sdist`: the release's source distribution is unpacked to `<venv>/src/<name>-<version>` too, for
    files its wheel leaves out (a training script upstream runs from its repository).
    `recorded`: the test paths (files or folders of the checkout) whose oracle runs are committed
    (recorded oracle runs, docs/testing.md): `run_oracle` reads each run back from
    `tests/engines/<family>/oracle_runs/<cpu kind>/<key>.safetensors` (what upstream wrote on that
    kind of CPU, keyed by everything it depends on) instead of starting upstream, and
    `make goldens-FAMILY` runs these tests with upstream live to record them again.
    """

    venv: str
    python_env: str
    scripts: str
    package: str = ""
    source: str = ""
    source_paths: tuple[str, ...] = (".",)
    requirements: tuple[str, ...] = ()
    nodeps: tuple[str, ...] = ()
    build_isolation: bool = True
    shares_torch: bool = True
    goldens_only: bool = False
    recorded: tuple[str, ...] = ()
    sdist: bool = False

    def __post_init__(self) -> None:
        if bool(self.package) == bool(self.source):
            raise ValueError("an oracle is upstream's release (package=NAME==VERSION) or its source at a commit (source=REPO@COMMIT), one of the two")
        if self.package and "==" not in self.package:
            raise ValueError(f"oracle package {self.package!r}: pin its release (NAME==VERSION)")
        if self.source and not SOURCE_FORM.fullmatch(self.source):
            raise ValueError(f"oracle source {self.source!r}: name the checkout as REPO@COMMIT (the commit's hex, at least 7 digits)")
        bad = [p for p in self.source_paths if p.startswith("/") or ".." in Path(p).parts or not p]
        if bad or not self.source_paths:
            raise ValueError(f"oracle source_paths {self.source_paths!r}: folders inside the source tree ('.' for its root)")
        bad = [p for p in self.recorded if p.startswith("/") or ".." in Path(p).parts or not p]
        if bad:
            raise ValueError(f"oracle recorded {self.recorded!r}: test files or folders of the checkout (relative paths)")
        if not self.venv.startswith(".oracle"):
            raise ValueError(f"oracle venv {self.venv!r}: name it .oracle-SOMETHING (`make clean` removes .oracle*, git ignores them)")

    @property
    def upstream(self) -> str:
        """What it runs, in words: the pinned package, or the source checkout."""
        return self.package or f"{self.source} (source)"

    @property
    def source_repo(self) -> str:
        """The source's repository folder name inside `<venv>/src` ("" for a package)."""
        return self.source.partition("@")[0]


def target(family: str) -> str:
    """The make target that builds `family`'s oracle."""
    return f"oracle-{family}"


def declarations() -> dict[str, str]:
    """Every declared oracle as a "module:NAME" target, by family: the registered families' (their
    specs' `oracle`, in the registry's order), then the families under construction: a folder of
    `koe/engines` with an `oracle.py` that no registered spec names (by folder name), then the
    `koe.oracles` entry points that no registered spec names (by entry name, sorted)."""
    from koe.engines import registry

    found: dict[str, str] = {}
    for spec in registry.specs():
        name = getattr(spec, "oracle", None)  # optional: a family without an upstream to compare with has none
        if name:
            found[spec.family] = name
    named = {t.partition(":")[0] for t in found.values()}
    for folder in sorted(p.parent for p in ENGINES.glob("*/oracle.py")):
        module = f"koe.engines.{folder.name}.oracle"
        if module in named:
            continue
        if folder.name in found:
            raise ValueError(f"{module}: the registered family {folder.name!r} declares its oracle from its spec; name this one there")
        found[folder.name] = f"{module}:ORACLE"
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if entry.value in found.values():
            continue
        if entry.name in found:
            raise ValueError(
                f"{ENTRY_POINT_GROUP} entry point {entry.name} = {entry.value!r}: the family {entry.name!r} declares its oracle already ({found[entry.name]})"
            )
        found[entry.name] = entry.value
    return found


def under_construction() -> list[str]:
    """The families whose oracle is declared but that are not registered (yet)."""
    from koe.engines import registry

    return [f for f in declarations() if f not in registry.families()]


def declared() -> dict[str, UpstreamOracle]:
    """Every declared oracle, by family (`declarations()`'s order: families that declare none are
    left out). The first that does not share torch is the one the others take it from."""
    found: dict[str, UpstreamOracle] = {}
    for family, name in declarations().items():
        module, _, attr = name.partition(":")
        found[family] = getattr(importlib.import_module(module), attr)
    if any(o.shares_torch for o in found.values()) and all(o.shares_torch for o in found.values()):
        raise ValueError("every declared oracle shares torch, none installs it: one needs shares_torch=False")
    home = torch_home(found)
    if home is not None and home.goldens_only:
        raise ValueError(f"{home.venv}: the oracle that installs torch is built for the tests, it cannot be goldens_only")
    return found


def for_tests(oracles: dict[str, UpstreamOracle]) -> dict[str, UpstreamOracle]:
    """The oracles the tests run (`make oracle` builds them): all but the `goldens_only` ones."""
    return {family: o for family, o in oracles.items() if not o.goldens_only}


def torch_home(oracles: dict[str, UpstreamOracle]) -> UpstreamOracle | None:
    """The oracle that installs torch, which the sharing ones take it from (None: no oracle declared)."""
    return next((o for o in oracles.values() if not o.shares_torch), None)
