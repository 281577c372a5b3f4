"""What the machine can do, measured in the same run as the benchmark: memory read bandwidth
(a large `sum`), the bandwidth a plain fp32 matrix-vector product reaches, and (for a model that
is arithmetic-bound, such as a DiT) the rate of an fp32 matrix-matrix product."""

from __future__ import annotations

import os
import platform
import time

import torch


def read_bandwidth(gib: float = 1.0, repeats: int = 5) -> float:
    """GB/s of `x.sum()` over `gib` GiB of float32 (best of `repeats`, after one warm-up)."""
    x = torch.ones(int(gib * 2**30) // 4)
    x.sum()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best / 1e9


def matvec_bandwidth(rows: int = 3072, cols: int = 1024, count: int = 64, repeats: int = 3) -> float:
    """GB/s of fp32 `F.linear` on one token over `count` distinct (rows, cols) weights (more than the caches hold)."""
    weights = [torch.randn(rows, cols) for _ in range(count)]
    x = torch.randn(1, 1, cols)
    for w in weights:
        torch.nn.functional.linear(x, w)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for w in weights:
            torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - t)
    return count * rows * cols * 4 / best / 1e9


def matmul_gflops(rows: int = 1408, inner: int = 1024, cols: int = 2048, repeats: int = 10) -> float:
    """GFLOP/s of an fp32 matrix product at a DiT-like shape (2 x 704 frames, dim 1024 -> 2048), best of `repeats`."""
    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * rows * inner * cols / best / 1e9


def describe() -> dict:
    """CPU model, core count, torch build, load average: enough to tell two runs' machines apart."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "loadavg": list(os.getloadavg()),
    }
