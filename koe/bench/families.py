"""The families `koe bench` knows: each registered spec's benchmark declaration (`spec_bench`).

Nothing here names a family: `--family`'s choices, the default family, the cases, sizes, variants,
precisions and compared sides all come from the declarations (`koe.engines.benchmark.FamilyBench`).
"""

from __future__ import annotations

from typing import Any

from koe.engines.benchmark import FamilyBench
from koe.engines.registry import specs
from koe.engines.spec import spec_bench


def benches() -> dict[str, FamilyBench | None]:
    """Family -> its benchmark declaration (None: it declares none, or it does not import: `_broken`
    says why), in the registry's order. Read at each call (the registry may have been refreshed)."""
    table: dict[str, FamilyBench | None] = {}
    for s in specs():
        try:
            table[s.family] = spec_bench(s)
            _broken.pop(s.family, None)
        except Exception as e:  # noqa: BLE001 - a plugin's declaration: any failure to import is its own, named when asked for
            table[s.family] = None
            _broken[s.family] = f"its benchmark declaration ({s.bench}) does not import: {type(e).__name__}: {e}"
    return table


_broken: dict[str, str] = {}


def default_family() -> str:
    """What `--family` defaults to: the first registered family that declares a benchmark."""
    return next(name for name, bench in benches().items() if bench is not None)


def family_bench(family: str | None, error: type[Exception] = ValueError) -> FamilyBench:
    """The declaration of `family` (None: the default family); `error` when it is unknown or declares none."""
    family = family or default_family()
    table = benches()
    if family not in table:
        raise error(f"unknown family {family!r}; koe bench runs: {', '.join(runnable())}")
    bench = table[family]
    if bench is None:
        why = _broken.get(family, "its spec has no `bench`")
        raise error(f"--family {family} declares no benchmark ({why}); koe bench runs: {', '.join(runnable())}")
    return bench


def runnable() -> list[str]:
    """The families that declare a benchmark."""
    return [name for name, bench in benches().items() if bench is not None]


def import_target(target: str) -> Any:
    """What "module:NAME" names (a family's `run`, `table` or `worker`), imported now."""
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
