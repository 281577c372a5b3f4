"""Float32 products over at least as many rows as the reference's take.

Under MKL's strict reproducibility a row's product does not depend on the other rows once a
product has four or more: on an AVX2-only AMD EPYC (torch 2.13, `MKL_CBWR=AUTO,STRICT`) MKL sums a
product of one row, or of two or three, in other orders than one of four or more (koe.runtime.exact
measures the same orders on other CPUs). Where koe multiplies fewer rows than the reference does
(one packed sequence's queries where the reference runs a padded batch, a prompt's last position
where it runs the whole prompt), it adds zero rows up to `FEWEST_ROWS` and drops their results.
"""

from __future__ import annotations

import torch

FEWEST_ROWS = 4


def with_fewest_rows(x: torch.Tensor, dim: int = -2, reference: int = FEWEST_ROWS) -> torch.Tensor:
    """`x` with zero rows added along `dim` up to `FEWEST_ROWS`, or up to `reference` (the rows the
    reference multiplies) where that is fewer; `x` itself when it has as many."""
    want = min(FEWEST_ROWS, reference)
    if x.shape[dim] >= want:
        return x
    shape = list(x.shape)
    shape[dim] = want - x.shape[dim]
    return torch.cat([x, x.new_zeros(shape)], dim=dim)
