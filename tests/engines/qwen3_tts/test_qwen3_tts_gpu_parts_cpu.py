"""The GPU decode path's parts that run on any machine: static cache, sync-free sampler, graph
classes (structure), and the graphed decode path in eager mode against `decode_frames`."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from fixtures_models import model_folder, talker_request

from koe.engines.base import Cancelled, CancelToken
from koe.engines.qwen3_tts.cuda_decode import GraphedDecoder
from koe.engines.qwen3_tts.generate import DecodeOutcome, decode_frames
from koe.engines.registry import load_engine
from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.rotary import inverse_frequencies, rotary_cos_sin
from koe.runtime import device_sampling as ds
from koe.runtime.cuda_graph import CapturedStep, GraphBuckets, bucket_for
from koe.runtime.kv_cache import ConcatCache
from koe.runtime.sampling import SamplingConfig, draw, process_logits
from koe.runtime.static_cache import StaticCache

# -- static cache -------------------------------------------------------------------------------


def test_static_cache_prefix_mode_equals_concat_cache():
    g = torch.Generator().manual_seed(0)
    static = StaticCache(1, 2, 3, 8, 4, torch.float32, "cpu")
    concat = ConcatCache(1)
    keys_ptr = static.storage[0].keys.data_ptr()
    pos = 0
    for t in (2, 1, 1, 3):
        k, v = torch.randn(2, 3, t, 4, generator=g), torch.randn(2, 3, t, 4, generator=g)
        ks, vs = static.at(pos).layers[0].update(k, v)
        kc, vc = concat.layers[0].update(k, v)
        assert torch.equal(ks, kc) and torch.equal(vs, vc)
        pos += t
    assert static.storage[0].keys.data_ptr() == keys_ptr  # written in place, never reallocated
    with pytest.raises(IndexError, match="capacity"):
        static.at(pos).layers[0].update(torch.zeros(2, 3, 2, 4), torch.zeros(2, 3, 2, 4))


def test_static_cache_tensor_positions_write_in_place_and_return_full_buffers():
    static = StaticCache(1, 1, 2, 6, 4, torch.float32, "cpu")
    k = torch.arange(8, dtype=torch.float32).view(1, 2, 1, 4)
    ks, vs = static.at(torch.tensor([3])).layers[0].update(k, -k)
    assert ks.shape == (1, 2, 6, 4) and ks.data_ptr() == static.storage[0].keys.data_ptr()
    assert torch.equal(ks[:, :, 3:4], k) and torch.equal(vs[:, :, 3:4], -k)
    assert not ks[:, :, :3].any() and not ks[:, :, 4:].any()
    with pytest.raises(RuntimeError, match="position"):
        StaticCache(1, 1, 2, 6, 4, torch.float32, "cpu").layers[0].update(k, k)


def test_static_cache_mask_hides_padding_and_unwritten_positions():
    valid = torch.tensor([[False, True, True, True, True, True], [True] * 6])
    m = StaticCache.mask(valid, torch.tensor([3]))
    assert m.shape == (2, 1, 1, 6)
    assert m[0, 0, 0].tolist() == [False, True, True, True, False, False]
    assert m[1, 0, 0].tolist() == [True, True, True, True, False, False]


def test_decoder_layer_on_static_cache_matches_concat_cache():
    """Masked attention over the full static buffer equals attention over the grown cache (CPU, fp32)."""
    torch.manual_seed(0)
    spec = DecoderSpec(32, 64, 1, 4, 2, 8, 1e-6, 1e6)
    layer = DecoderLayer(spec).eval()
    inv = inverse_frequencies(8, 1e6)
    static, concat = StaticCache(1, 2, 2, 16, 8, torch.float32, "cpu"), ConcatCache(1)
    valid = torch.ones(2, 16, dtype=torch.bool)
    with torch.inference_mode():
        x = torch.randn(2, 5, 32)
        cos, sin = rotary_cos_sin(inv, torch.arange(5).expand(2, -1), torch.float32)
        ref = layer(x, cos[:, None], sin[:, None], concat.layers[0], None)
        pos = torch.arange(5)
        got = layer(x, cos[:, None], sin[:, None], static.at(pos).layers[0], StaticCache.mask(valid, pos))
        assert torch.allclose(got, ref, atol=1e-6, rtol=0)
        for step in range(5, 9):
            x = torch.randn(2, 1, 32)
            cos, sin = rotary_cos_sin(inv, torch.full((2, 1), step), torch.float32)
            ref = layer(x, cos[:, None], sin[:, None], concat.layers[0], None)
            pos = torch.tensor([step])
            got = layer(x, cos[:, None], sin[:, None], static.at(pos).layers[0], StaticCache.mask(valid, pos))
            assert torch.allclose(got, ref, atol=1e-6, rtol=0)


# -- sync-free sampler --------------------------------------------------------------------------

CONFIGS = [
    SamplingConfig(do_sample=False, repetition_penalty=1.05, min_new_tokens=2),
    SamplingConfig(temperature=0.9, top_k=50, top_p=1.0, repetition_penalty=1.05, min_new_tokens=2),
    SamplingConfig(temperature=0.7, top_k=0, top_p=0.8),
    SamplingConfig(temperature=1.0, top_k=5, top_p=0.9, repetition_penalty=1.3),
    SamplingConfig(temperature=1.3, top_k=100000, top_p=0.5),
    SamplingConfig(temperature=0.5, top_k=1, top_p=0.0),
]


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
@pytest.mark.parametrize("drawn", [0, 1, 4])
def test_processors_equal_sampling_py(config, drawn):
    g = torch.Generator().manual_seed(drawn)
    vocab = 300
    logits = torch.randn(3, vocab, generator=g) * 3
    history = torch.randint(0, vocab, (3, drawn), generator=g)
    eos = torch.tensor([7])
    suppress = torch.zeros(vocab, dtype=torch.bool)
    suppress[250:] = True
    suppress[7] = False
    ref = process_logits(logits.clone(), history, config, eos_ids=eos, suppress_mask=suppress)
    seen = torch.zeros(3, vocab, dtype=torch.bool).scatter(1, history, True)
    eos_mask = torch.zeros(vocab, dtype=torch.bool)
    eos_mask[7] = True
    params = ds.SamplingTensors.from_configs(config, 3, "cpu")
    greedy, scores = ds.process_scores(logits.clone(), params, seen=seen, drawn=torch.tensor([drawn]), eos_mask=eos_mask, suppress_mask=suppress)
    assert torch.equal(scores if config.do_sample else greedy, ref)
    assert torch.equal(ds.choose(greedy, scores, torch.ones(3, vocab), params)[~params.do_sample], draw(ref, config)[~params.do_sample])


def test_processors_per_row_settings():
    """One batch, a different config per row: each row equals sampling.py with its own config."""
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(len(CONFIGS), 200, generator=g)
    params = ds.SamplingTensors.from_configs(CONFIGS, len(CONFIGS), "cpu")
    greedy, scores = ds.process_scores(logits, params)
    for i, config in enumerate(CONFIGS):
        ref = process_logits(logits[i : i + 1].clone(), torch.zeros((1, 0), dtype=torch.long), config)
        assert torch.equal((scores if config.do_sample else greedy)[i : i + 1], ref)


def test_fill_writes_in_place():
    params = ds.SamplingTensors.allocate(2, "cpu")
    ptr = params.temperature.data_ptr()
    params.fill_([SamplingConfig(temperature=0.5), SamplingConfig(do_sample=False, temperature=0.0)])
    assert params.temperature.data_ptr() == ptr
    assert params.temperature.tolist() == [0.5, 1.0] and params.do_sample.tolist() == [True, False]
    assert params.keep_tail.dtype == torch.float32 and not params.top_p_on.any()


def test_greedy_choice_is_argmax():
    logits = torch.randn(4, 50)
    params = ds.SamplingTensors.from_configs(SamplingConfig(do_sample=False), 4, "cpu")
    greedy, scores = ds.process_scores(logits, params)
    assert torch.equal(ds.choose(greedy, scores, torch.rand(4, 50) + 0.1, params), logits.argmax(-1))


def test_noise_is_deterministic_and_keyed():
    vk = ds.vocab_keys(1000, "cpu")
    seeds = torch.tensor([1, 2])
    streams = torch.arange(3)
    a = ds.exponential_noise(ds.draw_keys(seeds, torch.tensor([5]), streams), vk)
    b = ds.exponential_noise(ds.draw_keys(seeds, torch.tensor([5]), streams), vk)
    c = ds.exponential_noise(ds.draw_keys(seeds, torch.tensor([6]), streams), vk)
    assert a.shape == (2, 3, 1000) and torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.equal(a[0], a[1]) and not torch.equal(a[:, 0], a[:, 1])
    assert bool(torch.isfinite(a).all()) and bool((a > 0).all())
    big = ds.exponential_noise(ds.draw_keys(torch.arange(64), torch.tensor([0]), torch.arange(16)), vk)
    assert abs(big.mean().item() - 1.0) < 0.01 and abs(big.var().item() - 1.0) < 0.03  # Exp(1): mean 1, variance 1


def test_race_draws_the_softmax_distribution():
    """Chi-square test of 40,000 race draws against the processed distribution (top-k zeros stay zero)."""
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0, 1.5, 0.2])
    config = SamplingConfig(temperature=0.8, top_k=6, top_p=1.0)
    n = 40_000
    params = ds.SamplingTensors.from_configs(config, n, "cpu")
    greedy, scores = ds.process_scores(logits.expand(n, -1).clone(), params)
    noise = ds.exponential_noise(ds.draw_keys(torch.arange(n) + 12345, torch.tensor([0]), torch.zeros(1, dtype=torch.long))[:, 0], ds.vocab_keys(8, "cpu"))
    counts = torch.bincount(ds.choose(greedy, scores, noise, params), minlength=8).double()
    probs = torch.softmax(scores[0], -1).double()
    assert counts[probs == 0].sum() == 0
    kept = probs > 0
    chi2 = (((counts - n * probs) ** 2)[kept] / (n * probs[kept])).sum().item()
    assert chi2 < 25.0, chi2  # 5 degrees of freedom: p < 1e-4 to fail by chance


# -- graph classes ------------------------------------------------------------------------------


def test_run_without_capture_raises():
    step = CapturedStep(lambda: torch.zeros(1), name="x")
    assert not step.captured
    with pytest.raises(RuntimeError, match="capture"):
        step.run()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_capture_without_cuda_raises():
    with pytest.raises(RuntimeError, match="CUDA"):
        CapturedStep(lambda: None).capture()


def test_bucket_selection():
    assert [bucket_for(b) for b in (1, 2, 3, 5, 16, 17, 32)] == [1, 2, 4, 8, 16, 32, 32]
    assert bucket_for(33) is None
    assert bucket_for(3, (4, 1)) == 4
    with pytest.raises(ValueError):
        bucket_for(0)
    with pytest.raises(ValueError):
        GraphBuckets(())
    assert GraphBuckets((8, 1, 8)).buckets == (1, 8)


# -- the graphed decode path in eager mode on the CPU -------------------------------------------


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return load_engine(model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny"))


def _inputs(engine, texts, max_new_tokens=24, greedy=False, **sampling):
    return talker_request(engine, texts, max_new_tokens, greedy, **sampling)


def _frames(frames):
    out = [(f.index, f.codes, f.alive) for f in frames]
    return [i for i, _, _ in out], [c for _, c, _ in out], [a for _, _, a in out]


@pytest.mark.parametrize(
    "texts", [["Hello there, a short test."], ["Hello there, a short test.", "Two."], ["One text.", "Another, longer text here.", "Three."]]
)
def test_eager_mode_greedy_equals_decode_frames(engine, texts):
    inputs, settings = _inputs(engine, texts, greedy=True)
    with torch.inference_mode():
        ref_idx, ref, ref_alive = _frames(decode_frames(engine.network.talker, inputs, settings))
    dec = GraphedDecoder(engine.network.talker, capture=False)
    outcome = DecodeOutcome()
    idx, got, alive = _frames(dec.decode_frames(inputs, settings, outcome=outcome))
    assert idx == ref_idx and len(got) == settings.max_new_tokens - 1
    assert all(torch.equal(a, b) for a, b in zip(got, ref)) and all(torch.equal(a, b) for a, b in zip(alive, ref_alive))
    assert dec.last_report["decode_path"] == "eager (cuda_graphs off)" and outcome.decode_path == dec.last_report
    assert dec.last_report["batch_bucket"] == {1: 1, 2: 2, 3: 4}[len(texts)]


def test_eager_mode_row_limits_and_eos_bookkeeping(engine):
    inputs, settings = _inputs(engine, ["First text here.", "Second."], greedy=True)
    limits = torch.tensor([5, 9])
    with torch.inference_mode():
        ref_out = DecodeOutcome()
        _, ref, ref_alive = _frames(decode_frames(engine.network.talker, inputs, settings, row_limits=limits, outcome=ref_out))
    out = DecodeOutcome()
    _, got, alive = _frames(GraphedDecoder(engine.network.talker, capture=False).decode_frames(inputs, settings, row_limits=limits, outcome=out))
    assert len(got) == len(ref) == 9
    assert all(torch.equal(a, b) for a, b in zip(got, ref)) and all(torch.equal(a, b) for a, b in zip(alive, ref_alive))
    assert torch.equal(out.eos, ref_out.eos)


def test_eager_mode_sampling_is_seeded_and_settings_need_no_new_buffers(engine):
    dec = GraphedDecoder(engine.network.talker, capture=False)
    inputs, settings = _inputs(engine, ["A sampled sentence."])
    run = lambda s, seed: _frames(dec.decode_frames(inputs, s, torch.Generator().manual_seed(seed)))[1]  # noqa: E731
    a, b, c = run(settings, 1), run(settings, 1), run(settings, 2)
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and not all(torch.equal(x, y) for x, y in zip(a, c))
    buffers = (dict(dec.frames), dict(dec.talkers))
    other = replace(settings, talker=SamplingConfig(temperature=0.5, top_k=10, top_p=0.7, repetition_penalty=1.2, min_new_tokens=2))
    d = run(other, 1)
    assert (dict(dec.frames), dict(dec.talkers)) == buffers  # same buffers: a captured graph would be reused
    assert not all(torch.equal(x, y) for x, y in zip(a, d))
    assert all(int(code.max()) < 2048 for frame in a for code in frame[:, 1:])


def test_fallbacks_to_decode_frames(engine):
    inputs, settings = _inputs(engine, ["Hello.", "World."], greedy=True)
    dec = GraphedDecoder(engine.network.talker, capture=False, batch_buckets=(1,))
    with torch.inference_mode():
        ref = _frames(decode_frames(engine.network.talker, inputs, settings))[1]
    out = DecodeOutcome()
    got = _frames(dec.decode_frames(inputs, settings, outcome=out))[1]
    assert all(torch.equal(a, b) for a, b in zip(got, ref))
    assert out.decode_path["decode_path"] == "decode_frames" and "bucket" in out.decode_path["fallback_reason"]
    small = GraphedDecoder(engine.network.talker, capture=False, capacities=(16,))
    assert "cache positions" in small.plan(1, 40, settings, None)
    # A second decode while the first holds the bucket's buffers takes the core path.
    dec2 = GraphedDecoder(engine.network.talker, capture=False)
    first = dec2.decode_frames(inputs, settings)
    next(first)
    second = _frames(dec2.decode_frames(inputs, settings))[1]
    assert all(torch.equal(a, b) for a, b in zip(second, ref)) and "another decode" in dec2.last_report["fallback_reason"]
    first.close()
    assert dec2.frames[2].lock.acquire(blocking=False)


def test_cancel_and_close(engine):
    inputs, settings = _inputs(engine, ["Hello."], max_new_tokens=50)
    dec = GraphedDecoder(engine.network.talker, capture=False)
    token = CancelToken()
    frames = dec.decode_frames(inputs, settings, cancel=token)
    next(frames)
    token.cancel()
    with pytest.raises(Cancelled):
        next(frames)
    assert len(_frames(dec.decode_frames(inputs, replace(settings, max_new_tokens=4)))[1]) == 3


def test_capture_failure_falls_back_to_eager(engine, monkeypatch):
    """Where capture raises (here: no CUDA, or a patched failure) the same step functions run eagerly."""
    from koe.runtime import cuda_graph

    def fail(self):
        raise RuntimeError("capture refused")

    monkeypatch.setattr(cuda_graph.CapturedStep, "capture", fail)
    monkeypatch.setattr(cuda_graph.GraphBuckets, "pool", property(lambda self: None))
    inputs, settings = _inputs(engine, ["Hello there."], greedy=True)
    eager = _frames(GraphedDecoder(engine.network.talker, capture=False).decode_frames(inputs, settings))[1]
    dec = GraphedDecoder(engine.network.talker, capture=True)
    out = DecodeOutcome()
    got = _frames(dec.decode_frames(inputs, settings, outcome=out))[1]
    assert all(torch.equal(a, b) for a, b in zip(got, eager))
    assert out.decode_path["decode_path"] == "eager (capture failed)" and "capture refused" in out.decode_path["fallback_reason"]
