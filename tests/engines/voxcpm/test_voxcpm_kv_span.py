"""koe's one-token step attends over the KV cache's filled span rounded up to `SPAN_BLOCK` slots;
upstream's `forward_step` attends over its whole static cache (`max_length` slots: 8192 for
VoxCPM2) with a mask hiding the empty ones. The two must give the same bits: checked here at
several fill levels, for head dims 64 (VoxCPM 1.5's LM) and 128 (VoxCPM2's), against upstream's
own arithmetic written out (the projections, `(arange(S) <= position).view(1, 1, 1, -1)`, SDPA
over all S slots with `enable_gqa=True`, the output projection). The empty slots hold garbage, not
zeros, so a mask that let one through would show.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from koe.engines.voxcpm.config import parse_config
from koe.engines.voxcpm.fixtures import config_for
from koe.engines.voxcpm.minicpm import SPAN_BLOCK, Attention, step_mask

CAPACITY = 8192  # VoxCPM2's max_length


def _attention(hidden: int, heads: int, kv_heads: int, head_dim: int, seed: int) -> Attention:
    lm = replace(
        parse_config(config_for("VoxCPM2", "tiny")).lm, hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads, kv_channels=head_dim
    )
    torch.manual_seed(seed)
    attn = Attention(lm)
    with torch.no_grad():
        for p in attn.parameters():
            p.copy_(torch.randn(p.shape) / p.shape[-1] ** 0.5)
    return attn.eval()


def _upstream_step(attn: Attention, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, position: int) -> torch.Tensor:
    """upstream's `MiniCPMAttention.forward_step` (no rope), over the whole cache; upstream passes the
    position as a one-element tensor (`torch.tensor([kv_cache.step()])`), which keeps the slot dimension."""
    b = x.shape[0]
    position = torch.tensor([position])
    q = attn.q_proj(x).view(b, 1, attn.heads, attn.head_dim).transpose(1, 2)
    k = attn.k_proj(x).view(b, 1, attn.kv_heads, attn.head_dim).transpose(1, 2)
    v = attn.v_proj(x).view(b, 1, attn.kv_heads, attn.head_dim).transpose(1, 2)
    k_cache[:, :, position, :] = k
    v_cache[:, :, position, :] = v
    mask = (torch.arange(k_cache.size(2)) <= position).view(1, 1, 1, -1)
    out = F.scaled_dot_product_attention(q.contiguous(), k_cache.contiguous(), v_cache.contiguous(), attn_mask=mask, enable_gqa=True)
    return attn.o_proj(out.transpose(1, 2).contiguous().reshape(b, attn.heads * attn.head_dim))


@pytest.mark.parametrize("hidden,heads,kv_heads,head_dim", [(1024, 16, 2, 64), (2048, 16, 2, 128)])
@pytest.mark.parametrize("threads", [1, 2])
def test_step_over_the_span_equals_the_whole_masked_cache(hidden, heads, kv_heads, head_dim, threads) -> None:
    attn = _attention(hidden, heads, kv_heads, head_dim, seed=head_dim)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            g = torch.Generator().manual_seed(1)
            cache_k = torch.randn(1, kv_heads, CAPACITY, head_dim, generator=g) * 3  # garbage beyond the filled slots
            cache_v = torch.randn(1, kv_heads, CAPACITY, head_dim, generator=g) * 3
            for position in (0, 1, 31, 63, 64, 99, 100, 637, 1499, 1500, 4096, CAPACITY - 2, CAPACITY - 1):
                x = torch.randn(1, hidden, generator=g)
                ours_k, ours_v = cache_k.clone(), cache_v.clone()
                theirs_k, theirs_v = cache_k.clone(), cache_v.clone()
                ours = attn.step(x, None, ours_k[0:1], ours_v[0:1], position, step_mask(position, CAPACITY))
                theirs = _upstream_step(attn, x, theirs_k, theirs_v, position)
                assert torch.equal(ours_k, theirs_k) and torch.equal(ours_v, theirs_v)
                assert torch.equal(ours, theirs), (
                    f"position {position} (span {-(-(position + 1) // SPAN_BLOCK) * SPAN_BLOCK}): max diff {(ours - theirs).abs().max()}"
                )
    finally:
        torch.set_num_threads(before)


def test_span_block_is_a_multiple_of_the_kernel_width() -> None:
    assert SPAN_BLOCK % 32 == 0 and SPAN_BLOCK > 0
