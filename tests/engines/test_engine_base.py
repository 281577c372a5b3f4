"""The engine base (`koe.engines.engine.BaseEngine`) on a toy family: the checks `Capabilities`
drive, declared voice-prompt options, voice loading, the batch defaults, close; the native API
holding it (`koe.engines.native.TTS`); and the one chunker (`koe.engines.chunker.Chunker`) against the three schedules it replaced."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from koe.engines.base import (
    CLONE,
    DESIGN,
    NO_VOICE,
    PRESET,
    CancelToken,
    Capabilities,
    EmptyText,
    Engine,
    InvalidOption,
    Option,
    OptionsSchema,
    RequestError,
    SynthesisRequest,
    UnsupportedLanguage,
    UnsupportedVoice,
    VoicePromptMismatch,
    VoiceReference,
    collect,
)
from koe.engines.chunker import Chunker
from koe.engines.engine import BaseEngine, Checked
from koe.engines.native import TTS
from koe.engines.pipeline import Piece, PipelineDefaults, Segment

PAD = Option("pad", "float", "silence after the clip", 0.0, low=0, high=2)


class ToyError(ValueError):
    pass


@dataclass
class ToyVoice:
    text: str | None
    pad: float = 0.0
    info: dict = field(default_factory=dict)

    def save(self, folder) -> Path:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "toy.json").write_text(json.dumps({"text": self.text, "pad": self.pad}))
        return Path(folder)

    @classmethod
    def load(cls, folder) -> ToyVoice:
        try:
            meta = json.loads((Path(folder) / "toy.json").read_text())
        except (OSError, ValueError) as e:
            raise ToyError(f"{folder}: not a readable toy voice ({e})") from e
        return cls(meta["text"], meta["pad"])


class ToyEngine(BaseEngine):
    """One sample per character of the segment, in steps of 10 samples."""

    family, title = "toy", "Toy"
    voice_type, voice_error = ToyVoice, ToyError
    pipeline_defaults = PipelineDefaults(first_chunk_s=0.02, chunk_s=0.05)
    sample_rate = 1000
    precision = "float32"

    def __init__(self, modes=frozenset({CLONE}), languages=("auto", "english"), speakers=(), instruct=False) -> None:
        self.caps = Capabilities(
            family="toy",
            variant="t",
            voice_modes=frozenset(modes),
            languages=languages,
            sample_rate=1000,
            speakers=speakers,
            instruct=instruct,
            stream_step_s=0.01,
            options=OptionsSchema((Option("gain", "float", "gain", 1.0, low=0), PAD)),
            voice_options=OptionsSchema((PAD,)),
        )
        self.released = False

    @classmethod
    def load(cls, folder, device=None, dtype=None, *, precision=None) -> ToyEngine:
        return cls()

    @property
    def capabilities(self) -> Capabilities:
        return self.caps

    def build_voice(self, reference: VoiceReference, pad: float = 0.0) -> ToyVoice:
        return ToyVoice(reference.text, pad)

    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        samples = np.full(10 * len(segment.text), c.settings.get("gain", 1.0), np.float32)
        if not segment.streamed:
            yield Piece(samples, len(samples) // 10, last=True)
            return
        chunker, held = Chunker.of(segment.first_chunk_s, segment.chunk_s, self.sample_rate), []
        for step in range(0, len(samples), 10):
            held.append(samples[step : step + 10])
            if chunker.add(10):
                yield Piece(np.concatenate(held), step // 10 + 1)
                held = []
        yield Piece(np.concatenate(held) if held else np.zeros(0, np.float32), len(samples) // 10, last=True)

    def result_metadata(self) -> dict:
        return {"model": "toy"}

    def release(self) -> None:
        self.released = True


# -- checks driven by Capabilities ---------------------------------------------------------------
def _check(engine: ToyEngine, **kw):
    return engine.check_request(SynthesisRequest("Hello there.", **kw))


def test_voice_modes_decide_which_voices_are_taken():
    clone = ToyEngine()
    voice = clone.prepare_voice("clip.wav", "A clip.")
    assert _check(clone, voice=voice).voice is voice
    with pytest.raises(UnsupportedVoice, match="Toy speaks in a cloned voice"):
        _check(clone)
    with pytest.raises(UnsupportedVoice, match="Toy has no preset speakers.*'alloy'.*clone one from a clip"):
        _check(clone, voice="alloy")
    with pytest.raises(VoicePromptMismatch, match="another model family \\(dict\\).*Toy"):
        _check(clone, voice={"not": "a toy voice"})
    presets = ToyEngine(modes={PRESET}, speakers=("ryan", "vivian"))
    assert _check(presets, voice="Ryan").voice == "Ryan"  # names match in any case
    with pytest.raises(UnsupportedVoice, match="unknown speaker 'bob'.*'ryan', 'vivian'"):
        _check(presets, voice="bob")
    with pytest.raises(UnsupportedVoice, match="needs a speaker"):
        _check(presets)
    with pytest.raises(UnsupportedVoice, match="cannot clone"):
        _check(presets, voice=voice)
    for modes in ({NO_VOICE}, {DESIGN}):
        assert _check(ToyEngine(modes=modes)).voice is None


def test_languages_and_instructions():
    engine = ToyEngine()
    assert _check(engine, voice=ToyVoice("x"), language="English").language == "English"
    with pytest.raises(UnsupportedLanguage, match="unsupported language 'german'; Toy takes: auto, english"):
        _check(engine, voice=ToyVoice("x"), language="german")
    with pytest.raises(UnsupportedLanguage, match="reads the language from the text"):
        _check(ToyEngine(languages=("auto",)), voice=ToyVoice("x"), language="german")
    with pytest.warns(UserWarning, match="Toy takes no style instruction"):
        assert _check(engine, voice=ToyVoice("x"), instruct="Whisper.").instruct is None
    assert _check(ToyEngine(instruct=True), voice=ToyVoice("x"), instruct="Whisper.").instruct == "Whisper."
    assert _check(ToyEngine(modes={DESIGN}), instruct="A low voice.").instruct == "A low voice."


def test_options_are_checked_against_the_schema():
    engine = ToyEngine()
    assert _check(engine, voice=ToyVoice("x"), options={"gain": 2}).settings == {"gain": 2.0}
    with pytest.raises(InvalidOption, match="unknown option.*'loud'"):
        _check(engine, voice=ToyVoice("x"), options={"loud": 1})


# -- voices ---------------------------------------------------------------------------------------
def test_prepare_voice_takes_the_declared_prompt_options_and_both_forms():
    engine = ToyEngine()
    assert engine.prepare_voice(VoiceReference("clip.wav", "A clip.")) == ToyVoice("A clip.", 0.0)  # the default filled in
    assert engine.prepare_voice("clip.wav", "A clip.", pad=0.5) == ToyVoice("A clip.", 0.5)
    assert engine.prepare_voice("clip.wav", ref_text="A clip.").text == "A clip."
    with pytest.raises(InvalidOption, match="pad=3"):
        engine.prepare_voice("clip.wav", "A clip.", pad=3)
    with pytest.raises(InvalidOption, match="unknown option.*'speed'"):
        engine.prepare_voice("clip.wav", "A clip.", speed=2)


def test_prompt_options_are_the_request_options_that_shape_a_prompt():
    caps = ToyEngine().capabilities
    assert caps.prompt_options(None) == caps.prompt_options({"gain": 2}) == caps.prompt_options({"pad": 0}) == {}
    assert caps.prompt_options({"pad": 0.5, "gain": 2}) == {"pad": 0.5}
    with pytest.raises(InvalidOption):
        caps.prompt_options({"pad": -1})
    assert caps.to_dict()["voice_options"] == [PAD.describe()] and caps.to_dict()["joins_rows"] is False


def test_load_voice_maps_a_damaged_prompt_to_a_mismatch(tmp_path):
    engine = ToyEngine()
    engine.prepare_voice("clip.wav", "A clip.", pad=0.5).save(tmp_path / "v")
    assert engine.load_voice(tmp_path / "v") == ToyVoice("A clip.", 0.5)
    (tmp_path / "bad").mkdir()
    with pytest.raises(VoicePromptMismatch, match="not a readable toy voice") as e:
        engine.load_voice(tmp_path / "bad")
    assert e.value.param == "voice"


# -- speaking: the pipeline, the batch defaults, close ----------------------------------------------
def test_the_base_meets_the_contract_and_batches_in_turn():
    engine = ToyEngine()
    assert isinstance(engine, Engine)
    voice = engine.prepare_voice("clip.wav", "A clip.")
    requests = [SynthesisRequest(t, voice=voice, seed=1) for t in ("One.", "Two two.")]
    alone = [list(engine.synthesize(r)) for r in requests]
    batch = engine.synthesize_batch(requests)
    assert [[c.samples.tolist() for c in chunks] for chunks in batch] == [[c.samples.tolist() for c in chunks] for chunks in alone]
    streams = [SynthesisRequest(t, voice=voice, stream=True) for t in ("One.", "Two two.", "Three.")]
    streams[1].cancel = CancelToken()
    streams[1].cancel.cancel()
    pairs = list(engine.synthesize_streams(streams))
    assert [i for i, _ in pairs if _.final] == [0, 2]  # in turn; a cancelled one is skipped
    assert np.array_equal(np.concatenate([c.samples for i, c in pairs if i == 0]), collect(engine.synthesize(requests[0])).samples)
    engine.close()
    assert engine.released


def test_the_native_api_holds_the_engine(tmp_path):
    """`koe.engines.native.TTS` (what `koe.load` returns) speaks through the engine it holds: the same
    samples as the contract, the model's options as keyword arguments, voices with their declared
    prompt options, and `close` (also as a context manager) closes the engine."""
    engine = ToyEngine()
    with TTS(engine) as tts:
        assert tts.engine is engine and tts.capabilities is engine.capabilities and (tts.sample_rate, tts.precision) == (1000, "float32")
        voice = tts.prepare_voice("clip.wav", "A clip.", pad=0.5)
        assert (voice.text, voice.pad) == ("A clip.", 0.5)
        with pytest.raises(InvalidOption, match="pitch"):
            tts.prepare_voice("clip.wav", "A clip.", pitch=2)
        said = tts.generate("Hello there.", voice=voice, seed=1, gain=0.5)
        alone = collect(engine.synthesize(SynthesisRequest("Hello there.", voice=voice, seed=1, options={"gain": 0.5})))
        assert np.array_equal(said.audio, alone.samples) and said.sample_rate == 1000 and said.metadata["seed"] == 1
        chunks = list(tts.stream("Hello there.", voice=voice, first_chunk_s=0.03, chunk_s=0.06))
        assert (
            [len(c.samples) for c in chunks] == [30, 60, 30]
            and chunks[-1].final
            and np.array_equal(np.concatenate([c.samples for c in chunks]), said.audio / 0.5)
        )
        with pytest.raises(InvalidOption, match="gain"):
            tts.generate("Hello there.", voice=voice, gain=-1)
        voice.save(tmp_path / "v")
        assert tts.load_voice(tmp_path / "v") == ToyVoice("A clip.", 0.5)
    assert engine.released  # closed with the block
    assert not hasattr(engine, "generate") and not hasattr(engine, "stream")  # the engine is not the native API


def test_a_stream_is_cut_by_the_chunker():
    engine = ToyEngine()
    chunks = list(engine.synthesize(SynthesisRequest("Hello there.", voice=ToyVoice("x"), stream=True)))
    assert [len(c.samples) for c in chunks] == [20, 50, 50, 0]  # 0.02 s, then 0.05 s (120 samples), and the final chunk's metadata
    assert chunks[-1].final and chunks[-1].metadata["model"] == "toy"


def test_a_request_error_names_its_field():
    with pytest.raises(RequestError) as e:
        _check(ToyEngine(), voice=ToyVoice("x"), options={"gain": -1})
    assert e.value.param == "gain"


# -- the chunker against the schedules it replaced ---------------------------------------------------
def _frames_schedule(n: int, first: int, every: int) -> list[int]:
    """Qwen3-TTS's `_RowStream` before the chunker: a piece when the frames pending reach `due`."""
    out, pending, due = [], 0, first
    for _ in range(n):
        pending += 1
        if pending >= due:
            out.append(pending)
            pending, due = 0, every
    return out


