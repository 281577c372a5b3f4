"""What the compared sides' bench workers share (`scripts/bench_*_worker.py`, run by `koe bench
--compare KEY` in their own virtualenvs, where koe is not installed: they never import koe).

A worker script imports this file as `bench_side` (its own folder is first on `sys.path`, as for any
script). It puts koe's `koe/bench` on `sys.path` and gives `wire` (koe's `koe/bench/wire.py`: the line
protocol, the reference clip and the timers; stdlib at import) and `family_cases(family)` (the
family's `koe/engines/<family>/bench/cases.py`, stdlib only), both read by path; `on_path` adds the
oracle's folders a worker needs (its stubs, its helpers), and `serve(worker)` answers the parent.
Nothing here imports torch: a peer's worker may need to apply its CPU settings first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the source checkout
sys.path.insert(0, str(ROOT / "koe" / "bench"))

import wire  # noqa: E402  (koe/bench/wire.py)

__all__ = ["ROOT", "family_cases", "on_path", "serve", "wire"]


def on_path(*folders: str, last: bool = False) -> None:
    """Folders of the checkout (relative to it) on `sys.path`: before the rest, the first named
    first; `last`: after the rest (stand-ins used only where the venv lacks the real package)."""
    paths = [str(ROOT / f) for f in folders]
    if last:
        sys.path.extend(paths)
    else:
        sys.path[:0] = paths


def by_path(name: str, path: Path):
    """A stdlib-only file of koe imported by its path, as module `name` (koe itself is not installed here)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def family_cases(family: str):
    """The family's bench cases (`koe/engines/<family>/bench/cases.py`, stdlib only), as module `bench_cases`."""
    return by_path("bench_cases", ROOT / "koe" / "engines" / family / "bench" / "cases.py")


def serve(worker) -> None:
    """Answer the parent's `load` and `run` commands with `worker`'s methods until it says quit."""
    wire.serve({"load": worker.load, "run": worker.run})
