"""A preallocated key/value cache written in place: the cache a captured decode graph needs.

Strategy: every layer owns two buffers (B, Hkv, capacity, D) allocated once. `update(pos, k, v)`
writes the new keys/values into them (gpt-fast style) and returns what attention should read:

- `pos` a LongTensor (T,) of cache positions (a device tensor the caller advances in place):
  the rows are written with `index_copy_` and the *whole* buffers are returned, so one captured
  graph serves every step; the caller masks positions that are not written yet (see
  `StaticCache.mask`). This is the talker's one-token step.
- `pos` a Python int: rows `[pos, pos + T)` are written with `copy_` and the *prefix*
  `[0, pos + T)` is returned, exactly as long as a concatenating cache would be, so attention needs
  no mask. The shape differs per step, so this serves loops that are captured unrolled, step by
  step (the code predictor's 15 steps inside one graph).

Nothing is reallocated after construction, so buffer addresses stay fixed across graph replays.
The concatenating `ConcatCache` (kv_cache.py) stays the CPU exact path; this cache is for CUDA.
"""

from __future__ import annotations

import torch


class StaticLayerCache:
    """One layer's preallocated keys and values (B, Hkv, capacity, D)."""

    __slots__ = ("keys", "values")

    def __init__(self, batch: int, kv_heads: int, capacity: int, head_dim: int, dtype: torch.dtype, device: torch.device | str) -> None:
        self.keys = torch.zeros((batch, kv_heads, capacity, head_dim), dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)

    @property
    def capacity(self) -> int:
        return self.keys.shape[-2]

    def update(self, pos: int | torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k/v (B, Hkv, T, D) at `pos`; return the keys/values attention reads (see module doc)."""
        if isinstance(pos, torch.Tensor):
            self.keys.index_copy_(2, pos, k)
            self.values.index_copy_(2, pos, v)
            return self.keys, self.values
        end = pos + k.shape[-2]
        if end > self.capacity:
            raise IndexError(f"static cache full: writing up to position {end} but capacity is {self.capacity}")
        self.keys[:, :, pos:end].copy_(k)
        self.values[:, :, pos:end].copy_(v)
        return self.keys[:, :, :end], self.values[:, :, :end]

    def zero_(self) -> None:
        self.keys.zero_()
        self.values.zero_()


class _BoundLayer:
    """Adapts a `StaticLayerCache` to the decoder layers' `update(k, v)` protocol (kv_cache.LayerCache)."""

    __slots__ = ("cache", "layer")

    def __init__(self, cache: StaticCache, layer: StaticLayerCache) -> None:
        self.cache, self.layer = cache, layer

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cache.position is None:
            raise RuntimeError("StaticCache.position is not set: call cache.at(pos) before running the layers")
        return self.layer.update(self.cache.position, k, v)


class StaticCache:
    """A stack of `StaticLayerCache`, one per decoder layer, with the write position of the next step.

    `at(pos)` sets where the next forward pass writes (a Python int, or a LongTensor (T,) of cache
    positions); `layers[i].update(k, v)` then follows the protocol the decoder layers call.
    """

    def __init__(self, num_layers: int, batch: int, kv_heads: int, capacity: int, head_dim: int, dtype: torch.dtype, device: torch.device | str) -> None:
        self.storage = [StaticLayerCache(batch, kv_heads, capacity, head_dim, dtype, device) for _ in range(num_layers)]
        self.layers = [_BoundLayer(self, layer) for layer in self.storage]
        self.position: int | torch.Tensor | None = None

    @property
    def capacity(self) -> int:
        return self.storage[0].capacity

    @property
    def batch(self) -> int:
        return self.storage[0].keys.shape[0]

    def at(self, pos: int | torch.Tensor) -> StaticCache:
        """Set the write position of the next forward pass; returns self for chaining."""
        self.position = pos
        return self

    def load_prefix(self, keys: list[torch.Tensor], values: list[torch.Tensor], rows: int | None = None) -> None:
        """Copy per-layer (b, Hkv, L, D) keys/values (e.g. from a prefill's concatenating cache) into
        positions [0, L) of rows [0, b); other rows and positions are zeroed."""
        for layer, k, v in zip(self.storage, keys, values, strict=True):
            layer.zero_()
            b, length = k.shape[0], k.shape[-2]
            if length > layer.capacity:
                raise IndexError(f"prefix of {length} positions does not fit a static cache of capacity {layer.capacity}")
            layer.keys[:b, :, :length].copy_(k)
            layer.values[:b, :, :length].copy_(v)

    @staticmethod
    def mask(valid: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Attention mask (B, 1, T, capacity) for queries at cache positions `pos` (T,).

        `valid` (B, capacity) bool is False at left padding; a key is visible when it is valid and
        at or before the query's position (so unwritten positions are never read).
        """
        capacity = valid.shape[-1]
        kv = torch.arange(capacity, device=valid.device)
        causal = kv[None, :] <= pos[:, None]  # (T, capacity)
        return causal[None, None] & valid[:, None, None, :]  # (B, 1, T, capacity)
