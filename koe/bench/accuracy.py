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


def compare(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Cosine (mean and min over rows) and top-1 agreement of logits `b` against reference `a` (..., V)."""
    a2, b2 = a.reshape(-1, a.shape[-1]).double(), b.reshape(-1, b.shape[-1]).double()
    cos = F.cosine_similarity(a2, b2, dim=-1)
    return {"cosine_mean": cos.mean().item(), "cosine_min": cos.min().item(), "top1_agreement": (a2.argmax(-1) == b2.argmax(-1)).double().mean().item()}


def snr_db(ref: torch.Tensor, test: torch.Tensor) -> float:
    noise = (ref.double() - test.double()).pow(2).sum().item()
    return math.inf if noise == 0 else 10 * math.log10(ref.double().pow(2).sum().item() / noise)


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