def _samples_schedule(sizes: list[int], first: int, every: int) -> list[int]:
    """VoxCPM's inline loop before the chunker: a piece when the samples held reach `size`."""
    out, held, size = [], [], first
    for n in sizes:
        held.append(n)
        if sum(held) >= size:
            out.append(sum(held))
            held, size = [], every
    return out


def _cut_schedule(batches: list[int], first: int, every: int) -> list[int]:
    """F5-TTS's `_pieces` before the chunker: each batch's ready samples cut, the next batch starting with `every`."""
    out = []
    for n in batches:
        start, size = 0, first
        while start < n:
            out.append(min(size, n - start))
            start += size
            size = every
        first = every
    return out


@pytest.mark.parametrize("first, every", [(1, 1), (4, 12), (3, 2), (7, 7)])
def test_chunker_keeps_each_familys_schedule(first, every):
    rng = np.random.default_rng(first * 100 + every)
    chunker, out, pending = Chunker(first, every), [], 0
    for _ in range(40):
        pending += 1
        if chunker.add(1):
            out.append(pending)
            pending = 0
    assert out == _frames_schedule(40, first, every)
    sizes = rng.integers(1, 9, 30).tolist()
    chunker, out, held = Chunker(first, every), [], 0
    for n in sizes:
        held += n
        if chunker.add(n):
            out.append(held)
            held = 0
    assert out == _samples_schedule(sizes, first, every)
    batches = rng.integers(0, 40, 5).tolist()
    chunker = Chunker(first, every)
    pieces = [len(p) for n in batches for p in chunker.split(np.zeros(n))]
    assert pieces == _cut_schedule(batches, first, every)


