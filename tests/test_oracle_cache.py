"""The oracle output cache (tests/oracle_harness.py): any change to an input is a miss, a rerun a hit.

A toy oracle (a scripts folder of this test's own, run by this Python) stands in for an upstream
package: what is checked is the key and the harness's bookkeeping, not an upstream.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from oracle_harness import cache_key, run_script

from koe.engines.oracle import UpstreamOracle

SCRIPT = """import json, random, sys
from pathlib import Path
job = json.loads(Path(sys.argv[1]).read_text())
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
if "write_to" in job:
    Path(job["write_to"]).write_text("written by the oracle")
(out / "info.json").write_text(json.dumps({"draw": random.random(), "size": len(Path(job["fixture"]).read_bytes())}))
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A toy oracle (scripts, a requirements file, a venv stamp), a fixture file, and a cache folder."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "draw.py").write_text(SCRIPT)
    (scripts / "common.py").write_text("# what draw.py would import\n")
    (tmp_path / "requirements.txt").write_text("numpy==2.0.0\n")
    fixture = tmp_path / "fixture" / "model.bin"
    fixture.parent.mkdir()
    fixture.write_bytes(b"weights " * 100)
    oracle = UpstreamOracle(
        package="toy-tts==1.0.0",
        venv=".oracle-toy",
        python_env="KOE_ORACLE_TOY_PYTHON",
        scripts=str(scripts),
        requirements=(str(tmp_path / "requirements.txt"),),
    )
    monkeypatch.setenv("KOE_ORACLE_CACHE", str(tmp_path / "cache"))
    return oracle, fixture, tmp_path


def test_every_input_is_in_the_key(toy) -> None:
    oracle, fixture, root = toy
    job = {"fixture": str(fixture), "texts": ["a", "b"]}
    python = sys.executable
    key = cache_key(oracle, python, "draw", job)
    assert cache_key(oracle, python, "draw", dict(job)) == key  # the same inputs: the same key
    changes = {
        "the job": lambda: cache_key(oracle, python, "draw", {**job, "texts": ["a", "c"]}),
        "the script's name": lambda: cache_key(oracle, python, "other", job),
        "the pinned package": lambda: cache_key(UpstreamOracle(**{**vars(oracle), "package": "toy-tts==1.0.1"}), python, "draw", job),
        "the python": lambda: cache_key(oracle, str(Path(python).with_name("python-other")), "draw", job),
    }
    for what, key_after in changes.items():
        assert key_after() != key, what
    for what, path, data in (
        ("the script's bytes", Path(oracle.scripts) / "draw.py", SCRIPT + "\n# edited\n"),
        ("a module beside it", Path(oracle.scripts) / "common.py", "# changed\n"),
        ("a stub", Path(oracle.scripts) / "stubs" / "torchaudio.py", ""),
        ("a requirements file", root / "requirements.txt", "numpy==2.0.1\n"),
        ("the fixture's bytes", fixture, "weights " * 99 + "weighty "),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_bytes() if path.exists() else None
        path.write_text(data)
        assert cache_key(oracle, python, "draw", job) != key, what
        path.unlink() if old is None else path.write_bytes(old)
        assert cache_key(oracle, python, "draw", job) == key, f"{what}: restored"


def test_a_fixture_elsewhere_with_the_same_bytes_is_the_same_key(toy) -> None:
    """Where a test's temp files are is no input: a rerun's new temp folder still hits."""
    oracle, fixture, root = toy
    moved = root / "another-run" / "model.bin"
    moved.parent.mkdir()
    shutil.copy(fixture, moved)
    assert cache_key(oracle, sys.executable, "draw", {"fixture": str(fixture)}) == cache_key(oracle, sys.executable, "draw", {"fixture": str(moved)})


def test_a_rerun_reads_the_cache_and_a_changed_input_runs_again(toy) -> None:
    oracle, fixture, root = toy
    job = {"fixture": str(fixture)}
    _, first = run_script(oracle, sys.executable, "draw", job, root / "run1")
    _, again = run_script(oracle, sys.executable, "draw", job, root / "run2")
    assert again == first and (root / "run2" / "draw-out" / "info.json").is_file()  # the cached output, in this run's folder
    fixture.write_bytes(b"other weights")
    _, changed = run_script(oracle, sys.executable, "draw", job, root / "run3")
    assert changed["draw"] != first["draw"] and changed["size"] == len(b"other weights")


def test_a_run_that_writes_outside_its_output_is_not_cached(toy) -> None:
    """The oracle writes a file its job names (koe's side then reads it): replaying only the output
    folder would skip that, so such a run always runs."""
    oracle, fixture, root = toy
    draws = []
    for run in ("run1", "run2"):
        target = root / run / "weights.txt"
        _, info = run_script(oracle, sys.executable, "draw", {"fixture": str(fixture), "write_to": str(target)}, root / run)
        assert target.read_text() == "written by the oracle"
        draws.append(info["draw"])
    assert draws[0] != draws[1]


def test_the_cache_can_be_turned_off(toy, monkeypatch) -> None:
    oracle, fixture, root = toy
    monkeypatch.setenv("KOE_ORACLE_CACHE", "0")
    draws = [run_script(oracle, sys.executable, "draw", {"fixture": str(fixture)}, root / run)[1]["draw"] for run in ("a", "b")]
    assert draws[0] != draws[1]
