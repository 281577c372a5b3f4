import inspect
import os
import re
import sys

# Before torch loads, here and in every process the tests start (oracles, CLI, servers): MKL's
# products independent of memory alignment, which bit-for-bit comparisons need on some CPUs
# (see koe/runtime/process.py reproducible_blas; koe's command line sets the same).
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Goldens upstream makes on a kind of CPU that has none committed (golden_files.GoldenFiles.made_here):
# one folder for the session, made by the first process (the workers inherit it), removed at its end.
# The folders tests only read, written once for the session (shared_folders.py): the same.
from golden_files import HERE  # noqa: E402
from shared_folders import ROOT as SHARED  # noqa: E402
from shared_folders import check_unchanged  # noqa: E402

for _name, _prefix in ((HERE, "koe-goldens-here-"), (SHARED, "koe-shared-")):
    if _name not in os.environ:
        import atexit
        import shutil
        import tempfile

        os.environ[_name] = tempfile.mkdtemp(prefix=_prefix)
        atexit.register(shutil.rmtree, os.environ[_name], True)

# Parity needs a fixed thread count on both sides (floats move with the thread count).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("koe-session")


# -- caches of the tests' own: no test reads or writes the user's ----------------------------------------


@pytest.fixture(scope="session", autouse=True)
def private_homes(tmp_path_factory, pytestconfig):
    """KOE_HOME, HF_HOME and XDG_CACHE_HOME in this run's temp folder, set before any other fixture
    and inherited by every process the tests start; the Hugging Face cache variables that would win
    over HF_HOME are unset. The C kernels build into `.pytest_cache/d/koe-kernels` (KOE_KERNEL_CACHE),
    kept between runs so a rerun does not compile them again. pip keeps its own cache (PIP_CACHE_DIR
    set to where it already was): the install test's downloads stay cached. A test that needs another
    home sets its own on top."""
    root = tmp_path_factory.mktemp("homes")
    pip_cache = os.environ.get("PIP_CACHE_DIR") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KOE_HOME", str(root / "koe"))
        mp.setenv("HF_HOME", str(root / "hf"))
        mp.setenv("XDG_CACHE_HOME", str(root / "cache"))
        cache = getattr(pytestconfig, "cache", None)  # None under -p no:cacheprovider: the kernels then build in the temp folder
        mp.setenv("KOE_KERNEL_CACHE", str(cache.mkdir("koe-kernels") if cache else root / "kernels"))
        mp.setenv("PIP_CACHE_DIR", pip_cache)
        for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_ASSETS_CACHE", "HF_XET_CACHE"):
            mp.delenv(name, raising=False)
        yield root


