"""What `koe bench` hands a family's bench code (`FamilyBench.run` and `.table`).

A family's bench code lives in its folder under `koe.engines`, below `koe.bench` in the layers, so
it never imports this package: it is given this module, and uses what it names. Its tools
(`FamilyBench.tools`, run by `python -m koe.bench.tool NAME`) are given it too.
"""

from __future__ import annotations

from koe.bench import wire
from koe.bench.models import bench_model, cache_root, cached_folder, weights_bytes
from koe.bench.runner import BenchError, Worker, compare_sides, compared, finish_run, loaded_workers, ratios, run_sizes, start_run, summarize, time_case
from koe.bench.table import case_rows, lay_out, machine_title, median, ratio_cells, same_cell, side_ratios, sizes_table

# Also, imported when first asked for (they import torch): `machine` (the machine probes), and
# koe.bench.accuracy's agreement measures `compare`, `cosine` and `snr_db` and its `accuracy_tool`
# (a family's accuracy tool's command line).
__all__ = [
    "BenchError",
    "Worker",
    "bench_model",
    "cache_root",
    "case_rows",
    "cached_folder",
    "compare_sides",
    "compared",
    "finish_run",
    "lay_out",
    "loaded_workers",
    "machine_title",
    "median",
    "ratio_cells",
    "ratios",
    "run_sizes",
    "same_cell",
    "side_ratios",
    "sizes_table",
    "start_run",
    "summarize",
    "time_case",
    "weights_bytes",
    "wire",
]


def __getattr__(name: str):
    if name == "machine":  # the machine probes (they import torch: only when a run asks)
        from koe.bench import machine

        return machine
    if name in ("accuracy_tool", "compare", "cosine", "snr_db"):  # koe.bench.accuracy's agreement measures and tool (torch)
        from koe.bench import accuracy

        return getattr(accuracy, name)
    raise AttributeError(name)
