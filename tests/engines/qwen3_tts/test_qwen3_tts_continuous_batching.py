"""Rows that join a running batch (int8 / int4 on koe's kernels): each row's codes are its own."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch
from fixtures_models import model_folder

from koe.engines.base import Cancelled, CancelToken, RequestError, SynthesisRequest
from koe.engines.qwen3_tts.continuous_batching import RowDecoder
from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
from koe.engines.qwen3_tts.generate import decode_frames
from koe.engines.qwen3_tts.prompt import build_talker_inputs
from koe.engines.registry import describe

GREEDY = {"do_sample": False, "subtalker_dosample": False}
pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off")


@pytest.fixture(scope="module", params=["int8", "int4"])
def engine(request, session_tmp):
    return Qwen3TTSEngine.load(model_folder(session_tmp, "custom_voice"), device="cpu", precision=request.param)


@pytest.fixture(scope="module")
def base(session_tmp):
    return Qwen3TTSEngine.load(model_folder(session_tmp, "base"), device="cpu", precision="int8")


def _inputs(engine, text, voice=None, speaker="ryan", non_streaming=True):
    items = engine.prompt_items([text], ["english"], [None if voice else speaker], [None], [voice])
    return build_talker_inputs(engine.network.talker, engine.cfg, items, non_streaming)


def _alone(engine, inputs, settings, limit, generator=None):
    with torch.inference_mode():
        frames = decode_frames(engine.network.talker, inputs, settings, generator, row_limits=torch.tensor([limit]))
        return torch.stack([f.codes[0] for f in frames])


def _run(decoder, joins):
    """Step `decoder` until it is empty, adding `joins[step]` (key, inputs, limit) before that step."""
    got, ends, step = {}, {}, 0
    while len(decoder) or any(s >= step for s in joins):
        for key, inputs, limit in joins.get(step, []):
            decoder.add(key, inputs, limit)
        for frame in decoder.step():
            if frame.codes is None:
                ends[frame.key] = step
            else:
                got.setdefault(frame.key, []).append(frame.codes)
        step += 1
    return {k: torch.stack(v) for k, v in got.items()}, ends


def test_greedy_rows_that_join_later_make_their_codes_alone(engine):
    settings = engine.decode_settings(max_new_tokens=40, **GREEDY)
    texts = ["First row here.", "A second row that joins later on.", "Third."]
    limits = [18, 12, 9]
    inputs = [_inputs(engine, t) for t in texts]
    alone = [_alone(engine, i, settings, n) for i, n in zip(inputs, limits)]
    got, ends = _run(RowDecoder(engine.network.talker, settings), {0: [(0, inputs[0], 18)], 3: [(1, inputs[1], 12)], 7: [(2, inputs[2], 9)]})
    for key in range(3):
        assert torch.equal(got[key], alone[key]), key
    assert ends == {1: 15, 2: 16, 0: 18}  # each ends at its own budget, while others go on


def test_clone_rows_with_streamed_text_join_too(base):
    """Base clones feed the text as they go (trailing text per row); an x-vector voice."""
    voice = base.prepare_voice((np.sin(np.arange(48000) / 20).astype(np.float32) * 0.3, 24000), x_vector_only=True)
    settings = base.decode_settings(max_new_tokens=30, **GREEDY)
    texts = ["One voice, two texts.", "The second text of the same voice."]
    inputs = [_inputs(base, t, voice=voice, non_streaming=False) for t in texts]
    alone = [_alone(base, i, settings, 14) for i in inputs]
    got, _ = _run(RowDecoder(base.network.talker, settings), {0: [("a", inputs[0], 14)], 5: [("b", inputs[1], 14)]})
    assert torch.equal(got["a"], alone[0]) and torch.equal(got["b"], alone[1])


def test_a_sampled_row_alone_draws_as_decode_frames(engine):
    settings = engine.decode_settings(max_new_tokens=30)
    inputs = _inputs(engine, "Sampled, with a seed.")
    alone = _alone(engine, inputs, settings, 25, torch.Generator().manual_seed(3))
    got, _ = _run(RowDecoder(engine.network.talker, settings, torch.Generator().manual_seed(3)), {0: [("x", inputs, 25)]})
    assert torch.equal(got["x"], alone)


def test_a_removed_row_leaves_the_others_unchanged(engine):
    settings = engine.decode_settings(max_new_tokens=40, **GREEDY)
    inputs = [_inputs(engine, t) for t in ("Stays to the end.", "Leaves early.")]
    decoder = RowDecoder(engine.network.talker, settings)
    decoder.add("stays", inputs[0], 12)
    decoder.add("leaves", inputs[1], 12)
    codes = []
    for step in range(12):
        if step == 4:
            decoder.remove("leaves")
            assert decoder.keys == ["stays"] and decoder.cache.batch == 1
        codes += [f.codes for f in decoder.step() if f.key == "stays"]
    assert torch.equal(torch.stack(codes), _alone(engine, inputs[0], settings, 12))


def test_the_loaded_precision_says_rows_join(engine):
    """`joins_rows` is the loaded engine's capability (its precision), not the files': describe says no."""
    assert engine.capabilities.joins_rows and engine.capabilities.to_dict()["joins_rows"] is True
    assert not describe(engine.folder).capabilities.joins_rows


def test_exact_and_other_stacks_refuse_rows(session_tmp):
    exact = Qwen3TTSEngine.load(model_folder(session_tmp, "custom_voice"), device="cpu")
    assert not exact.capabilities.joins_rows
    with pytest.raises(ValueError, match="int8 / int4"):
        RowDecoder(exact.network.talker, exact.decode_settings())


# -- through the engine contract: synthesize_streams with admit ----------------------------------------
def _request(text, **kw):
    kw.setdefault("max_segment_s", 0.8)
    return SynthesisRequest(text, language="english", voice="ryan", seed=1, stream=True, options=dict(GREEDY), **kw)


def _admit_at(call: int, requests: list) -> callable:
    """An `admit` that gives `requests` when it is asked for the `call`-th time, else nothing."""
    asked = []

    def admit():
        asked.append(1)
        return requests if len(asked) == call else []

    return admit


def _streams(engine, requests, admit) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(engine.synthesize_streams(requests, admit))


def test_streams_that_join_get_their_own_audio(engine):
    """A request admitted while the batch runs starts at the next frame (its first chunk comes
    before the first rows end), a long text's segments follow in its row, and with greedy settings
    each request's audio is the audio it gets alone."""
    first = [_request("One two."), _request("Three four five.")]
    late = _request("A late one. It has two sentences.", max_segment_s=0.4, max_segment_chars=15)
    pairs = _streams(engine, first, _admit_at(3, [late]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = [list(engine.synthesize(r)) for r in (*first, late)]
    order = [i for i, _ in pairs]
    assert order.index(2) < max(k for k, i in enumerate(order) if i == 0)  # it joined while the others ran
    for i, chunks in enumerate(alone):
        mine = [c for j, c in pairs if j == i]
        assert mine[-1].final and not any(c.final for c in mine[:-1])
        assert np.array_equal(np.concatenate([c.samples for c in mine]), np.concatenate([c.samples for c in chunks])), i
    meta = [c for j, c in pairs if j == 2][-1].metadata
    assert len(meta["segments"]) == 3 and meta["batch_size"] == 3 and meta["decode_path"] == {"decode_path": "rows"}


def test_a_joining_request_that_cannot_be_spoken_fails_alone(engine):
    pairs = _streams(engine, [_request("Still spoken.")], _admit_at(1, [replace(_request("Fine."), voice="nobody")]))
    errors = [(i, c) for i, c in pairs if isinstance(c, Exception)]
    assert len(errors) == 1 and errors[0][0] == 1 and isinstance(errors[0][1], RequestError) and errors[0][1].param == "voice"
    assert [c for i, c in pairs if i == 0][-1].final


def test_a_cancelled_row_is_dropped_and_all_cancelled_stops(engine):
    cancels = [CancelToken(), CancelToken()]
    requests = [
        _request("Stays.", cancel=cancels[0], first_chunk_s=0.08, chunk_s=0.08),
        _request("Leaves.", cancel=cancels[1], first_chunk_s=0.08, chunk_s=0.08),
    ]
    seen = [0, 0]
    for i, _ in engine.synthesize_streams(requests, list):
        seen[i] += 1
        if i == 1:
            cancels[1].cancel()
    assert seen[1] == 1 and seen[0] == 11  # 10 frames (0.8 s) and the final chunk
    cancels = [CancelToken()]
    stream = engine.synthesize_streams([_request("Gone.", cancel=cancels[0], first_chunk_s=0.08)], list)
    next(stream)
    cancels[0].cancel()
    with pytest.raises(Cancelled):
        list(stream)
