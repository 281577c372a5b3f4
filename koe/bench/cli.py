"""The command line of the benchmark and its printed tables, for any family that declares a benchmark.

`--family`'s choices and default, and the choices, help and checks of `--case`, `--size`,
`--variant`, `--precision` and `--compare`, come from the families' declarations
(`koe.bench.families`); a family's own flags (`FamilyBench.flags`) are added once each and refused
for the families that do not declare them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from koe.bench import families
from koe.bench.families import default_family, family_bench, import_target
from koe.bench.runner import BenchError, BenchOptions, compared, run_bench

PRECISIONS = ("fp32", "bf16", "int8", "int4")  # koe's precision names, in this order in the help


def _declared() -> dict:
    return {name: bench for name, bench in families.benches().items() if bench is not None}


def _each(pick) -> str:
    """'family: what; family: what' over the families that declare a benchmark (for help texts)."""
    return "; ".join(f"{name}: {text}" for name, bench in _declared().items() if (text := pick(bench)))


def _with_default(values, default, note: str = "") -> str:
    return ", ".join(f"{v} (default{': ' + note if note else ''})" if v == default else v for v in values)


def parser() -> argparse.ArgumentParser:
    declared = _declared()
    default = default_family()
    titles = ", ".join(bench.about or name for name, bench in declared.items())
    p = argparse.ArgumentParser(prog="koe bench", description=f"Benchmark koe's {titles} on this machine (random weights at the released sizes).")
    p.add_argument("--family", choices=list(families.benches()), default=None, help=f"model family (default {default}): " + ", ".join(declared))
    p.add_argument(
        "--size",
        action="append",
        choices=list(dict.fromkeys(s for b in declared.values() for s in b.sizes)),
        help="model size (repeatable): " + _each(lambda b: _with_default(b.sizes, b.default_size, b.size_help)),
    )
    p.add_argument(
        "--case",
        action="append",
        choices=list(dict.fromkeys(c for b in declared.values() for c in b.cases)),
        help="case to run (repeatable); "
        + _each(lambda b: ", ".join(b.cases) + (" (default all)" if b.default_cases == b.cases else f" (default {', '.join(b.default_cases)})")),
    )
    variants = list(dict.fromkeys(v for b in declared.values() for v in b.variants))
    if variants:
        p.add_argument(
            "--variant", choices=variants, help=_each(lambda b: " or ".join(_with_default(b.variants, b.variants[0]).split(", ")) if b.variants else "")
        )
    flags: dict[str, list] = {}
    for name, bench in declared.items():
        for flag in bench.flags:
            flags.setdefault(flag.name, []).append((name, flag))
    for flag_name, owners in flags.items():
        first = owners[0][1]
        text = "; ".join(f"{name}: {flag.help}" for name, flag in owners)
        if first.type is None:
            p.add_argument(flag_name, dest=first.key, action="store_const", const=first.switch, default=None, help=text)
        else:
            p.add_argument(flag_name, dest=first.key, type=first.type, default=None, help=text)
    p.add_argument("--runs", type=int, default=3, help="timed runs per case after warm-up (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case, excluded (default 1)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads in every process (default: all cores)")
    p.add_argument(
        "--precision",
        choices=[x for x in PRECISIONS if any(x in b.precisions for b in declared.values())],
        default="fp32",
        help="koe's precision (fp32 is exact); " + _each(lambda b: ", ".join(b.precisions)),
    )
    sides = {key: (name, s) for name, b in declared.items() for key, s in b.sides.items()}
    p.add_argument(
        "--compare",
        action="append",
        choices=list(dict.fromkeys(["upstream", *sides])),
        help="also run upstream ("
        + _each(lambda b: b.sides["upstream"].holds if "upstream" in b.sides else "")
        + ")"
        + "".join(f" or, {name} only, {s.about or s.holds} ({key})" for key, (name, s) in sides.items() if key != "upstream")
        + ", each in its own venv and process, interleaved, and print ratios; repeatable: --compare upstream --compare PEER runs all three",
    )
    p.add_argument(
        "--upstream-precision",
        choices=[x for x in PRECISIONS if any(x in b.compare_precisions for b in declared.values())],
        default="fp32",
        help="the compared sides' precision; " + _each(lambda b: ", ".join(b.compare_precisions)),
    )
    prof = p.add_mutually_exclusive_group()
    prof.add_argument("--profile", action="store_true", help="one extra run per case under cProfile (top functions in the JSON)")
    prof.add_argument("--torch-profile", action="store_true", help="one extra run per case under torch.profiler (op table in the JSON)")
    quick = _each(lambda b: ", ".join(f"{f.name} {f.quick}" for f in b.flags if f.quick is not None))
    p.add_argument("--quick", action="store_true", help=f"tiny model, 1 run, no machine probe ({quick}): a smoke test in seconds (--warmup still applies)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", type=Path, help="where random models are cached (default $KOE_HOME/bench or ~/.cache/koe/bench)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--print-profile", action="store_true", help="print the profile tables too")
    return p


def parse_options(argv: list[str] | None = None) -> tuple[BenchOptions, argparse.Namespace]:
    p = parser()
    a = p.parse_args(argv)
    family = a.family or default_family()
    try:
        bench = family_bench(family, BenchError)
    except BenchError as e:
        p.error(str(e))
    cases = a.case or list(bench.default_cases)
    wrong = [c for c in cases if c not in bench.cases]
    if wrong:
        p.error(f"--family {family} has no case {wrong[0]!r}; its cases: {', '.join(bench.cases)}")
    sizes = a.size or ([bench.quick_size] if a.quick else [bench.default_size])
    wrong = [s for s in sizes if s not in bench.sizes]
    if wrong:
        p.error(f"--family {family} has no size {wrong[0]!r}; its sizes: {', '.join(bench.sizes)}")
    variant = getattr(a, "variant", None)
    if variant is not None and variant not in bench.variants:
        p.error(f"--family {family} has no variant {variant!r}" + (f"; its variants: {', '.join(bench.variants)}" if bench.variants else ""))
    if a.precision not in bench.precisions or a.upstream_precision not in bench.compare_precisions:
        note = f" ({bench.precision_note})" if bench.precision_note else ""
        p.error(f"--family {family} runs --precision {' or '.join(bench.precisions)} and --upstream-precision {' or '.join(bench.compare_precisions)}{note}")
    wrong = [key for key in a.compare or [] if key not in bench.sides]
    if wrong:
        owners = [name for name, b in _declared().items() if wrong[0] in b.sides]
        p.error(f"--compare {wrong[0]} compares {', '.join(owners) or 'no family'} only (--family {family} compares: {', '.join(bench.sides) or 'nothing'})")
    own = {f.key for f in bench.flags}
    for name, b in _declared().items():
        for flag in b.flags:
            if flag.key not in own and getattr(a, flag.key, None) is not None:
                p.error(f"--family {family} has no {flag.name} (it is {name}'s)")
    family_options = {}
    for flag in bench.flags:
        given = getattr(a, flag.key)
        value = given if given is not None else flag.quick if a.quick and flag.quick is not None else flag.default
        if flag.least is not None and value is not None and value < flag.least:
            raise SystemExit(f"koe bench: {flag.name} must be >= {flag.least}")
        family_options[flag.key] = value
    if a.runs < 1:
        raise SystemExit("koe bench: --runs must be >= 1")
    if a.warmup < 0:
        raise SystemExit("koe bench: --warmup must be >= 0")
    opts = BenchOptions(
        sizes=sizes,
        cases=cases,
        runs=a.runs,
        warmup=a.warmup,
        threads=a.threads,
        precision=a.precision,
        compare=list(dict.fromkeys(a.compare)) if a.compare else None,
        upstream_precision=a.upstream_precision,
        profile="cprofile" if a.profile else "torch" if a.torch_profile else None,
        seed=a.seed,
        models_root=a.models,
        out=a.out,
        family=family,
        variant=variant or (bench.variants[0] if bench.variants else None),
        family_options=family_options,
    )
    if a.quick:
        opts.runs, opts.bandwidth = 1, False
    return opts, a


def format_table(results: dict, width: int | None = None) -> str:
    """The summary as plain-text tables no wider than `width` (default: the terminal's), by the results'
    family's `table`: one row per size, case and side, each value the median of the timed runs (the
    JSON has every run and the minimums). Results without a family (from before families were named
    in them) are the default family's."""
    from koe.bench import kit

    results = results if "family" in results else {**results, "family": default_family()}
    return import_target(family_bench(results["family"]).table or "koe.bench.contract:table")(kit, results, width)


def ratio_legend(family: str, compared: list[str]) -> str:
    """The line under the table that says how to read its ratio rows."""
    bench = family_bench(family)
    rows = ", ".join(f"koe/{bench.sides[side].short}" for side in compared)
    over = " / ".join(f"{side}'s" for side in compared)
    faster = f", except {' and '.join(bench.faster)} where above 1 is faster" if bench.faster else ""
    return f"{rows}: koe's median over {over}; below 1 is faster{faster}"


def main(argv: list[str] | None = None) -> int:
    """`koe bench` entry point; returns the exit status."""
    opts, a = parse_options(argv)
    try:
        results = run_bench(opts, progress=lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True))
    except BenchError as e:
        print(f"koe bench: {e}", file=sys.stderr)
        return 2
    print(format_table(results))
    if opts.compare:
        print(ratio_legend(opts.family, compared(opts)))
    if a.print_profile:
        for size, per in results["sizes"].items():
            for case, entry in per["cases"].items():
                for side in ("koe", *family_bench(opts.family).sides):
                    if entry.get(side, {}).get("profile"):
                        print(f"\n== {size} {case} {side} ==\n{entry[side]['profile']}")
    if opts.out:
        print(f"results: {opts.out}")
    return 0