def test_chunker_sizes_from_seconds():
    assert (Chunker.of(0.32, 0.96, 12.5).due, Chunker.of(0.32, 0.96, 12.5).every) == (4, 12)
    assert Chunker.of(0.0001, 0.0001, 100).due == 1  # at least one unit


def test_capabilities_say_which_option_caps_a_requests_length():
    caps = ToyEngine().capabilities
    assert caps.to_dict()["length_option"] is None  # none: the runaway guard alone
    assert replace(caps, length_option="gain").to_dict()["length_option"] == "gain"


def test_an_engine_that_does_not_convert_says_so_and_conversion_requests_are_checked():
    """`BaseEngine.convert` (a family whose `Capabilities.conversion` is false keeps it): a
    `RequestError` naming the model. `ConversionRequest` refuses what no engine can take."""
    from koe.engines.base import ConversionRequest

    engine = ToyEngine()
    voice = engine.prepare_voice(VoiceReference((np.ones(1000, np.float32), 1000), "Hi."))
    request = ConversionRequest((np.zeros(100, np.float32) + 0.1, 1000), voice, seed=1)
    assert not engine.capabilities.conversion and engine.capabilities.to_dict()["conversion"] is False
    with pytest.raises(RequestError, match="Toy does not convert voices") as e:
        next(iter(engine.convert(request)))
    assert e.value.param == "model"
    for bad, match in [
        (dict(source=(np.zeros((2, 100), np.float32), 1000)), "samples, sample_rate"),
        (dict(source=(np.zeros(100, np.float32), 0)), "samples, sample_rate"),
        (dict(source=(np.zeros(0, np.float32), 1000)), "empty or not finite"),
        (dict(source=(np.full(10, np.nan, np.float32), 1000)), "empty or not finite"),
        (dict(voice="low"), "prepared voice"),
        (dict(seed=-1), "seed"),
        (dict(chunk_s=0), "chunk_s"),
    ]:
        with pytest.raises(RequestError, match=match):
            replace(request, **bad)


