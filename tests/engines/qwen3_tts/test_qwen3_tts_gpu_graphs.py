"""CUDA graphs for the decode loop: captured runs equal eager runs of the same code on the same GPU.

Skipped where CUDA is absent. TF32 is off so float32 runs compare bit for bit; bfloat16 runs compare
the captured graph against the same ops run eagerly (same kernels, same bits).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
import torch
from fixtures_models import model_folder, talker_request

from koe.engines.qwen3_tts.cuda_decode import GraphedDecoder
from koe.engines.qwen3_tts.generate import DecodeOutcome, decode_frames
from koe.engines.qwen3_tts.streaming import CodecStream
from koe.engines.registry import load_engine
from koe.runtime import cuda_graph
from koe.runtime.cuda_graph import CapturedStep, GraphBuckets
from koe.runtime.sampling import SamplingConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module", autouse=True)
def no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    folder = model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny")
    return {dt: load_engine(folder, device="cuda", dtype=dt) for dt in ("float32", "bfloat16")}


def _request(engine, texts, max_new_tokens=40, greedy=False, **sampling):
    return talker_request(engine, texts, max_new_tokens, greedy, **sampling)


def _run(dec, inputs, settings, seed=0, limits=None):
    out = DecodeOutcome()
    frames = [(f.codes, f.alive) for f in dec.decode_frames(inputs, settings, torch.Generator().manual_seed(seed), row_limits=limits, outcome=out)]
    return [c for c, _ in frames], [a for _, a in frames], out


def _same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_captured_step_returns_its_static_buffer():
    x = torch.zeros(4, device="cuda")
    out = torch.zeros(4, device="cuda")

    def fn():
        out.copy_(x * 2 + 1)
        return out

    step = CapturedStep(fn, pool=torch.cuda.graph_pool_handle())
    step.capture()
    x.copy_(torch.arange(4.0, device="cuda"))
    result = step.run()
    assert result is out and result.tolist() == [1.0, 3.0, 5.0, 7.0]
    x.fill_(10)
    assert step.run() is result and result.tolist() == [21.0] * 4


def test_buckets_share_one_pool():
    graphs = GraphBuckets()
    buf = torch.zeros(8, device="cuda")
    a = graphs.get(("x", 1), lambda: lambda: buf.add_(1))
    pool = graphs.pool
    b = graphs.get(("x", 4), lambda: lambda: buf.mul_(2))
    assert graphs.pool is pool and a.pool is pool and b.pool is pool and len(graphs.graphs) == 2


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("texts", [["Hello there, a test of graphs."], ["One text.", "Another, longer text here.", "Three."]])
def test_graphed_equals_eager(engines, dtype, texts):
    engine = engines[dtype]
    inputs, settings = _request(engine, texts)
    limits = torch.tensor([30, 12, 25][: len(texts)], device="cuda")
    eager = _run(GraphedDecoder(engine.network.talker, capture=False), inputs, settings, 7, limits)
    dec = GraphedDecoder(engine.network.talker)
    graphed = _run(dec, inputs, settings, 7, limits)
    assert dec.last_report["decode_path"] == "cuda_graphs", dec.last_report
    assert _same(graphed[0], eager[0]) and _same(graphed[1], eager[1]) and torch.equal(graphed[2].eos, eager[2].eos)
    assert _same(_run(dec, inputs, settings, 7, limits)[0], graphed[0])  # replays again from fresh buffers


def test_new_settings_reuse_the_graphs(engines):
    engine = engines["bfloat16"]
    dec = GraphedDecoder(engine.network.talker)
    eager = GraphedDecoder(engine.network.talker, capture=False)
    inputs, settings = _request(engine, ["Hello there."])
    _run(dec, inputs, settings)
    captured = dict(dec.graphs.graphs)
    for talker, predictor in [
        (SamplingConfig(temperature=0.6, top_k=20, top_p=0.8, repetition_penalty=1.3, min_new_tokens=2), SamplingConfig(temperature=1.2, top_k=0, top_p=0.9)),
        (SamplingConfig(do_sample=False, repetition_penalty=1.1, min_new_tokens=2), SamplingConfig(do_sample=False)),
    ]:
        s = replace(settings, talker=talker, predictor=predictor)
        assert _same(_run(dec, inputs, s, 3)[0], _run(eager, inputs, s, 3)[0])
    assert dec.graphs.graphs == captured


def test_greedy_graphed_equals_decode_frames(engines):
    """float32, TF32 off: the graphed path's greedy codes are the core's codes."""
    engine = engines["float32"]
    inputs, settings = _request(engine, ["Hello there, a test.", "Two."], greedy=True)
    with torch.inference_mode():
        ref = [f.codes for f in decode_frames(engine.network.talker, inputs, settings)]
    assert _same(_run(GraphedDecoder(engine.network.talker), inputs, settings)[0], ref)


def test_at_most_one_host_wait_per_frame(engines):
    engine = engines["bfloat16"]
    dec = GraphedDecoder(engine.network.talker)
    inputs, settings = _request(engine, ["Hello there."], max_new_tokens=20)
    _run(dec, inputs, settings)  # capture first
    frames = dec.decode_frames(inputs, settings, torch.Generator().manual_seed(0))
    next(frames)
    counts = []
    torch.cuda.set_sync_debug_mode("warn")
    try:
        for _ in range(10):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                next(frames)
            counts.append(sum("synchroniz" in str(w.message) for w in caught))
    finally:
        torch.cuda.set_sync_debug_mode("default")
        frames.close()
    assert max(counts) <= 1, counts


def test_streaming_consumer_between_frames(engines):
    """Consuming frames as they come (codec work on the GPU between frames) leaves the codes unchanged."""
    engine = engines["bfloat16"]
    dec = GraphedDecoder(engine.network.talker)
    inputs, settings = _request(engine, ["Streaming with graphs on."], max_new_tokens=30)
    ref = _run(dec, inputs, settings, 5)[0]
    codec = CodecStream(engine.codec)
    got, samples = [], 0
    with torch.inference_mode():
        for frame in dec.decode_frames(inputs, settings, torch.Generator().manual_seed(5)):
            got.append(frame.codes)
            codec.push(frame.codes[0])
            samples += codec.drain().numel()
    assert _same(got, ref) and samples == len(ref) * codec.samples_per_frame
    early = dec.decode_frames(inputs, settings, torch.Generator().manual_seed(5))
    next(early)
    early.close()  # a stream closed early frees the buffers for the next request
    assert _same(_run(dec, inputs, settings, 5)[0], ref)


def test_capture_failure_falls_back_to_eager_with_reason(engines, monkeypatch):
    engine = engines["bfloat16"]
    inputs, settings = _request(engine, ["Hello."])
    good = _run(GraphedDecoder(engine.network.talker), inputs, settings)[0]

    def fail(self):
        raise RuntimeError("injected capture failure")

    monkeypatch.setattr(cuda_graph.CapturedStep, "capture", fail)
    dec = GraphedDecoder(engine.network.talker)
    codes, _, out = _run(dec, inputs, settings)
    assert out.decode_path["decode_path"] == "eager (capture failed)" and "injected" in out.decode_path["fallback_reason"]
    assert _same(codes, good)
