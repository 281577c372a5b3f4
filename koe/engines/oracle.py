"""The upstream oracle of a family: the pinned upstream package its parity tests compare against.

koe never imports an oracle. Each one is the upstream package at a pinned release in a virtualenv
of its own at the root of a source checkout, run in a child process by the tests
(`tests/oracle_harness.py`) and by `koe bench --compare upstream`. A family declares its oracle in
its own folder, as `oracle = "module:NAME"` on its spec naming an `UpstreamOracle` (torch-free, like
the spec: the declaration is read before any virtualenv exists). `make oracle` builds every
declared oracle (the Makefile reads them through `scripts/oracles.py`), `make oracle-FAMILY` one
(also named as its venv: `make oracle-f5`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UpstreamOracle:
    """How to build a family's oracle virtualenv and where its scripts are (paths relative to the
    checkout's root).

    `package`: the upstream release, pinned ("f5-tts==1.1.22"), installed with `--no-deps` (its own
    requirements name far more than inference imports). `requirements`: pip requirement files
    installed with their dependencies; `nodeps`: files installed with `--no-deps` (packages that
    depend on torch, so pip never pulls a second torch). `shares_torch`: the virtualenv takes torch
    and the common packages of the oracle that installs torch (the first declared one that does not
    share) through a .pth file, then adds its own; otherwise it installs torch itself (the build
    `make` picks for the machine). `scripts`: the folder of its oracle scripts (`run_oracle` runs
    `<scripts>/<name>.py`); `<scripts>/stubs`, when present, comes first on their PYTHONPATH (stand-ins
    for training-only or native-only imports). `python_env`: the environment variable that names
    another virtualenv's python instead of `<venv>/bin/python`.
    """

    package: str
    venv: str
    python_env: str
    scripts: str
    requirements: tuple[str, ...] = ()
    nodeps: tuple[str, ...] = ()
    shares_torch: bool = True

    def __post_init__(self) -> None:
        if "==" not in self.package:
            raise ValueError(f"oracle package {self.package!r}: pin its release (NAME==VERSION)")
        if not self.venv.startswith(".oracle"):
            raise ValueError(f"oracle venv {self.venv!r}: name it .oracle-SOMETHING (`make clean` removes .oracle*, git ignores them)")


def target(family: str) -> str:
    """The make target that builds `family`'s oracle."""
    return f"oracle-{family}"


def declared() -> dict[str, UpstreamOracle]:
    """Every registered family's oracle, by family, in the registry's order (families that declare
    none are left out). The first that does not share torch is the one the others take it from."""
    from koe.engines import registry

    found: dict[str, UpstreamOracle] = {}
    for spec in registry.specs():
        name = getattr(spec, "oracle", None)  # optional: a family without an upstream to compare with has none
        if name:
            found[spec.family] = registry.import_target(name)
    if any(o.shares_torch for o in found.values()) and all(o.shares_torch for o in found.values()):
        raise ValueError("every declared oracle shares torch, none installs it: one needs shares_torch=False")
    return found


def torch_home(oracles: dict[str, UpstreamOracle]) -> UpstreamOracle | None:
    """The oracle that installs torch, which the sharing ones take it from (None: no oracle declared)."""
    return next((o for o in oracles.values() if not o.shares_torch), None)
