"""Streaming is a view of the one decode core: same codes as one-shot, samples within float32 rounding."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from fixtures_models import model_folder

import koe
from koe.engines.base import Cancelled, CancelToken, SynthesisRequest
from koe.engines.qwen3_tts import generate as core
from koe.engines.qwen3_tts.limits import frame_budget

# Largest |stream - one-shot| seen on the tiny models is ~1.6e-6 (samples are in [-1, 1]); the
# decode windows differ in length, so matrix shapes (and float rounding) differ.
SAMPLE_BOUND = 1e-5
SAMPLES_PER_FRAME = 1920


def tone(seconds: float, sr: int = 24000) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 150 * t * (1 + 0.05 * np.sin(2 * np.pi * 3 * t)))).astype(np.float32)


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    return {kind: koe.load(model_folder(root, kind, "tiny")) for kind in ("custom_voice", "voice_design", "base")}


def _cases(engines):
    base = engines["base"]
    icl = base.prepare_voice((tone(2.0), 24000), ref_text="A reference clip.")
    xvec = base.prepare_voice((tone(2.0), 24000), x_vector_only=True)
    return {
        "custom_voice": (engines["custom_voice"], {"speaker": "ryan", "language": "english"}),
        "voice_design": (engines["voice_design"], {"instruct": "A calm low voice.", "language": "english"}),
        "icl": (base, {"voice": icl, "language": "english"}),
        "x_vector": (base, {"voice": xvec}),
    }


@pytest.mark.parametrize("chunk_frames", [1, 4, 12])
@pytest.mark.parametrize("case", ["custom_voice", "voice_design", "icl", "x_vector"])
def test_stream_equals_one_shot(engines, case, chunk_frames):
    tts, kwargs = _cases(engines)[case]
    text = "Streaming should match the one-shot result."
    with pytest.warns(UserWarning, match="cut off"):
        one = tts.generate(text, seed=7, max_new_tokens=30, **kwargs)
    with pytest.warns(UserWarning, match="cut off"):
        chunks = list(tts.stream(text, seed=7, max_new_tokens=30, first_chunk_frames=4, chunk_frames=chunk_frames, **kwargs))
    assert chunks[-1].final and not any(c.final for c in chunks[:-1])
    codes = np.concatenate([c.metadata["codes"] for c in chunks])
    assert np.array_equal(codes, one.codes.numpy())
    audio = np.concatenate([c.samples for c in chunks])
    assert [c.offset for c in chunks] == list(np.cumsum([0] + [len(c.samples) for c in chunks[:-1]]))
    if case == "icl":
        # Upstream cuts the reference off in proportion (int(ref/total * samples)), which can keep
        # one sample of it; the stream starts exactly at the reference boundary.
        extra = len(one.audio) - len(audio)
        assert extra in (0, 1)
        reference = one.audio[extra:]
    else:
        reference = one.audio
    assert audio.shape == reference.shape
    assert np.abs(audio - reference).max() <= SAMPLE_BOUND


@pytest.mark.parametrize("first", [1, 4, 7])
def test_first_chunk_after_configured_frames(engines, first):
    tts = engines["custom_voice"]
    stream = tts.stream("First audio arrives early.", speaker="vivian", seed=1, max_new_tokens=20, first_chunk_frames=first, chunk_frames=12)
    chunk = next(stream)
    stream.close()
    assert chunk.metadata["frames"] == first
    assert len(chunk.samples) == first * SAMPLES_PER_FRAME and chunk.offset == 0


def test_guard_stops_a_model_that_never_ends(engines):
    """Random weights almost never draw end-of-speech: the guard, not max_new_tokens (8192), stops it."""
    tts = engines["custom_voice"]
    text = "Hi there."
    budget = frame_budget(text)
    with pytest.warns(UserWarning, match="cut off after"):
        result = tts.generate(text, speaker="ryan", seed=0)
    assert result.metadata["truncated"] is True
    assert result.metadata["frames"] == budget and result.metadata["frame_budget"] == budget
    assert result.metadata["warnings"] and "frame budget" in result.metadata["warnings"][0]


def test_guard_in_streaming_reports_truncation(engines):
    tts = engines["custom_voice"]
    with pytest.warns(UserWarning, match="cut off"):
        chunks = list(tts.stream("Hi.", speaker="ryan", seed=0, max_frames=9, chunk_frames=4))
    assert chunks[-1].metadata["truncated"] is True and chunks[-1].metadata["frames"] == 9
    assert sum(len(c.samples) for c in chunks) == 9 * SAMPLES_PER_FRAME


def test_long_text_streams_across_segments_with_reproducible_seeds(engines):
    tts = engines["custom_voice"]
    text = "First sentence is here. Second one follows it. Third one ends the text."
    kwargs = dict(speaker="ryan", seed=11, max_frames=6, max_segment_chars=30, pause_s=0.1)
    with pytest.warns(UserWarning):
        one = tts.generate(text, **kwargs)
    with pytest.warns(UserWarning):
        chunks = list(tts.stream(text, chunk_frames=4, **kwargs))
    assert [s["seed"] for s in one.metadata["segments"]] == [11, 12, 13]
    audio = np.concatenate([c.samples for c in chunks])
    assert audio.shape == one.audio.shape and np.abs(audio - one.audio).max() <= SAMPLE_BOUND
    pause = int(0.1 * 24000)
    assert np.all(one.audio[6 * SAMPLES_PER_FRAME : 6 * SAMPLES_PER_FRAME + pause] == 0)
    with pytest.warns(UserWarning):
        second = tts.generate("Second one follows it.", speaker="ryan", seed=12, max_frames=6)
    assert torch.equal(one.codes[6:12], second.codes)


def _count_frames(monkeypatch) -> list[int]:
    calls = [0]
    original = core.predict_codebooks

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(core, "predict_codebooks", counting)
    return calls


def test_cancel_after_first_chunk_stops_within_one_frame(engines, monkeypatch):
    tts = engines["custom_voice"]
    calls = _count_frames(monkeypatch)
    cancel = CancelToken()
    stream = tts.stream("This would go on for a long while.", speaker="ryan", seed=2, cancel=cancel, first_chunk_frames=4)
    first = next(stream)
    assert first.metadata["frames"] == 4
    cancel.cancel()
    with pytest.raises(Cancelled):
        next(stream)
    assert calls[0] <= 4 + 1


def test_closing_the_stream_stops_decoding(engines, monkeypatch):
    tts = engines["custom_voice"]
    calls = _count_frames(monkeypatch)
    stream = tts.stream("Closing early frees the request.", speaker="ryan", seed=2, first_chunk_frames=3)
    next(stream)
    stream.close()
    assert calls[0] == 3


def test_cancel_in_one_shot_generation(engines):
    tts = engines["custom_voice"]
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        tts.generate("Never spoken.", speaker="ryan", cancel=cancel)


# -- several streams from one batched decode (engine.synthesize_streams) --------------------------
BATCH_TEXTS = ["A first stream of the batch.", "The second.", "A third and somewhat longer stream in the same batch."]


def _batch_requests(case, voice, **kw):
    return [SynthesisRequest(t, language="english", voice=voice, seed=5, **kw) for t in BATCH_TEXTS]


def _by_request(pairs, n):
    rows = [[] for _ in range(n)]
    for i, chunk in pairs:
        rows[i].append(chunk)
    return rows


@pytest.mark.parametrize("case", ["custom_voice", "icl"])
def test_batched_streams_equal_the_batched_one_shot(engines, case):
    """Each stream of a batch has its row's codes from the one-shot batch (same seed) and, within
    float32 rounding, its samples; a row that reaches its own budget ends first, alone."""
    tts, kwargs = _cases(engines)[case]
    voice = kwargs.get("speaker") or kwargs.get("voice")
    one = [c for (c,) in tts.engine.synthesize_batch(_batch_requests(case, voice, max_segment_s=1.0))]  # 13 frames each
    assert [c.metadata["frames"] for c in one] == [13] * 3
    budgets = (1.0, 0.4, 0.7)  # 13, 5 and 9 frames: the row caps change no other row
    streamed = [replace(r, max_segment_s=s, first_chunk_s=0.16, chunk_s=0.32) for r, s in zip(_batch_requests(case, voice), budgets)]
    with pytest.warns(UserWarning, match="cut off"):
        pairs = list(tts.engine.synthesize_streams(streamed))
    rows = _by_request(pairs, 3)
    finals = [next(k for k, (i, c) in enumerate(pairs) if i == row and c.final) for row in range(3)]
    assert finals[1] < finals[2] < finals[0]  # the shortest row's last chunk comes first
    for row, (chunks, frames) in enumerate(zip(rows, (13, 5, 9))):
        assert chunks[-1].final and not any(c.final for c in chunks[:-1])
        assert [c.metadata["frames"] for c in chunks[:-1]] == list(range(2, frames, 4))  # 2 frames, then every 4
        meta = chunks[-1].metadata
        assert meta["frames"] == frames and meta["truncated"] is True and meta["batch_size"] == 3 and meta["seed"] == 5
        codes = np.concatenate([c.metadata["codes"] for c in chunks])
        assert np.array_equal(codes, one[row].metadata["codes"][:frames].numpy())
        audio = np.concatenate([c.samples for c in chunks])
        assert [c.offset for c in chunks] == list(np.cumsum([0] + [len(c.samples) for c in chunks[:-1]]))
        extra = len(one[row].samples) - 13 * SAMPLES_PER_FRAME  # ICL: upstream's proportional cut may keep a sample
        assert extra in ((0, 1) if case == "icl" else (0,))
        reference = one[row].samples[extra:][: len(audio)]
        assert len(audio) == frames * SAMPLES_PER_FRAME and np.abs(audio - reference).max() <= SAMPLE_BOUND


def test_a_cancelled_stream_of_a_batch_stops_alone(engines):
    tts = engines["custom_voice"]
    cancels = [CancelToken() for _ in BATCH_TEXTS]
    requests = [replace(r, cancel=c, max_segment_s=1.0, first_chunk_s=0.08, chunk_s=0.08) for r, c in zip(_batch_requests("custom_voice", "ryan"), cancels)]
    seen = [0, 0, 0]
    with pytest.warns(UserWarning, match="cut off"):
        for i, _chunk in tts.engine.synthesize_streams(requests):
            seen[i] += 1
            if i == 1 and seen[1] == 3:
                cancels[1].cancel()  # its client went away: no more chunks for it, the others go on
    assert seen == [14, 3, 14]  # 13 one-frame chunks and the final (empty) one
    cancels = [CancelToken() for _ in BATCH_TEXTS]
    stream = tts.engine.synthesize_streams([replace(r, cancel=c, first_chunk_s=0.08) for r, c in zip(_batch_requests("custom_voice", "ryan"), cancels)])
    next(stream)
    for c in cancels:
        c.cancel()
    with pytest.raises(Cancelled):  # every stream gone: the decode stops
        list(stream)


def test_a_long_text_in_a_stream_batch_is_spoken_after_it_alone(engines):
    tts = engines["custom_voice"]
    long_text = "First sentence is here. Second one follows it."
    requests = [replace(r, max_segment_s=0.4, chunk_s=0.32) for r in _batch_requests("custom_voice", "ryan")]
    requests[1] = replace(requests[1], text=long_text, max_segment_chars=30)  # two segments
    with pytest.warns(UserWarning, match="cut off"):
        pairs = list(tts.engine.synthesize_streams(requests))
    order = [i for i, _ in pairs]
    assert order.index(1) > max(k for k, i in enumerate(order) if i in (0, 2))  # after the batch of the other two
    rows = _by_request(pairs, 3)
    assert rows[1][-1].metadata["frames"] == 10 and len(rows[1][-1].metadata["segments"]) == 2
    assert "batch_size" not in rows[1][-1].metadata and rows[0][-1].metadata["batch_size"] == 2
    with pytest.warns(UserWarning, match="cut off"):
        alone = list(tts.engine.synthesize(requests[1]))
    assert np.array_equal(np.concatenate([c.samples for c in rows[1]]), np.concatenate([c.samples for c in alone]))
