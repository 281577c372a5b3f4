"""The engine contract, checked for every registered family on its random-weight fixtures.

Public API only: `koe.engines.registry` (describe, write_fixture, load_engine), `koe.load` (the
native API, which holds the engine), and the `Engine` protocol of `koe.engines.base`. A new family gets these checks by registering its spec: a built-in
one, or a plugin installed through the `koe.families` entry point (`registry.families()`; the toy
family's test runs this file with tests/plugins/koe_sine installed).
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace

import numpy as np
import pytest
import torch
from shared_folders import fixture as shared_fixture

import koe
from koe.engines.base import (
    CLONE,
    CLONE_WITHOUT_TRANSCRIPT,
    DESIGN,
    NO_VOICE,
    PRESET,
    Cancelled,
    CancelToken,
    Engine,
    RequestError,
    SynthesisRequest,
    VoiceReference,
    collect,
)
from koe.engines.engine import BaseEngine
from koe.engines.native import TTS
from koe.engines.registry import describe, families, import_target, load_engine, spec, write_fixture
from koe.engines.spec import spec_native

pytestmark = pytest.mark.filterwarnings(  # random weights never stop by themselves
    "ignore:speech was cut off:UserWarning", "ignore:generation stopped at max_mel_tokens"
)

CASES = [(family, variant) for family in families() for variant in spec(family).fixture_variants]
MAX_SEGMENT_S = 0.6  # a few steps: random weights run to the guard
# Options that keep a family's request short where the cap above does not (every request of the
# contract takes them, both sides of each comparison alike): IndexTTS's beam search of 3 on a GPT
# 1280 wide (release 2's tiny folder), and the native call's length, which has no cap.
QUICK = {"indextts": {"num_beams": 1, "max_mel_tokens": 24}, "fish_speech": {"max_new_tokens": 16}}


def _tone(seconds: float, sr: int = 24000) -> tuple[np.ndarray, int]:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 150 * t * (1 + 0.05 * np.sin(2 * np.pi * 3 * t)))).astype(np.float32), sr


@pytest.fixture(scope="module", params=CASES, ids=[f"{f}-{v}" for f, v in CASES])
def model(request, tmp_path_factory):
    family, variant = request.param
    folder = shared_fixture(family, variant)
    engine = load_engine(folder, device="cpu")
    yield folder, engine
    engine.close()


def _clip_s(caps) -> float:
    """A reference clip's length the model takes (2 s, or its shortest where that is longer)."""
    return max(2.0, caps.min_reference_s)


def _request(engine: Engine, text: str = "Every engine meets one contract.", **kw) -> SynthesisRequest:
    """A request in the first voice mode the model offers."""
    caps = engine.capabilities
    modes = caps.voice_modes
    voice, instruct = None, None
    if PRESET in modes:
        voice = caps.speakers[0]
    elif DESIGN in modes:  # a description the model takes: its own designed voice for "alloy", else free words
        alias = spec(engine.family).openai_voice("alloy", caps)
        instruct = alias.design if alias is not None and alias.design else "A calm, low voice."
    elif CLONE in modes:
        voice = engine.prepare_voice(VoiceReference(_tone(_clip_s(caps)), "A reference clip."))
    elif CLONE_WITHOUT_TRANSCRIPT in modes:
        voice = engine.prepare_voice(VoiceReference(_tone(_clip_s(caps))))
    else:
        assert NO_VOICE in modes, f"no voice mode in {modes}"
    kw.setdefault("seed", 3)
    kw.setdefault("max_segment_s", MAX_SEGMENT_S)
    kw.setdefault("options", dict(QUICK.get(engine.family, {})))
    return SynthesisRequest(text=text, voice=voice, instruct=instruct, **kw)


def test_is_an_engine_and_describe_agrees_with_the_loaded_model(model):
    folder, engine = model
    assert isinstance(engine, Engine)
    d = describe(folder)
    assert d.info.family == engine.family and not d.missing
    assert d.capabilities == engine.capabilities
    assert d.capabilities.voice_modes and d.capabilities.sample_rate > 0 and d.capabilities.languages