def test_streamed_text_is_spoken_sentence_by_sentence_as_it_arrives():
    """`synthesize_text` (the base's: each sentence as soon as it is complete, seed + i, the pause
    between segments) and the native `stream` given pieces: audio for a sentence comes before the
    later pieces are read, the samples are each sentence's spoken alone, and the final chunk, after
    the audio, carries the metadata."""
    engine = ToyEngine(modes=frozenset({NO_VOICE}))
    read: list[str] = []

    def pieces():
        for piece in ["Hello ", "there. ", "How are ", "you? ", "Fine."]:
            read.append(piece)
            yield piece

    chunks, seen_when = [], []
    for chunk in engine.synthesize_text(pieces(), SynthesisRequest("", seed=7, options={"gain": 0.5})):
        chunks.append(chunk)
        seen_when.append(len(read))
    assert seen_when[0] == 3  # "Hello there." spoken once "How" was whole, before "you? " was read
    spoken = [s["text"] for s in chunks[-1].metadata["segments"]]
    assert spoken == ["Hello there.", "How are you?", "Fine."] and [s["seed"] for s in chunks[-1].metadata["segments"]] == [7, 8, 9]
    assert chunks[-1].final and chunks[-1].samples.size == 0 and not any(c.final for c in chunks[:-1])
    pause = np.zeros(int(round(engine.pipeline_defaults.pause_s * 1000)), np.float32)
    alone = [collect(engine.synthesize(SynthesisRequest(t, options={"gain": 0.5}))).samples for t in spoken]
    np.testing.assert_array_equal(collect(iter(chunks)).samples, np.concatenate([alone[0], pause, alone[1], pause, alone[2]]))
    offsets = np.cumsum([0] + [len(c.samples) for c in chunks[:-1]])
    assert [c.offset for c in chunks] == list(offsets)
    native = TTS(engine).stream(iter(["Hello there. ", "How are you? ", "Fine."]), seed=7, gain=0.5)
    np.testing.assert_array_equal(collect(native).samples, collect(iter(chunks)).samples)
    with pytest.raises(EmptyText, match="nothing to speak"):
        list(engine.synthesize_text(iter(["  ", ""]), SynthesisRequest("")))
    with pytest.raises(RequestError, match="must be strings") as e:
        list(engine.synthesize_text(iter(["Hi. ", 3]), SynthesisRequest("")))
    assert e.value.param == "input"
