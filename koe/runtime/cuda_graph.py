"""CUDA graphs as small objects: static buffers, `capture()`, `run()`; one memory pool per family.

Strategy: a `CapturedStep` wraps a function of no arguments that reads its inputs from static
buffers and returns its outputs (tensors the function allocates or static buffers it writes).
`capture()` runs it a few times on a side stream (so lazy initialisation, cuBLAS workspaces and
the allocator settle), then records one run into a `torch.cuda.CUDAGraph`; `run()` replays the
recording and returns the outputs of the *captured* run — static buffers whose contents the next
`run()` overwrites, so callers clone what they keep. Inputs are changed only by writing into the
buffers in place (`copy_`, `fill_`), never by rebinding them.

`GraphBuckets` holds graphs per batch-size bucket (a batch of 3 runs in bucket 4 with a padding
row), all captured into one shared memory pool, so the graphs of every bucket together use about
as much memory as the largest one. On a machine without CUDA nothing here touches the GPU until
`capture()` is called.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import torch

DEFAULT_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32)


class CapturedStep:
    """One function captured as one CUDA graph. `run()` returns static buffers (see module doc)."""

    def __init__(self, fn: Callable[[], Any], *, pool: Any = None, warmup: int = 2, name: str = "step") -> None:
        self.fn = fn
        self.pool = pool
        self.warmup = warmup
        self.name = name
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: Any = None

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def capture(self) -> None:
        """Warm up on a side stream, then record one run of `fn`. Raises on any CUDA capture error."""
        if not torch.cuda.is_available():
            raise RuntimeError(f"cannot capture {self.name!r}: this torch build sees no CUDA device")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self.fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        # thread_local: other threads (a server's) may use CUDA while this one captures.
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            self.outputs = self.fn()
        torch.cuda.synchronize()
        self.graph = graph

    def run(self) -> Any:
        """Replay the graph; returns the captured run's outputs: static buffers, overwritten by the next run."""
        if self.graph is None:
            raise RuntimeError(f"graph {self.name!r} was not captured: call capture() first")
        self.graph.replay()
        return self.outputs


def bucket_for(batch: int, buckets: Sequence[int] = DEFAULT_BATCH_BUCKETS) -> int | None:
    """The smallest bucket >= `batch`, or None when the batch is larger than every bucket."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1 (got {batch})")
    ordered = sorted(buckets)
    i = bisect.bisect_left(ordered, batch)
    return ordered[i] if i < len(ordered) else None


class GraphBuckets:
    """Captured graphs keyed by (name, bucket, ...), sharing one memory pool."""

    def __init__(self, buckets: Sequence[int] = DEFAULT_BATCH_BUCKETS) -> None:
        if not buckets or min(buckets) < 1:
            raise ValueError(f"batch buckets must be positive sizes (got {tuple(buckets)})")
        self.buckets = tuple(sorted(set(buckets)))
        self._pool: Any = None
        self.graphs: dict[tuple, CapturedStep] = {}

    def bucket(self, batch: int) -> int | None:
        return bucket_for(batch, self.buckets)

    @property
    def pool(self) -> Any:
        """The shared memory pool handle, created on first use (needs CUDA)."""
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        return self._pool

    def get(self, key: tuple, make: Callable[[], Callable[[], Any]], *, warmup: int = 2) -> CapturedStep:
        """The graph for `key`, capturing `make()`'s function into the shared pool on first use."""
        step = self.graphs.get(key)
        if step is None:
            step = CapturedStep(make(), pool=self.pool, warmup=warmup, name=str(key))
            step.capture()
            self.graphs[key] = step
        return step

    def clear(self) -> None:
        """Drop every graph (their memory returns to the pool's owner once unreferenced)."""
        self.graphs.clear()
        self._pool = None
