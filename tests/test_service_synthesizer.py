"""The synthesizer end to end on tiny random-weight models: plan, speak, stream, voices, history, cache."""

import io
import threading

import av
import numpy as np
import pytest
from fixtures_models import model_folder

from koe.engines.base import CancelToken
from koe.service import (
    InvalidRequest,
    KoeHome,
    NotFound,
    PayloadTooLarge,
    RequestCancelled,
    SpeechRequest,
    Synthesizer,
    load_settings,
)
from koe.service.store.models import ModelRef
from koe.service.synthesis.cache import ModelCache

FAST = {"max_new_tokens": 8}
# The random-weight models never end an utterance by themselves; the engine warns, the results say so too.
pytestmark = pytest.mark.filterwarnings("ignore:.*cut off:UserWarning")


@pytest.fixture(scope="module")
def home(session_tmp, tmp_path_factory):
    root = tmp_path_factory.mktemp("koe-home")
    h = KoeHome(load_settings(root, {"models": {"resident_limit": 3}}, environ={}))
    for kind, name in (("custom_voice", "cv"), ("voice_design", "vd"), ("base", "base")):
        h.models.import_model(model_folder(session_tmp, kind), name, link=True)
    return h


@pytest.fixture(scope="module")
def synth(home):
    s = Synthesizer(home, max_input_chars=200)
    yield s
    s.cache.clear()


def req(text="Hello there.", **kw) -> SpeechRequest:
    kw.setdefault("model", "cv")
    kw.setdefault("options", FAST)
    kw.setdefault("seed", 1)
    return SpeechRequest(text=text, **kw)


def decode(data: bytes) -> tuple[str, int, float]:
    with av.open(io.BytesIO(data)) as c:
        s = c.streams.audio[0]
        n = sum(f.samples for f in c.decode(s))
        return s.codec_context.name, s.codec_context.sample_rate, n / s.codec_context.sample_rate


def test_speak_mp3_is_recorded_in_history(synth, home):
    out = synth.speak(req(format="mp3", speaker="ryan"))
    codec, rate, seconds = decode(out.audio)
    assert codec == "mp3float" and rate == out.sample_rate == 24000
    assert seconds == pytest.approx(len(out.samples) / out.engine_sample_rate, abs=0.1)
    assert out.voice == "ryan" and out.seed == 1 and out.model == "cv"
    assert any("cut" in w for w in out.warnings)  # 8 frames: the random model never says "end"
    row = home.db.list_outputs(limit=1)[0]
    assert row.id == out.output_id and row.text == "Hello there." and row.metadata["seed"] == 1 and row.path is None


def test_same_seed_same_audio_and_default_speaker(synth):
    a = synth.speak(req(format="wav"))
    b = synth.speak(req(format="flac"))
    np.testing.assert_array_equal(a.samples, b.samples)
    assert a.voice == "aiden"  # no speaker: the settings' default, else the model's first


def test_save_keeps_the_file(synth):
    out = synth.speak(req(format="opus", save=True))
    assert out.path is not None and out.path.suffix == ".ogg" and out.path.read_bytes() == out.audio


def test_speed_stretches_time(synth):
    normal = synth.speak(req(format="wav"))
    fast = synth.speak(req(format="wav", speed=2.0))
    assert normal.duration / fast.duration == pytest.approx(2.0, rel=0.1)


def test_stream_chunks_form_one_playable_file(synth):
    chunks = list(synth.stream(req(format="wav", options={"max_new_tokens": 12}), first_chunk_s=0.16, chunk_s=0.32))
    assert len(chunks) >= 2 and chunks[-1].final and not any(c.final for c in chunks[:-1])
    assert chunks[0].data[:4] == b"RIFF"
    codec, rate, seconds = decode(b"".join(c.data for c in chunks))
    total = sum(len(c.samples) for c in chunks)
    assert codec == "pcm_s16le" and seconds == pytest.approx(total / 24000, abs=0.01)
    assert chunks[-1].output_id is not None and chunks[-1].metadata["seed"] == 1


