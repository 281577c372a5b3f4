"""Each family's oracle declaration (koe.engines.oracle) is complete, and the Makefile's view of it
(scripts/oracles.py) names every declared family: no oracle is written by hand anywhere else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from oracle_harness import ORACLES

from koe.engines import registry
from koe.engines.oracle import UpstreamOracle, declared, target, torch_home

ROOT = Path(__file__).resolve().parent.parent


def test_every_declared_oracle_has_its_files() -> None:
    assert declared(), "no family declares an oracle"
    for family, o in declared().items():
        assert (ROOT / o.scripts).is_dir(), family
        for name in (*o.requirements, *o.nodeps):
            assert (ROOT / name).is_file(), f"{family}: {name}"
            pins = [ln.split("==")[0].strip().lower() for ln in (ROOT / name).read_text().splitlines() if "==" in ln and not ln.startswith("#")]
            assert o.package.split("==")[0].lower() not in pins, f"{family}: the package is pinned once, in its declaration"


def test_the_harness_reads_its_table_from_the_registered_specs() -> None:
    assert ORACLES == declared()
    assert set(ORACLES) <= set(registry.families())


def test_one_oracle_installs_torch_and_the_others_share_it() -> None:
    oracles = declared()
    home = torch_home(oracles)
    assert home is not None and not home.shares_torch
    assert next(iter(oracles.values())) is home  # the first declared: the one make builds first


def test_the_makefile_variables_name_every_oracle() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "oracles.py"), "make"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    lines = dict(ln.split(" := ", 1) for ln in out.splitlines() if " := " in ln)
    assert lines["ORACLE_FAMILIES"].split() == list(declared())
    for family, o in declared().items():
        assert lines[f"oracle_{family}_venv"] == o.venv and lines[f"oracle_{family}_package"] == o.package
        assert lines[f"oracle_{family}_python_env"] == o.python_env
        assert (ROOT / lines[f"oracle_{family}_declared_in"]).is_file()
    listing = subprocess.run([sys.executable, str(ROOT / "scripts" / "oracles.py")], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert all(f"make {target(f)}" in listing for f in declared())


@pytest.mark.parametrize("fields", [{"package": "toy-tts"}, {"venv": ".toy"}])
def test_a_declaration_is_pinned_and_its_venv_is_an_oracle_folder(fields) -> None:
    base = {"package": "toy-tts==1.0", "venv": ".oracle-toy", "python_env": "KOE_ORACLE_TOY_PYTHON", "scripts": "tests/oracle_toy"}
    with pytest.raises(ValueError):
        UpstreamOracle(**{**base, **fields})