def test_every_engine_is_a_base_engine_with_every_method(model):
    _, engine = model
    assert isinstance(engine, BaseEngine)
    for name in ("load", "prepare_voice", "load_voice", "synthesize", "synthesize_batch", "synthesize_streams", "close"):
        assert callable(getattr(engine, name)), name
    caps = engine.capabilities
    assert caps.prompt_options({o.name: o.default for o in caps.voice_options.options}) == {}  # defaults: the plain prompt


def test_koe_load_gives_the_native_api_holding_the_engine(model):
    """`koe.load` returns the family's native API (`koe.engines.native.TTS`, or the subclass its spec
    names), which holds an engine and is not one: `generate` / `stream` speak what the engine's
    `synthesize` speaks, and the engine carries no native method of its own."""
    folder, engine = model
    with koe.load(folder, device="cpu") as tts:
        assert isinstance(tts, TTS) and type(tts) is import_target(spec_native(spec(engine.family)))
        assert isinstance(tts.engine, type(engine)) and not isinstance(tts, BaseEngine)
        assert not any(hasattr(tts.engine, name) for name in ("generate", "stream"))
        assert tts.capabilities == engine.capabilities and tts.sample_rate == engine.sample_rate and tts.precision == engine.precision
        request = replace(_request(tts.engine, "Hi."), max_segment_s=None)  # the native call has no cap: the runaway guard's 5 s
        said = tts.generate(request.text, voice=request.voice, instruct=request.instruct, seed=request.seed, **request.options)
        np.testing.assert_array_equal(said.audio, collect(tts.engine.synthesize(request)).samples)
        assert said.sample_rate == engine.sample_rate and said.metadata["seed"] == request.seed


def test_batch_methods_speak_every_request(model):
    """Every engine has both batch methods: one batched decode where `capabilities.batch` /
    `batch_stream` say so, else each request in turn, with what `synthesize` gives it alone."""
    _, engine = model
    caps = engine.capabilities
    requests = [_request(engine, text) for text in ("A first text.", "And a second one.")]
    batch = engine.synthesize_batch(requests)
    assert len(batch) == 2 and all(chunks[-1].final and len(collect(iter(chunks)).samples) for chunks in batch)
    if not caps.batch:
        for chunks, request in zip(batch, requests, strict=True):
            np.testing.assert_array_equal(collect(iter(chunks)).samples, collect(engine.synthesize(request)).samples)
    streams = [replace(r, stream=True) for r in requests]
    pairs = list(engine.synthesize_streams(streams))
    assert sorted(i for i, c in pairs if c.final) == [0, 1]
    if not caps.batch_stream:
        for i, request in enumerate(streams):
            alone = np.concatenate([c.samples for c in engine.synthesize(request)])
            np.testing.assert_array_equal(np.concatenate([c.samples for j, c in pairs if j == i]), alone)


def test_stream_equals_one_shot(model):
    _, engine = model
    request = _request(engine)
    one = collect(engine.synthesize(request))
    chunks = list(engine.synthesize(replace(request, stream=True)))
    assert chunks[-1].final and not any(c.final for c in chunks[:-1]) and len(chunks) >= 2
    assert [c.offset for c in chunks] == list(np.cumsum([0] + [len(c.samples) for c in chunks[:-1]]))
    streamed = np.concatenate([c.samples for c in chunks])
    assert one.metadata["seed"] == chunks[-1].metadata["seed"] == 3 and "truncated" in one.metadata
    if not engine.capabilities.stream_is_one_shot:
        # upstream's own streaming decodes otherwise (VoxCPM): the same patches, the same length, other
        # samples; each mode is checked against upstream's same mode by the family's parity tests
        assert len(streamed) == len(one.samples) and one.metadata["frames"] == chunks[-1].metadata["frames"]
        again = np.concatenate([c.samples for c in engine.synthesize(replace(request, stream=True))])
        np.testing.assert_array_equal(again, streamed)
        return
    # Qwen3-TTS in-context clones cut the reference off in proportion, which may keep one sample of it.
    assert 0 <= len(one.samples) - len(streamed) <= 1
    np.testing.assert_allclose(streamed, one.samples[len(one.samples) - len(streamed) :], atol=1e-4)