def test_stream_cancel_stops_and_frees_the_model(synth):
    token = CancelToken()
    it = synth.stream(req(format="mp3", options={"max_new_tokens": 40}), token, first_chunk_s=0.08, chunk_s=0.08)
    next(it)
    token.cancel()
    with pytest.raises(RequestCancelled):
        for _ in it:
            pass
    abandoned = synth.stream(req(format="wav"), first_chunk_s=0.08, chunk_s=0.08)
    next(abandoned)
    abandoned.close()  # a client that goes away
    assert synth.speak(req()).duration > 0  # the engine is free again


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"text": "   "}, InvalidRequest, "input text is empty"),
        ({"text": "x" * 201}, PayloadTooLarge, "at most 200"),
        ({"voice": "nobody"}, NotFound, "unknown voice 'nobody'.*ryan"),
        ({"speaker": "nobody"}, NotFound, "unknown speaker 'nobody'; cv has: aiden"),
        ({"design": "a deep voice"}, InvalidRequest, "needs a model that designs voices, but 'cv' is a custom_voice model.*vd"),
        ({"model": "base"}, InvalidRequest, "'base' speaks only in a cloned voice: give a library voice or a reference clip"),
        ({"model": "vd", "speaker": "ryan"}, InvalidRequest, "preset speakers need a model that ships them"),
        ({"model": "nope"}, NotFound, "no model named 'nope'"),
        ({"language": "klingon"}, InvalidRequest, "unsupported language 'klingon'"),
        ({"format": "ogg3"}, InvalidRequest, "unsupported audio format"),
        ({"speed": 5.0}, InvalidRequest, "speed 5.0 is out of range"),
        ({"seed": -1}, InvalidRequest, "seed"),
        ({"ref_audio": b"not audio"}, InvalidRequest, "cloning from a reference clip needs a model that clones voices"),
        ({"model": "base", "ref_audio": b"not audio"}, InvalidRequest, "reference audio"),
    ],
)
def test_bad_requests_fail_before_loading(synth, kw, error, match):
    with pytest.raises(error, match=match) as info:
        synth.plan(req(**kw))
    assert 400 <= info.value.status < 500


def test_bad_options_fail_before_loading_and_name_the_valid_ones(synth):
    with pytest.raises(InvalidRequest, match="temperature=0") as info:
        synth.plan(req(options={"temperature": 0}))
    assert info.value.param == "temperature"
    with pytest.raises(InvalidRequest, match="top_p"):
        synth.plan(req(options={"top_p": 1.5}))
    with pytest.raises(InvalidRequest, match="unknown option.*'temp'.*valid: .*temperature"):
        synth.plan(req(options={"temp": 1}))
    with pytest.raises(InvalidRequest, match="must be true or false"):
        synth.plan(req(options={"do_sample": "yes"}))


def test_dropped_instruction_is_a_warning(synth):
    out = synth.speak(req(instruct="whisper"))
    assert any("ignores instructions" in w for w in out.warnings)


def test_design_then_clone_from_the_library(synth, home):
    voice = synth.design_voice("designed", "a calm low voice", model="vd", seed=2, options={"max_new_tokens": 16})
    assert voice.source == "design" and voice.description == "a calm low voice" and voice.duration_s >= 1.0
    assert home.voices.get("designed").ref_text.startswith("Hello!")
    out = synth.speak(req(model="base", voice="designed", format="wav"))
    assert out.voice == "designed" and out.duration > 0
    key = home.models.resolve("base").key
    assert home.voices.get("designed").prepared_for == [key]  # prepared once, kept for next time
    again = synth.speak(req(model="base", voice="designed", format="wav"))
    np.testing.assert_array_equal(again.samples, out.samples)
    with pytest.raises(InvalidRequest, match="library voices are cloned, which needs a model that clones voices"):
        synth.plan(req(voice="designed"))


def test_design_refuses_what_the_library_would_before_speaking(synth, home, monkeypatch):
    spoken = []
    monkeypatch.setattr(synth, "speak", lambda request: spoken.append(request))
    with pytest.raises(InvalidRequest, match="description") as e:
        synth.design_voice("too-long", "a calm voice " * 200, model="vd")
    assert e.value.param == "description" and spoken == [] and not home.voices.exists("too-long")


def test_clone_an_ad_hoc_clip(synth):
    t = np.arange(36000) / 24000
    clip = (0.3 * np.sin(2 * np.pi * (150 + 30 * np.sin(3 * t)) * t)).astype(np.float32)  # 1.5 s
    out = synth.speak(req(model="base", ref_audio=(clip, 24000), ref_text="Hello!"))
    assert out.voice == "clip" and out.metadata["mode"] == "clone_clip" and out.duration > 0
    timbre_only = synth.speak(req(model="base", ref_audio=(clip, 24000)))
    assert timbre_only.duration > 0
    with pytest.raises(InvalidRequest, match="at least 1.0 s"):
        synth.plan(req(model="base", ref_audio=(clip[:12000], 24000)))


