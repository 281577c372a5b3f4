"""IndexTTS's GPT: a GPT-2 decoder over [speech conditioning | text | mel codes], with a KV cache.

Upstream builds it from HuggingFace's GPT-2 (no position embedding of its own: IndexTTS adds learned
text and mel positions to the embeddings) and, on the CPU, generates without a cache, recomputing
the whole sequence at every step. koe keeps keys and values; a new row's products are the same
float operations in the same shapes per row as upstream's (`addmm` rows do not depend on how many
rows are multiplied with them, and the last row of a causal attention equals one query over the same
keys), which the goldens check. Parameter names are `gpt.pth`'s.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Conv1D(nn.Module):
    """GPT-2's linear layer: the weight is stored (in, out) and applied with one `addmm`."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return out.view(*x.shape[:-1], out.size(-1))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's "gelu_new", written out as its reference computes it (torch's tanh GELU rounds differently)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class KVCache:
    """Keys and values of every layer for `rows` sequences, grown in place up to `capacity` positions.

    `padding`: the prompt's first positions are padding that no query attends to (upstream pads a
    prompt on the left where it dropped start/stop text ids, and masks those positions out)."""

    def __init__(self, layers: int, rows: int, heads: int, head_dim: int, capacity: int, dtype: torch.dtype, device=None, padding: int = 0):
        shape = (layers, rows, heads, capacity, head_dim)
        self.keys = torch.empty(shape, dtype=dtype, device=device)
        self.values = torch.empty(shape, dtype=dtype, device=device)
        self.length = 0
        self.padding = padding

    def mask(self, count: int) -> torch.Tensor | None:
        """The additive attention mask of `count` new positions, (1, 1, count, length + count), as
        upstream's HF GPT-2 builds it from its attention mask when one holds a zero (0 where a query
        may look, the dtype's lowest value where it may not: later positions and the padding);
        None without padding (then attention is plainly causal)."""
        if not self.padding:
            return None
        total = self.length + count
        low = torch.finfo(self.keys.dtype).min
        mask = torch.full((count, total), low, dtype=self.keys.dtype, device=self.keys.device)
        mask = torch.triu(mask, diagonal=self.length + 1)
        mask[:, : self.padding] = low
        return mask[None, None]

    @property
    def capacity(self) -> int:
        return self.keys.shape[3]

    def reorder(self, rows: torch.Tensor) -> None:
        """Row i now continues row `rows[i]` (a beam search's survivors).

        Only the rows that change are copied, each straight from its source row (a gather of every
        row and a copy back moved four times the bytes, as much as a step's weights late in a long
        search): a row is overwritten once no pending copy still reads it, and a cycle of rows
        sets one row aside first."""
        n = self.length
        pending = {i: s for i, s in enumerate(rows.tolist()) if s != i}
        aside: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        while pending:
            read = {s for s in pending.values() if s not in aside}
            ready = [i for i in pending if i not in read]
            if not ready:  # every pending row is still read by another: a cycle
                i = min(pending)
                aside[i] = (self.keys[:, i, :, :n].clone(), self.values[:, i, :, :n].clone())
                continue
            for i in ready:
                s = pending.pop(i)
                keys, values = aside.get(s) or (self.keys[:, s, :, :n], self.values[:, s, :, :n])
                self.keys[:, i, :, :n] = keys
                self.values[:, i, :, :n] = values


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn = Conv1D(dim, 3 * dim)
        self.c_proj = Conv1D(dim, dim)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask`: an additive mask over the cached and new positions (then it, not causality, decides)."""
        b, n, dim = x.shape
        q, k, v = self.c_attn(x).split(dim, dim=2)
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            start = cache.length
            if n > 1 and start:
                raise ValueError("a cached step takes one new position, or the whole prompt first")
            cache.keys[layer, :, :, start : start + n] = k  # a one-row prompt fills every row
            cache.values[layer, :, :, start : start + n] = v
            if start:  # the cache's rows are strided; the attention reads them as they are (same bits)
                k = cache.keys[layer, :, :, : start + n]
                v = cache.values[layer, :, :, : start + n]
            else:
                k, v = k.contiguous(), v.contiguous()
        else:
            k, v = k.contiguous(), v.contiguous()
        if mask is None:
            out = F.scaled_dot_product_attention(q.contiguous(), k, v, is_causal=n > 1)
        else:
            out = F.scaled_dot_product_attention(q.contiguous(), k, v, attn_mask=mask)
        out = out.transpose(1, 2).contiguous()
        return self.c_proj(out.reshape(b, n, dim).contiguous())


class MLP(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.c_fc = Conv1D(dim, 4 * dim)
        self.c_proj = Conv1D(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(gelu_tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-5)
        self.attn = Attention(dim, heads)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-5)
        self.mlp = MLP(dim)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attn(self.ln_1(x), cache, layer, mask) + x
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """The decoder stack (`gpt.h.*`, `gpt.ln_f`), fed embeddings."""

    def __init__(self, dim: int, layers: int, heads: int):
        super().__init__()
        self.heads = heads
        self.h = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim, eps=1e-5)

    def new_cache(self, rows: int, capacity: int, padding: int = 0) -> KVCache:
        w = self.ln_f.weight
        dim = w.shape[0]
        return KVCache(len(self.h), rows, self.heads, dim // self.heads, capacity, w.dtype, w.device, padding)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        if cache is not None and cache.length + x.shape[1] > cache.capacity:
            raise ValueError(f"the KV cache holds {cache.capacity} positions")
        mask = None if cache is None else cache.mask(x.shape[1])
        for i, block in enumerate(self.h):
            x = block(x, cache, i, mask)
        if cache is not None:
            cache.length += x.shape[1]
        return self.ln_f(x)


class PositionEmbedding(nn.Module):
    """Learned positions (`*_pos_embedding.emb.weight`), counted from 0 in each of text and mel."""

    def __init__(self, positions: int, dim: int):
        super().__init__()
        self.emb = nn.Embedding(positions, dim)

    def forward(self, start: int, count: int) -> torch.Tensor:
        return self.emb(torch.arange(start, start + count, device=self.emb.weight.device))
