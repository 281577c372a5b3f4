"""Each family's oracle declaration (koe.engines.oracle) is complete, and the Makefile's view of it
(scripts/oracles.py) names every declared family: no oracle is written by hand anywhere else."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from oracle_harness import ORACLES

from koe.engines import registry
from koe.engines.oracle import ENTRY_POINT_GROUP, UpstreamOracle, declarations, declared, for_tests, target, torch_home, under_construction

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("_koe_scripts_oracles", ROOT / "scripts" / "oracles.py")
_oracles_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_oracles_script)
goldens_missing_here = _oracles_script.goldens_missing_here


def _declared_in(family: str) -> str:
    """The file of `family`'s declaration, relative to the checkout."""
    module = declarations()[family].partition(":")[0]
    return str(Path(importlib.util.find_spec(module).origin).resolve().relative_to(ROOT))


def test_every_declared_oracle_has_its_files() -> None:
    assert declared(), "no family declares an oracle"
    for family, o in declared().items():
        assert (ROOT / o.scripts).is_dir(), family
        for name in (*o.requirements, *o.nodeps):
            assert (ROOT / name).is_file(), f"{family}: {name}"
            pins = [ln.split("==")[0].strip().lower() for ln in (ROOT / name).read_text().splitlines() if "==" in ln and not ln.startswith("#")]
            assert not o.package or o.package.split("==")[0].lower() not in pins, f"{family}: the package is pinned once, in its declaration"


def test_the_harness_reads_its_table_from_the_declarations() -> None:
    assert ORACLES == declared()
    assert set(ORACLES) <= set(registry.families()) | set(under_construction())
    for family in registry.families():
        if getattr(registry.spec(family), "oracle", None):
            assert registry.import_target(registry.spec(family).oracle) is ORACLES[family], family