def test_reference_padding_reaches_clips_and_library_voices(synth, home):
    """`ref_pad_seconds` (opt-in, bit-changing) shapes the prompt of an ad-hoc clip and of a library
    voice; the library keeps the padded prompt apart from the plain one; results name it."""
    t = np.arange(36000) / 24000
    clip = (0.3 * np.sin(2 * np.pi * (150 + 30 * np.sin(3 * t)) * t)).astype(np.float32)
    plain = synth.speak(req(model="base", ref_audio=(clip, 24000), ref_text="Hello!", format="wav"))
    padded = synth.speak(req(model="base", ref_audio=(clip, 24000), ref_text="Hello!", format="wav", options={"ref_pad_seconds": 0.5}))
    assert plain.metadata["ref_pad_seconds"] == 0.0 and padded.metadata["ref_pad_seconds"] == 0.5
    assert plain.samples.shape != padded.samples.shape or not np.array_equal(plain.samples, padded.samples)
    home.voices.add("padme", (clip, 24000), "Hello!")
    lib_plain = synth.speak(req(model="base", voice="padme", format="wav"))
    lib_padded = synth.speak(req(model="base", voice="padme", format="wav", options={"ref_pad_seconds": 0.5}))
    assert lib_padded.metadata["ref_pad_seconds"] == 0.5
    np.testing.assert_array_equal(lib_plain.samples, plain.samples)  # the library's plain prompt = the clip's
    np.testing.assert_array_equal(lib_padded.samples, padded.samples)
    again = synth.speak(req(model="base", voice="padme", format="wav"))  # the plain prompt was not overwritten
    np.testing.assert_array_equal(again.samples, plain.samples)


def test_speak_batch_shares_one_generation(synth):
    outs = synth.speak_batch([req("One."), req("Two, longer.", format="mp3", speed=1.5)])
    assert [o.format.name for o in outs] == ["wav", "mp3"] and all(o.metadata["batch_size"] == 2 for o in outs)
    with pytest.raises(InvalidRequest, match="differ only in their text"):
        synth.speak_batch([req("One."), req("Two.", speaker="ryan")])


def test_stream_batch_gives_each_request_its_stream(synth, home):
    requests = [req("One stream.", format="wav", options={"max_new_tokens": 12}), req("A second one.", format="mp3", speed=1.5, options={"max_new_tokens": 12})]
    pairs = list(synth.stream_batch(requests, first_chunk_s=[0.16, 0.08], chunk_s=0.32))
    rows = [[c for i, c in pairs if i == row] for row in range(2)]
    for chunks, fmt, _first in zip(rows, ("pcm_s16le", "mp3float"), (0.16, 0.08)):
        assert chunks[-1].final and not any(c.final for c in chunks[:-1]) and len(chunks[0].samples) > 0
        codec, rate, seconds = decode(b"".join(c.data for c in chunks))
        assert codec == fmt and chunks[-1].metadata["batch_size"] == 2 and chunks[-1].output_id is not None
    assert len(rows[0][0].samples) == 2 * 1920 and len(rows[1][0].samples) == 1920  # each its own first chunk
    assert [home.db.get_output(rows[i][-1].output_id).text for i in range(2)] == ["One stream.", "A second one."]
    with pytest.raises(InvalidRequest, match="differ only in their text"):
        synth.stream_batch([req("One."), req("Two.", speaker="ryan")])
    with pytest.raises(InvalidRequest, match="2 requests but 3 values"):
        synth.stream_batch([req("One."), req("Two.")], chunk_s=[0.1, 0.2, 0.3])
    with pytest.raises(InvalidRequest, match="first_chunk_s must be > 0"):
        synth.stream_batch([req("One."), req("Two.")], first_chunk_s=[0.1, 0])


def test_stream_batch_cancel_one_then_all(synth):
    cancels = [CancelToken(), CancelToken()]
    seen = [0, 0]
    for i, _chunk in synth.stream_batch(
        [req("Stays.", options={"max_new_tokens": 10}), req("Leaves.", options={"max_new_tokens": 10})], cancels, first_chunk_s=0.08, chunk_s=0.08
    ):
        seen[i] += 1
        if i == 1:
            cancels[1].cancel()
    assert seen[1] == 1 and seen[0] >= 9
    cancels = [CancelToken(), CancelToken()]
    it = synth.stream_batch(
        [req("One.", options={"max_new_tokens": 40}), req("Two.", options={"max_new_tokens": 40})], cancels, first_chunk_s=0.08, chunk_s=0.08
    )
    next(it)
    for c in cancels:
        c.cancel()
    with pytest.raises(RequestCancelled):
        list(it)
    assert synth.speak(req()).duration > 0  # the engine is free again


# -- model cache ----------------------------------------------------------------------------------
class StubEngine:
    """A loaded model for the cache's tests: it only needs to close (`ModelCache` closes what it unloads)."""

    def close(self) -> None:
        pass


def fake_ref(name: str, tmp_path) -> ModelRef:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    return ModelRef(name, folder, "fake", "custom_voice", "0b6")


