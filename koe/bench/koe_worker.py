"""The koe side of the benchmark: one family's worker (`FamilyBench.worker`), answering the parent's
`load` and `run` commands over `wire`'s protocol.

Run as `python -m koe.bench.koe_worker FAMILY [module:Class]` (no FAMILY: the default family; no
class: the family's declared one, else the contract-driven `koe.bench.contract.ContractWorker`);
the parent (`koe.bench.runner.Worker`) drives it. The worker class is handed `wire` (a family's
sits below `koe.bench` in the layers).
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> None:
    import sys

    from koe.bench import wire
    from koe.bench.families import family_bench, import_target
    from koe.runtime.process import keep_freed_memory

    keep_freed_memory()  # as every koe command does (koe.cli.main)
    args = list(argv if argv is not None else sys.argv[1:])
    family, target = (args + [None, None])[:2]
    worker = import_target(target or family_bench(family).worker or "koe.bench.contract:ContractWorker")(wire)
    wire.serve({"load": worker.load, "run": worker.run})


if __name__ == "__main__":
    main()