def test_a_family_under_construction_has_its_oracle_but_no_registration() -> None:
    """A folder of koe/engines with an oracle.py that no spec names, or a `koe.oracles` entry point
    of a family's own package: its oracle is declared (built by `make oracle-FAMILY`, reached by
    run_oracle), and the registry (so the contract test) never sees it."""
    building = under_construction()
    entry_points = {e.name: e.value for e in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert set(building).isdisjoint(registry.families())
    for family in building:
        assert declarations()[family] in (f"koe.engines.{family}.oracle:ORACLE", entry_points.get(family)), family
        assert family in declared()


def test_a_family_in_a_package_of_its_own_declares_its_oracle_by_entry_point() -> None:
    """IndexTTS (families/indextts, its own licence) names its declaration under `koe.oracles`; the
    declaration lives in its package, not in koe."""
    entry_points = {e.name: e.value for e in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert entry_points.get("indextts") == "koe_indextts.oracle:ORACLE"
    assert declarations()["indextts"] == "koe_indextts.oracle:ORACLE"
    assert _declared_in("indextts") == "families/indextts/koe_indextts/oracle.py"


def test_a_goldens_only_oracle_is_left_out_of_make_oracle() -> None:
    """No test runs a goldens-only oracle: `make oracle` never builds it, even when its declaration
    changed, and `make test` only where some golden of the family was not made on this kind of CPU
    (its tests have upstream make it: tests/golden_files.py); no test is given its python;
    `make goldens-FAMILY` builds it, then regenerates the family's goldens."""
    oracles = declared()
    only = [f for f, o in oracles.items() if o.goldens_only]
    assert "indextts" in only and set(for_tests(oracles)) == set(oracles) - set(only)
    assert torch_home(oracles) is not None and not torch_home(oracles).goldens_only
    for family in only:
        o = oracles[family]
        touched = ["-W", _declared_in(family)]
        dry = subprocess.run(["make", "--no-print-directory", "-n", *touched, "oracle"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
        assert o.venv not in dry, dry
        dry = subprocess.run(["make", "--no-print-directory", "-n", *touched, "test"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
        assert (o.venv in dry) == bool(goldens_missing_here(family)) and o.python_env not in dry, (goldens_missing_here(family), dry)
        dry = subprocess.run(
            ["make", "--no-print-directory", "-n", *touched, f"goldens-{family}", "TOPICS=a b"], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
        lines = dry.splitlines()
        stamp = lines.index(f"touch {o.venv}/.installed")
        assert lines[stamp + 1 :] == [f".venv/bin/python scripts/goldens.py {family} a b"], dry


def test_a_source_oracle_is_a_pinned_checkout() -> None:
    base = {"venv": ".oracle-toy", "python_env": "KOE_ORACLE_TOY_PYTHON", "scripts": "tests/oracle_toy"}
    o = UpstreamOracle(source="Toy@0123abc", source_paths=(".", "third_party/x"), **base)
    assert o.source_repo == "Toy" and o.upstream == "Toy@0123abc (source)" and not o.package
    for fields in (
        {"source": "Toy"},
        {"source": "Toy@main"},
        {"source": "Toy@0123abc", "package": "toy==1"},
        {},
        {"source": "Toy@0123abc", "source_paths": ("../x",)},
        {"source": "Toy@0123abc", "source_paths": ()},
    ):
        with pytest.raises(ValueError):
            UpstreamOracle(**{**base, **fields})


def test_one_oracle_installs_torch_and_the_others_share_it() -> None:
    oracles = declared()
    home = torch_home(oracles)
    assert home is not None and not home.shares_torch
    assert next(iter(oracles.values())) is home  # the first declared: the one make builds first


def test_the_makefile_variables_name_every_oracle() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "oracles.py"), "make"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    lines = dict(ln.split(" := ", 1) for ln in out.splitlines() if " := " in ln)
    assert lines["ORACLE_FAMILIES"].split() == list(declared())
    assert lines["ORACLE_TESTED"].split() == list(for_tests(declared()))
    assert lines["ORACLE_GOLDENS_HERE"].split() == [f for f, o in declared().items() if o.goldens_only and goldens_missing_here(f)]
    for family, o in declared().items():
        assert lines[f"oracle_{family}_venv"] == o.venv and lines[f"oracle_{family}_package"] == o.package
        assert lines[f"oracle_{family}_python_env"] == o.python_env and lines[f"oracle_{family}_source"] == o.source
        assert (ROOT / lines[f"oracle_{family}_declared_in"]).is_file()
    listing = subprocess.run([sys.executable, str(ROOT / "scripts" / "oracles.py")], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert all(f"make {target(f)}" in listing for f in declared())


@pytest.mark.parametrize("fields", [{"package": "toy-tts"}, {"venv": ".toy"}])
def test_a_declaration_is_pinned_and_its_venv_is_an_oracle_folder(fields) -> None:
    base = {"package": "toy-tts==1.0", "venv": ".oracle-toy", "python_env": "KOE_ORACLE_TOY_PYTHON", "scripts": "tests/oracle_toy"}
    with pytest.raises(ValueError):
        UpstreamOracle(**{**base, **fields})


def test_the_makefile_copies_a_source_oracle_out_of_the_checkouts() -> None:
    """A source oracle's venv gets a copy of `<UPSTREAM_SOURCES>/<repo>@<commit>` (never the checkout
    itself: upstream writes into its tree) and a .pth naming its source paths inside that copy."""
    sources = {f: o for f, o in declared().items() if o.source}
    assert sources, "no family's oracle is a source checkout"
    for family, o in sources.items():
        declared_in = _declared_in(family)
        dry = subprocess.run(
            ["make", "--no-print-directory", "-n", "-W", declared_in, target(family), "UPSTREAM_SOURCES=/checkouts"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        copy = f"{o.venv}/src/{o.source_repo}"
        assert f'cp -R "/checkouts/{o.source}" {copy}' in dry, dry
        pth = next(ln for ln in dry.splitlines() if "_koe_upstream_source.pth" in ln)
        for p in o.source_paths:
            assert f'"{ROOT / copy / p if p != "." else ROOT / copy}"' in pth, pth
        assert 'test -d "/checkouts/' in dry and f"touch {o.venv}/.installed" in dry
        if not o.build_isolation:
            assert "--no-build-isolation" in next(ln for ln in dry.splitlines() if "--no-deps" in ln)
