"""What a family declares about its benchmark (torch-free): `koe bench --family NAME` reads it.

A family's spec names its declaration as a string (`bench = "koe.engines.f5_tts.bench:BENCH"`,
imported only by `koe bench`; `koe.engines.spec.spec_bench`). The generic benchmark (`koe.bench`)
derives its `--family`, `--case`, `--size`, `--variant`, `--precision` and `--compare` choices, its
help and its checks from these declarations, and runs the family's own `run` and `table`.

The family's bench code sits below `koe.bench` in the layers, so it never imports it: its `run`,
`table` and koe-side `worker` are handed `koe.bench.kit` (the worker: `koe.bench.wire`) instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Side:
    """A runtime `koe bench --compare KEY` runs beside koe (upstream, or a peer), in its own
    virtualenv and process: the venv's Python is `$python_env`, else `venv`/bin/python in the
    source tree (built by `make <make>`), running the worker script `worker` (a path in the source
    tree, beside the venvs; it speaks `koe.bench.wire`'s protocol)."""

    holds: str  # what the venv holds, for messages and help: "f5-tts 1.1.22"
    python_env: str  # "KOE_ORACLE_F5_PYTHON"
    venv: str  # ".oracle-f5"
    make: str  # "oracle-f5"
    worker: str  # "scripts/bench_f5_upstream_worker.py"
    short: str = "up"  # its ratio rows read koe/<short>
    about: str = ""  # for a peer: what it is ("the peer runtime ..."), in `--compare`'s help


@dataclass(frozen=True)
class Flag:
    """A flag only some families' benchmarks take (`--frames`, `--patches`, ...), as argparse's
    `name`, `help`, `type` (None: a switch that stores `switch` when given) and `default`; `quick`:
    its value under `--quick` when not given; `least`: the smallest value it accepts. Its value is
    `BenchOptions.family_options[dest]` (`dest` defaults to the name's, `--warmup-nfe` -> warmup_nfe)."""

    name: str
    help: str
    type: Any = int
    default: Any = None
    quick: Any = None
    least: int | None = None
    dest: str = ""
    switch: Any = True

    @property
    def key(self) -> str:
        return self.dest or self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class FamilyBench:
    """A family's benchmark, as `koe bench` runs it.

    `cases`: every case the family runs, in order, and `default_cases` the ones run when `--case`
    is not given; `sizes` and `default_size` (`--quick` runs `quick_size`; `size_help` says more
    about the default in `--size`'s help); `variants`: the models `--variant` picks from (the first
    is the default; none: the cases pick, among `model_variants`). `model_name(variant, size, seed)` names the cached
    random-weight folder (`koe.bench.models.bench_model`), `write_model(folder, variant, size,
    seed)` writes it at that size in the released dtype, `model_version` marks when the writer
    changed (a folder of another version is rebuilt). `run`: "module:function", `f(kit, opts,
    progress) -> results`; `table`: "module:function", `f(kit, results, width) -> str`, laid out
    from `columns` ((result key, heading, scale), ...); `worker`: "module:Class" of the koe side,
    `Class(wire)`, whose `load` and `run` answer the parent's commands. A family that names none
    of these gets `koe.bench.contract`'s: each case is `requests[case]`, the `SynthesisRequest`
    fields it speaks through the engine contract, timed from outside. `flags`: the family's own
    flags; `precisions` what `--precision` may be, `compare_precisions` what `--upstream-precision`
    may be (`precision_note` says why, when refused); `sides`: what `--compare` takes ("upstream",
    and peers); `faster`: the columns where a ratio above 1 means koe is faster (the legend);
    `tools`: the family's own measuring tools (e.g. one part of its model against another way of
    computing it), each run by `python -m koe.bench.tool NAME ...`.
    """

    cases: tuple[str, ...]
    default_cases: tuple[str, ...]
    sizes: tuple[str, ...]
    default_size: str
    model_name: Any  # (variant, size, seed) -> str
    write_model: Any  # (folder, variant, size, seed) -> None
    run: str = ""
    table: str = ""
    worker: str = ""
    requests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    model_version: int = 1
    columns: tuple[tuple[str, str, float], ...] = ()
    variants: tuple[str, ...] = ()
    model_variants: tuple[str, ...] = ()  # the variants `write_model` takes when the cases pick them (`variants` is empty)
    flags: tuple[Flag, ...] = ()
    precisions: tuple[str, ...] = ("fp32",)
    compare_precisions: tuple[str, ...] = ("fp32",)
    precision_note: str = ""
    sides: Mapping[str, Side] = field(default_factory=dict)
    faster: tuple[str, ...] = ()
    quick_size: str = "tiny"
    size_help: str = ""
    about: str = ""  # what is measured, one line (`koe bench --help`)
    tools: Mapping[str, str] = field(default_factory=dict)  # name -> "module:function", f(kit, argv) -> exit status: `python -m koe.bench.tool NAME ...`