def test_the_same_seed_gives_the_same_audio(model):
    _, engine = model
    request = _request(engine)
    a, b = collect(engine.synthesize(request)), collect(engine.synthesize(request))
    np.testing.assert_array_equal(a.samples, b.samples)
    assert a.sample_rate == engine.capabilities.sample_rate


def test_long_text_is_spoken_in_segments_with_a_seed_each(model):
    _, engine = model
    text = "The first sentence is here. The second one follows it."
    out = collect(engine.synthesize(_request(engine, text, max_segment_chars=30, pause_s=0.1)))
    assert [s["seed"] for s in out.metadata["segments"]] == [3, 4]


def test_cancel_stops_within_one_chunk(model):
    _, engine = model
    cancel = CancelToken()
    chunks = engine.synthesize(_request(engine, "This would go on for a long while yet.", cancel=cancel, stream=True, max_segment_s=4.0))
    next(chunks)
    cancel.cancel()
    after = 0
    with pytest.raises(Cancelled):
        for _ in chunks:
            after += 1
    assert after <= 1


def test_voice_prompt_save_and_load_give_the_same_audio(model, tmp_path):
    _, engine = model
    modes = engine.capabilities.voice_modes
    if not modes & {CLONE, CLONE_WITHOUT_TRANSCRIPT}:
        with pytest.raises(RequestError):
            engine.prepare_voice(VoiceReference(_tone(2.0), "A reference clip."))
        return
    text = "A reference clip." if CLONE in modes else None
    prompt = engine.prepare_voice(VoiceReference(_tone(_clip_s(engine.capabilities)), text))
    prompt.save(tmp_path / "voice")
    again = engine.load_voice(tmp_path / "voice")
    request = _request(engine)
    a = collect(engine.synthesize(replace(request, voice=prompt)))
    b = collect(engine.synthesize(replace(request, voice=again)))
    np.testing.assert_array_equal(a.samples, b.samples)


def test_a_bad_option_names_the_valid_ones(model):
    _, engine = model
    names = engine.capabilities.options.names
    with pytest.raises(RequestError) as info:
        collect(engine.synthesize(_request(engine, options={"no_such_option": 1})))
    assert "no_such_option" in str(info.value)
    assert all(n in str(info.value) for n in names if n != "non_streaming_mode")


def test_an_empty_text_is_a_request_error(model):
    _, engine = model
    with pytest.raises(RequestError, match="empty"):
        collect(engine.synthesize(_request(engine, "   ")))


@pytest.mark.parametrize("family, variant", CASES[:1])
def test_close_frees_the_weights(family, variant, tmp_path):
    folder = write_fixture(tmp_path / "m", family, variant)
    gc.collect()
    before = {id(o) for o in gc.get_objects() if type(o) is torch.nn.Parameter}
    engine = load_engine(folder, device="cpu")
    collect(engine.synthesize(_request(engine)))
    params = [weakref.ref(o) for o in gc.get_objects() if type(o) is torch.nn.Parameter and id(o) not in before]
    assert params
    engine.close()
    gc.collect()
    assert sum(r() is not None for r in params) == 0  # the engine object is still alive; its weights are gone


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("family, variant", CASES[:1])
def test_close_gives_the_device_memory_back(family, variant, tmp_path):
    folder = write_fixture(tmp_path / "m", family, variant)
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    engine = load_engine(folder, device="cuda")
    collect(engine.synthesize(_request(engine)))
    assert torch.cuda.memory_allocated() > baseline
    engine.close()
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() <= baseline