def pytest_sessionfinish(session, exitstatus) -> None:
    """A test that changed a shared folder (which later tests read) fails the run; checked once, by
    the session's first process (xdist's controller, after every worker is done)."""
    if hasattr(session.config, "workerinput"):
        return
    problems = check_unchanged()
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter:
            reporter.write_line("")
            reporter.write_sep("=", "shared folders changed", red=True)
        for line in problems:
            (reporter.write_line if reporter else print)(f"ERROR: {line}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- test lanes: markers given by what a test uses ------------------------------------------------------
#
# unit: the default; contract: the engine contract every family passes (tests/engines/test_*contract*);
# oracle: runs an upstream package in its own venv (calls run_oracle / oracle_python, itself, through
# its fixtures or the test files' helpers they call, or compares with `koe bench --compare`);
# browser: drives Chromium (a fixture of tests/browser.py, or a test_web* / test_browser* file);
# slow: measured (SLOW below). `make test-fast` runs `not oracle and not browser and not slow`;
# `make test` runs everything.

TESTS = Path(__file__).resolve().parent
ORACLE_CALLS = frozenset({"run_oracle", "oracle_python"})
# Tests that reach an oracle or the peer through `koe bench --compare upstream|mizuoto` (the bench's
# workers start those venvs, not the harness): matched on "file::test" names.
BENCH_COMPARES = re.compile(r"test_bench\w*\.py::\w*(against_upstream|against_mizuoto|three_way|equals_upstream)")
# Measured: the slowest modules outside the oracle and browser lanes, as "file::test" prefixes
# (`pytest --durations=80 --junitxml` over the fast lane, 2 cores at load 6, 78d2b79: 1188 s of tests
# in all; each of these costs 19-155 s at 3-6 s a test: training runs, fresh interpreters, real
# processes and signals). Module-wide: their module fixtures are much of the cost.
SLOW = (
    "tests/test_install.py::",  # pip installs into a fresh venv (minutes)
    "tests/engines/qwen3_tts/test_qwen3_tts_finetune.py::",  # 155 s: training runs
    "tests/test_cli_train.py::",  # 135 s: koe train speaker end to end
    "tests/test_server_drain.py::",  # 28 s: a real server drained by SIGTERM
    "tests/test_bench_families.py::",  # 27 s: koe bench --quick per family
    "tests/test_cli_subprocess.py::",  # 26 s: koe in real processes, streaming to a pipe
    "tests/test_process_settings.py::",  # 19 s: fresh interpreters, one per setting
    "tests/test_demo.py::",  # 17 s: koe demo, pulling from a fake hub
)
_reaches_memo: dict = {}


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _reaches_oracle(fn) -> bool:
    """Whether `fn` (a test or a fixture) names run_oracle / oracle_python, directly or through the
    functions of the tests' own files it names (followed, memoized per code object)."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    if code is None or not code.co_filename.startswith(str(TESTS)):
        return False
    if code in _reaches_memo:
        return _reaches_memo[code]
    _reaches_memo[code] = False  # a cycle reaches nothing new
    found = False
    for name in _code_names(code):
        target = fn.__globals__.get(name)
        if name in ORACLE_CALLS or (callable(target) and _reaches_oracle(target)):
            found = True
            break
    _reaches_memo[code] = found
    return found


def _fixture_functions(item):
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        for d in defs:
            yield d.func


def _goldens_oracle_missing(item) -> str | None:
    """For a test marked `goldens_oracle(family)`: why it cannot run here (that family's oracle is
    goldens-only, built by `make oracle-FAMILY` and never by `make test`), or None when its venv is here."""
    marker = item.get_closest_marker("goldens_oracle")
    if marker is None:
        return None
    from koe.engines.oracle import declared

    oracle = declared()[marker.args[0]]
    python = os.environ.get(oracle.python_env) or str(TESTS.parent / oracle.venv / "bin" / "python")
    return None if Path(python).is_file() else f"needs {oracle.venv} (make oracle-{marker.args[0]})"


def pytest_collection_modifyitems(config, items) -> None:
    away = [item for item in items if _goldens_oracle_missing(item)]
    if away:  # CI's lane for such a family is its golden files; a live comparison runs where its oracle is built
        config.hook.pytest_deselected(items=away)
        items[:] = [item for item in items if item not in away]
    for item in items:
        path = Path(str(item.fspath)).resolve()
        rel = f"{path.relative_to(TESTS.parent)}::{item.name}" if path.is_relative_to(TESTS.parent) else item.nodeid
        fixtures = list(_fixture_functions(item))
        lanes = set()
        if "contract" in path.name:
            lanes.add("contract")
        if path.name.startswith(("test_web", "test_browser")) or any(getattr(f, "__module__", "") == "browser" for f in fixtures):
            lanes.add("browser")
        if (
            item.get_closest_marker("oracle")
            or BENCH_COMPARES.search(rel)
            or any(_reaches_oracle(f) for f in [getattr(item, "function", None), *fixtures] if f)
        ):
            lanes.add("oracle")
        if any(rel.startswith(s) for s in SLOW):
            lanes.add("slow")
        if not lanes & {"contract", "browser", "oracle"}:
            lanes.add("unit")
        for lane in sorted(lanes):
            if not item.get_closest_marker(lane):
                item.add_marker(lane)
