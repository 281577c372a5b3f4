"""`koe bench`: how fast koe runs a family's models here (`--family`, each family's declared
benchmark), optionally against upstream (and peers) in their own virtualenvs and processes.

`main(argv)` is the command line (`python -m koe.bench`, wired as `koe bench`); `run_bench(opts)`
is the function behind it and returns the results as a dict (also written as JSON with `--out`).
See docs/PERFORMANCE.md for what is measured and how to read it.
"""

from koe.bench.cli import main, parse_options
from koe.bench.runner import BenchError, BenchOptions, run_bench

__all__ = ["BenchError", "BenchOptions", "main", "parse_options", "run_bench"]
