"""The oracles the families declare (`koe.engines.oracle`), for the Makefile and for people.

    python scripts/oracles.py                 # one line per oracle: family, upstream, venv, make target
    python scripts/oracles.py make [FILE]     # the declarations as make variables (the Makefile includes them)

The Makefile's oracle targets are one template (`ORACLE_RULE`) instantiated for each family this
prints, so a family's oracle is built by `make oracle` once it declares one (from its spec, or from
`koe/engines/<family>/oracle.py` or a `koe.oracles` entry point while the family is under
construction): no make target is written by hand. A `goldens_only` oracle gets its target but is
left out of `make oracle` (`ORACLE_TESTED`): `make goldens-FAMILY` builds it (scripts/goldens.py). `make` writes FILE only when its text changes (make re-reads an included makefile
it has just remade, so an unchanged one must keep its time).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from koe.engines.oracle import declarations, declared, for_tests, target, torch_home, under_construction

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from cpu_kind import golden_cpu  # noqa: E402  (tests/: where goldens are kept by kind of CPU)


def goldens_missing_here(family: str) -> list[str]:
    """The family's golden topics with no golden made on this machine's kind of CPU
    (`tests/engines/<family>/goldens/<cpu>/<topic>.npz`, tests/cpu_kind.py): their tests have
    upstream make them (tests/golden_files.py `made_here`), so `make test` builds the oracle."""
    folder = ROOT / "tests" / "engines" / family
    scripts = sorted(folder.glob("golden_*.py"))
    return [p.stem.removeprefix("golden_") for p in scripts if not (folder / "goldens" / golden_cpu(p) / f"{p.stem.removeprefix('golden_')}.npz").is_file()]


def _declared_in(family: str) -> str:
    """The file of `family`'s oracle declaration (relative to the checkout when inside it)."""
    module = declarations()[family].partition(":")[0]
    path = Path(importlib.util.find_spec(module).origin).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def make_variables() -> str:
    """`ORACLE_FAMILIES`, `ORACLE_TESTED` (those `make oracle` builds: not goldens-only),
    `ORACLE_GOLDENS_HERE` (the goldens-only ones `make test` builds too: some golden of theirs was
    not made on this kind of CPU, so upstream makes it during the tests),
    `ORACLE_TORCH` (the venv that installs torch) and, per family F,
    `oracle_F_venv`, `_package` (empty for a source oracle), `_source` and `_source_repo` (empty for
    a package), `_source_paths`, `_python_env`, `_requirements`, `_nodeps`, `_build_isolation`,
    `_shares_torch` and `_sdist` (1 or empty) and `_declared_in` (the declaration's file: a changed pin rebuilds
    that oracle)."""
    oracles = declared()
    home = torch_home(oracles)
    lines = [
        "# Written by scripts/oracles.py from the families' oracle declarations: do not edit.",
        f"ORACLE_FAMILIES := {' '.join(oracles)}",
        f"ORACLE_TESTED := {' '.join(for_tests(oracles))}",
        f"ORACLE_GOLDENS_HERE := {' '.join(f for f, o in oracles.items() if o.goldens_only and goldens_missing_here(f))}",
        f"ORACLE_TORCH := {home.venv if home else ''}",
    ]
    for family, o in oracles.items():
        fields = {
            "venv": o.venv,
            "package": o.package,
            "source": o.source,
            "source_repo": o.source_repo,
            "source_paths": " ".join(o.source_paths) if o.source else "",
            "python_env": o.python_env,
            "requirements": " ".join(o.requirements),
            "nodeps": " ".join(o.nodeps),
            "build_isolation": "1" if o.build_isolation else "",
            "shares_torch": "1" if o.shares_torch else "",
            "sdist": "1" if o.sdist else "",
            "declared_in": _declared_in(family),
        }
        lines += [f"oracle_{family}_{k} := {v}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["make"]:
        text = make_variables()
        if len(argv) < 2:
            sys.stdout.write(text)
        elif not Path(argv[1]).is_file() or Path(argv[1]).read_text() != text:
            Path(argv[1]).write_text(text)
        return 0
    if argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    building = set(under_construction())
    for family, o in declared().items():
        torch = "shares torch" if o.shares_torch else "installs torch"
        note = "  (goldens only)" if o.goldens_only else ""
        note += "  (family under construction)" if family in building else ""
        print(f"{family:12} {o.upstream:28} {o.venv:18} make {target(family):18} {torch}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
