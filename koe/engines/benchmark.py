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

    @classmethod
    def upstream(cls, oracle, worker: str, **fields) -> Side:
        """The side that runs the family's oracle (`koe.engines.oracle.UpstreamOracle`, its one
        declaration): its pinned package (or source checkout), venv, environment variable and make
        target (the venv's name: `.oracle-f5` -> `make oracle-f5`), running the worker script `worker`."""
        name, _, version = oracle.package.partition("==")
        holds = f"{name} {version}" if oracle.package else f"upstream {oracle.source}"
        return cls(holds, oracle.python_env, oracle.venv, oracle.venv.removeprefix("."), worker, **fields)


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
    computing it), each run by `python -m koe.bench.tool NAME ...`. `timed_keys`: what each case's
    summary takes the median of: the columns' keys and `also_timed`.
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
    also_timed: tuple[str, ...] = ()  # keys summarized beside the columns' (shown elsewhere, or kept in the JSON only)

    @property
    def timed_keys(self) -> tuple[str, ...]:
        return tuple(key for key, _, _ in self.columns) + self.also_timed


def columns(**headings: str) -> tuple[tuple[str, str, float], ...]:
    """A table's `columns`, as `FamilyBench.columns` takes them: the load time first, then each
    result key with its heading (in seconds, or the family's unit: scale 1), then the peak RSS (in GB)."""
    return (("load_s", "load s", 1), *((key, heading, 1) for key, heading in headings.items()), ("peak_rss", "peak RSS GB", 1e-9))


@dataclass(frozen=True)
class RandomModels:
    """A family's benchmark models: random weights at each size, written by its fixture writer
    (`writer`, "module:function", `f(folder, variant, size, seed=seed)`), one folder per variant,
    size and seed, named `<prefix>-<size>-<variant>-seed<seed>` (`koe.bench.models` caches them);
    `model_name` refuses a variant or size the family has no model of (ValueError)."""

    title: str  # "F5-TTS", in the refusal
    prefix: str  # "f5-tts"
    variants: tuple[str, ...]
    sizes: tuple[str, ...]
    writer: str  # "koe.engines.f5_tts.fixtures:write_random_model"

    def model_name(self, variant: str, size: str, seed: int) -> str:
        if variant not in self.variants or size not in self.sizes:
            raise ValueError(f"unknown {self.title} model {variant!r}/{size!r}: variants {self.variants}, sizes {self.sizes}")
        return f"{self.prefix}-{size}-{variant}-seed{seed}"

    def write_model(self, folder, variant: str, size: str, seed: int) -> None:
        import importlib

        module, _, name = self.writer.partition(":")
        getattr(importlib.import_module(module), name)(folder, variant, size, seed=seed)


def tensor_sizes(path) -> dict[str, int]:
    """Elements of each tensor of a safetensors file, from its header's shapes (nothing is read)."""
    from safetensors import safe_open

    sizes = {}
    with safe_open(str(path), "pt") as f:
        for key in f.keys():
            n = 1
            for d in f.get_slice(key).get_shape():
                n *= int(d)
            sizes[key] = n
    return sizes


def declare(package: str, cases, models, **fields) -> FamilyBench:
    """The declaration of a family that measures its own phases, its bench package laid out as the
    kit expects: `cases` (`CASES`, in order, and `DEFAULT_CASES` where not all run by default),
    `models` (`SIZES`, `VARIANTS` where `--variant` picks, `model_name`, `write_model`,
    `FIXTURE_VERSION`), `run.py` (`run`, `table`) and `worker.py` (`KoeWorker`) in `package`;
    `fields`: the rest of `FamilyBench`'s, the family's own."""
    defaults = {
        "cases": tuple(cases.CASES),
        "default_cases": tuple(getattr(cases, "DEFAULT_CASES", cases.CASES)),
        "sizes": tuple(models.SIZES),
        "variants": tuple(getattr(models, "VARIANTS", ())),
        "model_name": models.model_name,
        "write_model": models.write_model,
        "model_version": models.FIXTURE_VERSION,
        "run": f"{package}.run:run",
        "table": f"{package}.run:table",
        "worker": f"{package}.worker:KoeWorker",
    }
    return FamilyBench(**{**defaults, **fields})


class KoeWorker:
    """The koe side of a family's benchmark (`FamilyBench.worker` names a subclass; run by
    `koe.bench.koe_worker`), answering the parent's `load` and `run` over `wire`'s protocol
    (`wire` is `koe.bench.wire`, handed in: a family's bench code never imports `koe.bench`).

    `load` reads the model folder with its family's contract engine
    (`koe.engines.registry.load_engine`) at the precision asked, timed apart from the imports;
    `run` times one case, `case(cmd) -> dict`, which each family writes, at the threads and
    profile the command asks (`wire.run_case`)."""

    def __init__(self, wire) -> None:
        self.wire = wire
        self.engine: Any = None

    def load(self, cmd: dict) -> dict:
        import time

        from koe.engines.registry import detect, engine_class, load_engine

        self.wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        engine_class(detect(cmd["model"]).family)  # the family's modules, imported apart from the load
        imported = time.perf_counter()
        self.engine = load_engine(cmd["model"], device="cpu", precision=cmd.get("precision") or "fp32")
        load_s = time.perf_counter() - imported
        info = {"load_s": load_s, "import_s": imported - started, "peak_rss": self.wire.peak_rss(), "rss": self.wire.current_rss()}
        info["precision"] = self.engine.precision
        if hasattr(self.engine, "kernel"):
            info["kernel"] = self.engine.kernel  # what runs the products (int8 / int4), where the family names it
        return info

    def run(self, cmd: dict) -> dict:
        return self.wire.run_case(cmd, lambda: self.case(cmd))

    def case(self, cmd: dict) -> dict:
        """One timed request of `cmd["case"]` (the family's own measures)."""
        raise NotImplementedError
