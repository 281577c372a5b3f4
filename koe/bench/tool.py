"""A family's own measuring tool (`FamilyBench.tools`), run by name.

    python -m koe.bench.tool [--family FAMILY] NAME [ARGS...]      # e.g. codec --threads 2
    python -m koe.bench.tool --list

Without `--family`, the one family that declares a tool of that name. The tool is handed
`koe.bench.kit` and the rest of the arguments (`--help` after the name: the tool's own help).
"""

from __future__ import annotations

import sys

from koe.bench.families import benches, import_target


def tools() -> dict[str, list[tuple[str, str]]]:
    """Tool name -> [(family, "module:function"), ...] over the declared benchmarks."""
    found: dict[str, list[tuple[str, str]]] = {}
    for family, bench in benches().items():
        for name, target in (bench.tools if bench else {}).items():
            found.setdefault(name, []).append((family, target))
    return found


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    family = None
    if argv[:1] == ["--family"] and len(argv) > 1:
        family, argv = argv[1], argv[2:]
    table = tools()
    listing = "; ".join(f"{name} ({', '.join(f for f, _ in owners)})" for name, owners in table.items()) or "none"
    if not argv or argv[0] in ("--list", "-h", "--help"):
        print(f"usage: python -m koe.bench.tool [--family FAMILY] NAME [ARGS...]\ntools: {listing}")
        return 0
    name, rest = argv[0], argv[1:]
    owners = [(f, t) for f, t in table.get(name, []) if family in (None, f)]
    if len(owners) != 1:
        why = "several families declare it: pass --family" if len(owners) > 1 else "no such tool" + (f" for --family {family}" if family else "")
        print(f"python -m koe.bench.tool: {name}: {why}; tools: {listing}", file=sys.stderr)
        return 2
    from koe.bench import kit

    return int(import_target(owners[0][1])(kit, rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
