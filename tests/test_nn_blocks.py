"""koe.nn blocks by kind: attention options, window masks, rotary, conv blocks, and the meta-build loader."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from koe.nn.attention import Attention, Packed, causal_padding_mask, sliding_window_allowed, sliding_window_mask
from koe.nn.conv import CausalConv1d, ConvNeXtBlock, Snake, SnakeBeta
from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.rotary import RotaryEmbedding, apply_rotary, inverse_frequencies, rotate_half
from koe.runtime.weights import WeightsError, build_from_weights


def _tables(t: int, d: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    return RotaryEmbedding(d, 10000.0)(torch.arange(t)[None], torch.float32)  # (1, 1, T, D)


def test_attention_without_qk_norm_with_qkv_bias_builds_and_runs():
    """Qwen2 / MiniCPM style: q/k/v biases, no output bias, no q/k norms."""
    torch.manual_seed(0)
    attn = Attention(32, 4, 2, 8, qkv_bias=True, out_bias=False)
    keys = set(attn.state_dict())
    assert {"q_proj.bias", "k_proj.bias", "v_proj.bias"} <= keys
    assert "o_proj.bias" not in keys and not any("norm" in k for k in keys)
    cos, sin = _tables(5)
    out = attn(torch.randn(2, 5, 32), cos, sin)
    assert out.shape == (2, 5, 32) and torch.isfinite(out).all()


def test_qwen2_style_decoder_spec():
    spec = DecoderSpec(32, 64, 1, 4, 2, 8, 1e-6, 1e6, qkv_bias=True, qk_norm=False)
    keys = set(DecoderLayer(spec).state_dict())
    assert "self_attn.q_proj.bias" in keys and "self_attn.o_proj.bias" not in keys
    assert "self_attn.q_norm.weight" not in keys and "self_attn_layer_scale.scale" not in keys
    qwen3 = set(DecoderLayer(DecoderSpec(32, 64, 1, 4, 2, 8, 1e-6, 1e6)).state_dict())
    assert "self_attn.q_norm.weight" in qwen3 and "self_attn.q_proj.bias" not in qwen3


def test_causal_and_bidirectional_differ_as_expected():
    torch.manual_seed(0)
    causal = Attention(16, 2, 2, 8)
    bidirectional = Attention(16, 2, 2, 8, causal=False)
    bidirectional.load_state_dict(causal.state_dict())
    cos, sin = _tables(6)
    x = torch.randn(1, 6, 16)
    y = x.clone()
    y[:, -1] += 1.0  # change only the last token
    with torch.no_grad():
        # causal: earlier outputs cannot see the last token; bidirectional: they all do
        assert torch.equal(causal(x, cos, sin)[:, :-1], causal(y, cos, sin)[:, :-1])
        assert not torch.allclose(bidirectional(x, cos, sin)[:, 0], bidirectional(y, cos, sin)[:, 0])
        # a bidirectional layer equals the causal one given an all-true mask
        full = torch.ones(1, 1, 6, 6, dtype=torch.bool)
        assert torch.allclose(bidirectional(x, cos, sin), causal(x, cos, sin, None, full), atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_sliding_window_mask_matches_brute_force(causal):
    window, queries, keys = 4, 3, 9
    got = sliding_window_mask(2, queries, keys, window, torch.device("cpu"), causal)
    assert got.shape == (2, 1, queries, keys)
    for i in range(queries):
        q = keys - queries + i
        for k in range(keys):
            seen = abs(q - k) < window and (k <= q or not causal)
            assert bool(got[1, 0, i, k]) == seen, (i, k)
    assert torch.equal(sliding_window_allowed(torch.arange(keys)[-queries:], torch.arange(keys), window, causal), got[0, 0])


def test_sliding_window_mask_is_none_where_the_window_does_not_bind():
    cpu = torch.device("cpu")
    assert sliding_window_mask(1, 5, 5, 6, cpu) is None and sliding_window_mask(1, 1, 5, 6, cpu) is None
    assert sliding_window_mask(1, 6, 6, 6, cpu) is not None  # explicit from `window` positions on
    assert sliding_window_mask(1, 2, 5, 6, cpu) is not None  # causal chunk after a cache: needs the mask


def test_windowed_attention_equals_an_explicit_brute_force_mask():
    torch.manual_seed(0)
    windowed = Attention(16, 4, 2, 4, window=3)
    plain = Attention(16, 4, 2, 4)
    plain.load_state_dict(windowed.state_dict())
    t = 7
    cos, sin = _tables(t, 4)
    x = torch.randn(2, t, 16)
    brute = torch.tensor([[k <= q and q - k < 3 for k in range(t)] for q in range(t)])
    with torch.no_grad():
        assert torch.equal(windowed(x, cos, sin), plain(x, cos, sin, None, brute[None, None]))
        short = x[:, :2]  # shorter than the window: plain causal attention
        assert torch.equal(windowed(short, cos[..., :2, :], sin[..., :2, :]), plain(short, cos[..., :2, :], sin[..., :2, :]))


def test_native_and_repeated_gqa_agree():
    torch.manual_seed(0)
    native = Attention(16, 4, 2, 4)
    repeated = Attention(16, 4, 2, 4, native_gqa=False)
    repeated.load_state_dict(native.state_dict())
    cos, sin = _tables(5, 4)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        assert torch.allclose(native(x, cos, sin), repeated(x, cos, sin), atol=1e-6)


@pytest.mark.parametrize("lengths", [(17, 11), (9, 9, 4, 9), (40, 3), (40, 1, 2), (2, 1), (1,), (3,)])
def test_packed_sequences_give_the_padded_batch_bits(lengths):
    """Bidirectional layers over sequences packed end to end equal, bit for bit, the real rows of
    the padded batch a reference runs (each row's padding attends only to itself), at the MKL mode
    the suite runs in, at one and two threads."""
    torch.manual_seed(0)
    spec = DecoderSpec(64, 96, 1, 4, 2, 16, 1e-6, 1e6, causal=False)
    layer = DecoderLayer(spec).eval()
    longest, b = max(lengths), len(lengths)
    x = torch.randn(b, longest, 64)
    mask = torch.zeros(b, 1, longest, longest, dtype=torch.bool)
    for i, n in enumerate(lengths):
        mask[i, :, :n, :n] = True
        pad = torch.arange(n, longest)
        mask[i, :, pad, pad] = True
    rotary = RotaryEmbedding(16, 1e6)
    threads = torch.get_num_threads()
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            with torch.inference_mode():
                padded = layer(x, *rotary(torch.arange(longest)[None].expand(b, -1), torch.float32), None, mask)
                starts = [sum(lengths[:i]) for i in range(b)]
                packed_x = torch.cat([x[i, :n] for i, n in enumerate(lengths)])[None]
                positions = torch.cat([torch.arange(n) for n in lengths])[None]
                packed = layer(packed_x, *rotary(positions, torch.float32), None, Packed(tuple(zip(starts, lengths)), longest))
            for i, (start, n) in enumerate(zip(starts, lengths)):
                assert torch.equal(packed[0, start : start + n], padded[i, :n]), (count, i)
    finally:
        torch.set_num_threads(threads)


def test_a_packed_sequence_longer_than_the_padding_is_refused():
    with pytest.raises(ValueError, match="longer than the padded length"):
        Packed(((0, 5), (5, 7)), 6)


def test_causal_padding_mask():
    assert causal_padding_mask(torch.ones(2, 4), torch.arange(4)) is None
    m = causal_padding_mask(torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]), torch.arange(4))
    assert m.shape == (2, 1, 4, 4) and not m[0, 0, :, 0].any() and m[1, 0, 3].all() and not m[1, 0, 0, 1]


def test_rotary_apply_equals_the_old_formula():
    """Table by `inv_freq @ positions` (the codec's former way) and `x cos + rotate_half(x) sin`, bit for bit."""
    torch.manual_seed(0)
    d, t = 16, 50
    inv = inverse_frequencies(d, 10000.0)
    pos = torch.arange(t)[None]  # (1, T)
    freqs = (inv[None, :, None].float().expand(1, -1, 1) @ pos[:, None, :].float()).transpose(1, 2)  # (1, T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    old_cos, old_sin = (emb.cos() * 1.0)[:, None], (emb.sin() * 1.0)[:, None]
    cos, sin = RotaryEmbedding(d, 10000.0)(pos, torch.float32)
    assert torch.equal(cos, old_cos) and torch.equal(sin, old_sin)
    q = torch.randn(1, 3, t, d)
    half = d // 2
    old = q * old_cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * old_sin
    assert torch.equal(apply_rotary(q, cos, sin), old)
    assert torch.equal(rotate_half(rotate_half(q)), -q)


def test_conv_blocks_shapes_and_causality():
    torch.manual_seed(0)
    causal = ConvNeXtBlock(8)
    assert "dwconv.conv.weight" in causal.state_dict() and "gamma" in causal.state_dict()
    vocos = ConvNeXtBlock(8, intermediate_dim=24, causal=False, layer_scale=None)
    assert "dwconv.weight" in vocos.state_dict() and "gamma" not in vocos.state_dict()
    x = torch.randn(2, 8, 20)
    y = x.clone()
    y[..., -1] += 1.0
    with torch.no_grad():
        assert causal(x).shape == (2, 8, 20) and vocos(x).shape == (2, 8, 20)
        assert torch.equal(causal(x)[..., :-1], causal(y)[..., :-1])
        assert CausalConv1d(8, 4, 4, stride=2)(x).shape == (2, 4, 10)
        assert SnakeBeta(8)(x).shape == x.shape
        assert torch.equal(SnakeBeta(8, logscale=False)(x), Snake(8)(x))  # alpha == beta == 1


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.rotary = RotaryEmbedding(4, 100.0)  # non-persistent buffer, built on the CPU


def test_build_from_weights_loads_strictly(tmp_path):
    ref = _Tiny()
    path = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    got = build_from_weights(_Tiny, [path])
    assert torch.equal(got.proj.weight, ref.proj.weight) and torch.equal(got.rotary.inv_freq, ref.rotary.inv_freq)
    assert not any(t.is_meta for t in [*got.parameters(), *got.buffers()])

    save_file({"proj.weight": ref.proj.weight.contiguous()}, str(path))
    with pytest.raises(WeightsError, match="missing tensors: proj.bias"):
        build_from_weights(_Tiny, [path])
    save_file({**ref.state_dict(), "extra.weight": torch.zeros(1)}, str(path))
    with pytest.raises(WeightsError, match="unexpected tensors: extra.weight"):
        build_from_weights(_Tiny, [path])


class _MetaBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(2, 2)
        self.register_buffer("table", torch.zeros(3), persistent=False)  # follows the meta device


def test_build_from_weights_names_a_buffer_left_on_meta(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in _MetaBuffer().state_dict().items()}, str(path))
    with pytest.raises(WeightsError, match="table"):
        build_from_weights(_MetaBuffer, [path])
