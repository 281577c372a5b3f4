"""Error of an opt-in precision mode against the exact float32 path, on the same weights: each
family's `accuracy` tool (`FamilyBench.tools`), and the agreement measures they share.

    python -m koe.bench.accuracy [--family FAMILY] --size 0.6b --precision int8 [--frames 24] [--out acc.json]

Without `--family`, the family that declares an `accuracy` tool (the default family when several
do); the rest of the arguments are the tool's (`--help`: its own help).
"""

from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F


def cosine(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Cosine similarity of `b`'s rows against reference `a`'s (..., D), in float64: mean and min over rows."""
    cos = F.cosine_similarity(a.reshape(-1, a.shape[-1]).double(), b.reshape(-1, b.shape[-1]).double(), dim=-1)
    return {"cosine_mean": cos.mean().item(), "cosine_min": cos.min().item()}


def compare(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Cosine (mean and min over rows) and top-1 agreement of logits `b` against reference `a` (..., V)."""
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return {**cosine(a2, b2), "top1_agreement": (a2.argmax(-1) == b2.argmax(-1)).double().mean().item()}


def snr_db(ref: torch.Tensor, test: torch.Tensor) -> float:
    noise = (ref.double() - test.double()).pow(2).sum().item()
    return math.inf if noise == 0 else 10 * math.log10(ref.double().pow(2).sum().item() / noise)


def accuracy_tool(
    kit,
    argv: list[str] | None,
    family: str,
    doc: str,
    measure,
    precisions: tuple[str, ...],
    sizes: tuple[str, ...],
    default_size: str = "tiny",
    variants: tuple[str, ...] = ("",),
    size_help: str | None = None,
    options: tuple[tuple[str, dict], ...] = (),
) -> int:
    """A family's accuracy tool (`FamilyBench.tools["accuracy"]`): its command line (`--precision`,
    `--variant` where it has several, `--size`, its `options`, `--threads`, `--models`, `--out`),
    then `measure(kit, folder, precision, *options' values)` on the random-weight model
    (`kit.bench_model`), printed as JSON (and written to `--out`) with the size (and variant) asked."""
    import argparse
    import json
    from pathlib import Path

    p = argparse.ArgumentParser(prog=f"python -m koe.bench.accuracy --family {family}", description=doc.split("\n\n")[0])
    p.add_argument("--precision", required=True, choices=list(precisions))
    if len(variants) > 1:
        p.add_argument("--variant", default=variants[0], choices=list(variants))
    p.add_argument("--size", default=default_size, choices=list(sizes), help=size_help)
    dests = [p.add_argument(name, **kwargs).dest for name, kwargs in options]
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--models", type=Path)
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    variant = a.variant if len(variants) > 1 else variants[0]
    result = measure(kit, kit.bench_model(family, variant, a.size, a.models), a.precision, *(getattr(a, d) for d in dests))
    if len(variants) > 1:
        result.setdefault("variant", variant)
    result["size"] = a.size
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    from koe.bench import tool
    from koe.bench.families import default_family

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["--family"]:
        owners = [family for family, _ in tool.tools().get("accuracy", [])]
        argv = ["--family", owners[0] if len(owners) == 1 else default_family(), *argv]
    return tool.main([*argv[:2], "accuracy", *argv[2:]])


if __name__ == "__main__":
    raise SystemExit(main())
