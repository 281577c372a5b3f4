"""CosyVoice's HiFT vocoders (koe.engines.cosyvoice.hift) on their own: the fixture writer's
names and shapes, strict loading of both weight-norm layouts, the source draws, and v3's tables."""

from __future__ import annotations

import pytest
import torch

from koe.engines.cosyvoice.fixtures_flow import hift_config, hift_state, write_hift
from koe.engines.cosyvoice.hift import HiFT, hift_tables, load_hift, v3_draws_before_source
from koe.runtime.weights import fold_weight_norm


def _tables(config):
    return hift_tables(v3_draws_before_source(6561, 80, 192, 80, config))


def test_release_layout_counts_and_weight_norm_names():
    # the released hift.pt holds 328 tensors (v2: weight_g / weight_v; v3: the parametrization's names)
    v2, v3 = hift_state(2), hift_state(3)
    assert len(v2) == len(v3) == 328
    assert "conv_pre.weight_g" in v2 and "ups.0.weight_v" in v2 and "source_downs.0.weight" in v2
    assert "conv_pre.parametrizations.weight.original0" in v3 and "f0_predictor.condnet.8.parametrizations.weight.original1" in v3
    assert v2["ups.0.weight_v"].shape == (16, 8, 16)  # ConvTranspose1d: (in, out, kernel), g over dim 0
    assert v3["ups.0.parametrizations.weight.original1"].shape == (8, 16, 16)  # v3: an upsample then a Conv1d
    assert v2["source_downs.0.weight"].shape == (8, 18, 30)


def test_real_size_shapes():
    real = hift_state(2, "real")
    assert real["conv_pre.weight_v"].shape == (512, 80, 7)
    assert real["ups.2.weight_v"].shape == (128, 64, 7)
    assert real["source_downs.1.weight"].shape == (128, 18, 6)
    assert real["source_resblocks.0.activations1.0.alpha"].shape == (256,)
    assert real["m_source.l_linear.weight"].shape == (1, 9)


def test_fixture_is_deterministic_from_its_seed(tmp_path):
    a, b = write_hift(tmp_path / "a.pt", 2, seed=4), write_hift(tmp_path / "b.pt", 2, seed=4)
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["conv_pre.weight_v"], hift_state(2, seed=5)["conv_pre.weight_v"])


def test_both_weight_norm_layouts_load_the_same():
    legacy = hift_state(2)
    renamed = {}
    for k, v in legacy.items():
        k = k.replace(".weight_g", ".parametrizations.weight.original0").replace(".weight_v", ".parametrizations.weight.original1")
        renamed["generator." + k] = v  # a HiFiGan checkpoint's prefix, dropped as upstream drops it
    a, b = load_hift(legacy, hift_config(2)), load_hift(renamed, hift_config(2))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_strict_loading_names_what_is_wrong():
    state = hift_state(2)
    del state["conv_post.bias"]
    with pytest.raises(ValueError, match="conv_post.bias"):
        load_hift(state, hift_config(2))
    state = hift_state(2)
    state["extra.weight"] = torch.zeros(1)
    with pytest.raises(ValueError, match="extra.weight"):
        load_hift(state, hift_config(2))
    state = hift_state(2)
    del state["conv_pre.weight_g"]
    with pytest.raises(ValueError, match="conv_pre"):
        fold_weight_norm(state)
    with pytest.raises(ValueError, match="tables"):
        load_hift(hift_state(3), hift_config(3))


def test_v3_f0_predictor_is_float64():
    model = load_hift(hift_state(3), hift_config(3), _tables(hift_config(3)))
    assert model.f0_predictor.condnet[0].weight.dtype == torch.float64
    assert model.conv_pre.weight.dtype == torch.float32


def test_v2_draws_from_the_given_generator_and_leaves_the_global_one():
    model = load_hift(hift_state(2), hift_config(2))
    mel = torch.randn(1, 80, 10, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a, _ = model.inference(mel, generator=torch.Generator().manual_seed(1))
    assert torch.equal(torch.get_rng_state(), before)
    b, _ = model.inference(mel, generator=torch.Generator().manual_seed(1))
    c, _ = model.inference(mel, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == (1, 10 * 480)
    # the global generator when none is given: the same draws as a generator seeded alike
    torch.manual_seed(1)
    d, _ = model.inference(mel)
    assert torch.equal(a, d)


def test_v2_cache_source_overwrites_the_start():
    model = load_hift(hift_state(2), hift_config(2))
    mel = torch.randn(1, 80, 8, generator=torch.Generator().manual_seed(0))
    _, source = model.inference(mel, generator=torch.Generator().manual_seed(1))
    cache = torch.full((1, 1, 100), 0.25)
    _, source2 = model.inference(mel, cache_source=cache, generator=torch.Generator().manual_seed(1))
    assert torch.equal(source2[:, :, :100], cache) and torch.equal(source2[:, :, 100:], source[:, :, 100:])


def test_v3_tables_replay_without_touching_torch():
    torch.manual_seed(7)
    before = torch.get_rng_state()
    tables = _tables(hift_config(3))
    assert torch.equal(torch.get_rng_state(), before)
    assert tables.rand_ini.shape == (1, 9) and tables.rand_ini[0, 0] == 0
    # the first L samples of upstream's (1, 7200000, 9) table, whatever L
    assert torch.equal(tables.noise(50), tables.noise(200)[:, :50])
    with pytest.raises(ValueError, match="at most"):
        tables.noise(300 * 24000 + 1)


def test_v3_draws_nothing_and_streams():
    config = hift_config(3)
    model = load_hift(hift_state(3), config, _tables(config))
    mel = torch.randn(1, 80, 30, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    before = torch.get_rng_state()
    full, _ = model.inference(mel)
    assert torch.equal(torch.get_rng_state(), before)
    chunk, _ = model.inference(mel[:, :, :20], finalize=False)
    # a streamed chunk: the look-ahead frames (3 for F0, 4 more for the first conv) make no audio,
    # and the last frame's audio is cut as well (upstream's overlap)
    assert chunk.shape == (1, (20 - 3 - 4 - 1) * 480)
    assert (chunk - full[:, : chunk.shape[1]]).abs().max() < 1e-4


def test_meta_build_has_no_parameters_outside_the_release():
    with torch.device("meta"):
        model = HiFT(hift_config(2))
    # each weight-normed pair of the file is one weight in the module
    assert len(model.state_dict()) == 328 - sum(1 for k in hift_state(2) if k.endswith("weight_g"))


@pytest.mark.parametrize("version", [2, 3])
def test_tiny_vocoders_stay_under_the_clamp(version):
    # parity on clamped samples would prove little: the fixtures keep the audio under upstream's 0.99
    config = hift_config(version)
    model = load_hift(hift_state(version), config, _tables(config) if version == 3 else None)
    mel = torch.randn(1, 80, 100, generator=torch.Generator().manual_seed(1)) * 2 - 5
    audio, _ = model.inference(mel, generator=torch.Generator().manual_seed(0))
    assert (audio.abs() >= 0.99).float().mean() < 0.01
    assert audio.std() > 0.01
