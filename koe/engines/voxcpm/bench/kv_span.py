"""What attending over only the filled KV span saves per patch at VoxCPM2's size (a micro-benchmark).

python -m koe.engines.voxcpm.bench.kv_span 100 1500      # fill levels; JSON on stdout
"""

from __future__ import annotations

import time


def kv_span_timing(
    filled: tuple[int, ...] = (100, 1500),
    capacity: int = 8192,
    layers: int = 28 + 8,
    heads: int = 16,
    kv_heads: int = 2,
    head_dim: int = 128,
    threads: int = 2,
    repeats: int = 20,
) -> dict:
    """What attending over only the filled KV span saves per patch at VoxCPM2's size: one patch steps
    the base LM (28 layers) and the residual LM (8), each layer one SDPA of one query over its cache.
    Upstream's way: the whole static cache (`capacity` slots) with its mask; koe's: the filled span
    rounded up to `SPAN_BLOCK` (same mask rule). Median of `repeats` patches, float32, per fill level."""
    import statistics

    import torch
    import torch.nn.functional as F

    from koe.engines.voxcpm.minicpm import SPAN_BLOCK

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    cache = torch.randn(2, layers, 1, kv_heads, capacity, head_dim, generator=g)
    q = torch.randn(1, heads, 1, head_dim, generator=g)
    out: dict = {"capacity": capacity, "layers": layers, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "threads": threads, "levels": {}}
    with torch.inference_mode():
        for n in filled:
            position = n - 1
            span = min(capacity, -(-n // SPAN_BLOCK) * SPAN_BLOCK)

            def patch(slots: int, position: int = position) -> float:
                t = time.perf_counter()
                for i in range(layers):
                    k, v = cache[0, i], cache[1, i]
                    mask = (torch.arange(slots) <= position).view(1, 1, 1, -1)
                    F.scaled_dot_product_attention(q, k[:, :, :slots], v[:, :, :slots], attn_mask=mask, enable_gqa=True)
                return time.perf_counter() - t

            for _ in range(3):
                patch(capacity), patch(span)
            full, ours = [], []
            for _ in range(repeats):  # interleaved
                full.append(patch(capacity))
                ours.append(patch(span))
            f, o = statistics.median(full), statistics.median(ours)
            out["levels"][n] = {"span": span, "full_ms": 1e3 * f, "span_ms": 1e3 * o, "saved_ms": 1e3 * (f - o)}
    return out


if __name__ == "__main__":
    import json
    import sys

    levels = tuple(int(a) for a in sys.argv[1:]) or (100, 1500)
    print(json.dumps(kv_span_timing(levels), indent=1))