def test_cache_limit_idle_unload_and_pinning(tmp_path):
    now = [0.0]
    loads = []
    cache = ModelCache(lambda ref: loads.append(ref.name) or StubEngine(), resident_limit=1, idle_unload_seconds=10, clock=lambda: now[0])
    a, b = fake_ref("a", tmp_path), fake_ref("b", tmp_path)
    with cache.use(a) as entry:
        assert entry.engine is not None
    with cache.use(a):
        pass
    assert loads == ["a"]
    with cache.use(a):
        with cache.use(b):  # a is pinned: b loads over the limit rather than evicting it
            assert {e.ref.name for e in cache.loaded()} == {"a", "b"}
    assert len(cache.loaded()) == 1  # back under the limit once released
    now[0] = 100.0
    assert cache.unload_idle() in (["a"], ["b"]) and cache.loaded() == []


def test_cache_loads_once_under_concurrency(tmp_path):
    loads = []
    gate = threading.Event()

    def slow_load(ref):
        loads.append(ref.name)
        gate.wait(1.0)
        return StubEngine()

    cache = ModelCache(slow_load, resident_limit=2)
    ref = fake_ref("a", tmp_path)
    engines = []

    def worker():
        with cache.use(ref) as entry:
            engines.append(entry.engine)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert loads == ["a"] and len({id(e) for e in engines}) == 1


def test_progress_reports_audio_as_it_is_made(synth):
    seen = []
    out = synth.speak(req(options={"max_new_tokens": 12}), on_progress=seen.append)
    one_shot = synth.speak(req(options={"max_new_tokens": 12}))
    assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] == pytest.approx(len(out.samples) / 24000)
    np.testing.assert_allclose(out.samples, one_shot.samples, atol=1e-4)  # the same codes, streamed
    assert any("cut" in w for w in out.warnings)


def test_precision_setting_loads_the_mode_and_labels_the_output(session_tmp, tmp_path):
    h = KoeHome(load_settings(tmp_path, {"models": {"precision": "int8"}}, environ={}))
    h.models.import_model(model_folder(session_tmp, "custom_voice"), "cv", link=True)
    s = Synthesizer(h)
    try:
        out = s.speak(req())
        assert out.metadata["precision"] == "int8"
        assert h.db.list_outputs(limit=1)[0].metadata["precision"] == "int8"
    finally:
        s.cache.clear()
    exact = Synthesizer(KoeHome(load_settings(tmp_path / "exact", {}, environ={})))
    h2 = exact.home
    h2.models.import_model(model_folder(session_tmp, "custom_voice"), "cv", link=True)
    try:
        assert exact.speak(req()).metadata["precision"] == "float32"
    finally:
        exact.cache.clear()


def test_unloading_closes_the_engine(tmp_path):
    closed = []

    class Engine:
        def close(self) -> None:
            closed.append(True)

    cache = ModelCache(lambda ref: Engine(), resident_limit=1)
    a, b = fake_ref("a", tmp_path), fake_ref("b", tmp_path)
    with cache.use(a):
        pass
    with cache.use(b):  # a is evicted to make room
        pass
    assert closed == [True]
    assert cache.unload(b) and closed == [True, True]


def test_a_library_voice_shorter_than_the_model_s_floor_is_refused_when_planned(synth, home, monkeypatch):
    """The model's `min_reference_s`, not one constant, decides whether a library voice can be cloned."""
    from dataclasses import replace

    t = np.arange(30000) / 24000  # 1.25 s
    home.voices.add("short-ref", ((0.3 * np.sin(2 * np.pi * (150 + 30 * np.sin(3 * t)) * t)).astype(np.float32), 24000), "Hello!", overwrite=True)
    assert synth.plan(req(model="base", voice="short-ref")).mode == "clone_voice"
    details = synth.planner.details
    monkeypatch.setattr(synth.planner, "details", lambda ref: (d := details(ref)) and replace(d, capabilities=replace(d.capabilities, min_reference_s=2.0)))
    with pytest.raises(InvalidRequest, match=r"voice 'short-ref' is 1\.25 s of audio; base clones from at least 2 s"):
        synth.plan(req(model="base", voice="short-ref"))
    home.voices.remove("short-ref")


def test_voice_conversion_is_refused_on_a_model_that_does_not_convert(synth):
    """`koe convert` / POST /v1/audio/conversions on a model without `Capabilities.conversion`: a
    clear error naming the model, before anything loads. (Conversion itself, and its other
    refusals: tests/test_toy_family.py.)"""
    from koe.service.synthesis.requests import ConvertRequest

    clip = (0.3 * np.sin(np.linspace(0, 600, 24000)).astype(np.float32), 24000)
    with pytest.raises(InvalidRequest, match="'base' does not convert voices") as e:
        synth.plan_conversion(ConvertRequest(source=clip, model="base", ref_audio=clip))
    assert e.value.param == "model"
