"""An emotion reference (a second clip whose emotion the speech takes) through the family kit and the
product: the kit's check (`BaseEngine.check_emotion`, driven by `Capabilities.emotion_reference`) on
a toy engine; the planner refusing one for a model that takes none (the tiny Qwen3-TTS Base); then
IndexTTS 2's tiny random release (the one family that takes one) through the Python API
(`tts.generate(..., emotion=)`), `koe speak --emotion-ref / --emotion-voice`, the server's
`emotion_voice` (JSON and the OpenAI client's `extra_body`) and the history's replay. Each path's
samples equal the engine's with the same prompt, bit for bit; that the engine's equal upstream's
`emo_audio_prompt` is tests/engines/indextts/test_indextts_infer2.py's job 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from fixtures_models import model_folder
from product_helpers import assert_error, decode, koe_command, one_line_error, speechy, write_wav
from shared_folders import fixture as shared_fixture

from koe.engines.base import CLONE_WITHOUT_TRANSCRIPT, Capabilities, SynthesisRequest, UnsupportedVoice, VoicePromptMismatch, collect
from koe.engines.engine import BaseEngine, Checked
from koe.engines.pipeline import Piece, Segment
from koe.server import create_app
from koe.service import KoeHome, load_settings
from koe.service.errors import InvalidRequest, NotFound
from koe.service.synthesis.requests import SpeechRequest
from koe.service.synthesis.synthesizer import Synthesizer

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off")

TEXT = "Hello there, this is a test."
RATE = 22050
FRAMES = {"max_mel_tokens": 12}


# -- the kit, on a toy engine ----------------------------------------------------------------------
class ToyPrompt:
    def save(self, folder):
        return Path(folder)


class OtherPrompt(ToyPrompt):
    pass


class ToyEngine(BaseEngine):
    """A clone-only engine that says 0.01 s of silence and keeps what `check_request` handed it."""

    family, title, voice_type = "toy", "Toy", ToyPrompt
    sample_rate = 16000

    def __init__(self, emotion_reference: bool) -> None:
        self.caps = Capabilities("toy", "toy-1", frozenset({CLONE_WITHOUT_TRANSCRIPT}), ("auto",), 16000, emotion_reference=emotion_reference)
        self.seen: list[Checked] = []

    @property
    def capabilities(self) -> Capabilities:
        return self.caps

    @property
    def precision(self) -> str:
        return "float32"

    def build_voice(self, reference):
        return ToyPrompt()

    def check_prompt(self, voice):
        if isinstance(voice, OtherPrompt):
            raise VoicePromptMismatch("made for another variant")
        return voice

    def speak_segment(self, segment: Segment, checked: Checked) -> Iterator[Piece]:
        self.seen.append(checked)
        yield Piece(np.zeros(160, np.float32), 1, last=True)

    def result_metadata(self) -> dict:
        return {}


def test_the_kit_refuses_an_emotion_reference_where_the_capabilities_take_none():
    engine = ToyEngine(emotion_reference=False)
    voice = engine.prepare_voice(("unused", 16000))
    collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice)))  # none given: as before
    with pytest.raises(UnsupportedVoice, match=r"Toy \(toy-1\) takes no emotion reference") as e:
        collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice, emotion=voice)))
    assert e.value.param == "emotion"
    assert Capabilities("toy", "toy-1", frozenset(), ("auto",), 16000).to_dict()["emotion_reference"] is False


def test_the_kit_hands_a_checked_emotion_reference_to_the_family():
    engine = ToyEngine(emotion_reference=True)
    voice, emotion = ToyPrompt(), ToyPrompt()
    collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice, emotion=emotion)))
    assert engine.seen[-1].voice is voice and engine.seen[-1].emotion is emotion
    collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice)))
    assert engine.seen[-1].emotion is None
    with pytest.raises(UnsupportedVoice, match="prepared from a clip") as e:
        collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice, emotion="angry")))
    assert e.value.param == "emotion"
    with pytest.raises(VoicePromptMismatch, match="another model family"):
        collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice, emotion=object())))
    with pytest.raises(VoicePromptMismatch, match="the emotion reference: made for another variant") as e:
        collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice, emotion=OtherPrompt())))
    assert e.value.param == "emotion"
    assert engine.caps.to_dict()["emotion_reference"] is True


def test_the_planner_refuses_an_emotion_reference_for_a_model_that_takes_none(tmp_path, session_tmp):
    home = KoeHome(load_settings(tmp_path / "home", flags={"models": {"default": "base"}}, environ={}))
    home.models.import_model(model_folder(session_tmp, "base"), "base", link=True)
    home.voices.add("joy", (speechy(2.0), 24000))
    synth = Synthesizer(home)
    for given, param in (({"emotion_voice": "joy"}, "emotion_voice"), ({"emotion_audio": (speechy(2.0), 24000)}, "emotion_audio")):
        with pytest.raises(InvalidRequest, match="'base' takes no emotion reference") as e:
            synth.plan(SpeechRequest(text=TEXT, voice="joy", **given))
        assert e.value.param == param


# -- IndexTTS 2 through the product ----------------------------------------------------------------
@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    pytest.importorskip("koe_indextts")  # the family's own package (its licence keeps it out of koe)
    return shared_fixture("indextts", "IndexTTS-2")


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("emotion-clips")
    low = speechy(2.5, RATE)
    high = (0.8 * np.sin(2 * np.pi * 330 * np.arange(int(2.0 * RATE)) / RATE) * speechy(2.0, RATE) / 0.3).astype(np.float32)
    return {"speaker": write_wav(folder / "speaker.wav", low, RATE), "emotion": write_wav(folder / "emotion.wav", high, RATE)}


@pytest.fixture(scope="module")
def tts(release):
    import koe

    model = koe.load(release)
    yield model
    model.close()


@pytest.fixture(scope="module")
def expected(tts, clips) -> dict[str, np.ndarray]:
    """The engine's samples, through its contract, with and without the emotion clip (seed 3)."""
    engine = tts.engine
    voice, emotion = engine.prepare_voice(str(clips["speaker"])), engine.prepare_voice(str(clips["emotion"]))
    out = {}
    for name, emo in (("emotion", emotion), ("own", None)):
        out[name] = collect(engine.synthesize(SynthesisRequest(text=TEXT, voice=voice, seed=3, options=FRAMES, emotion=emo))).samples
    assert not np.array_equal(out["emotion"], out["own"])  # the emotion clip changes the speech
    return out


def int16(samples: np.ndarray) -> np.ndarray:
    """The engine's float samples as koe writes them in 16 bits (FFmpeg's rounding: `lrintf(x * 32768)`, clipped)."""
    return np.clip(np.rint(np.asarray(samples, np.float32) * np.float32(32768.0)), -32768, 32767).astype(np.int16)


def test_the_python_api_takes_a_clip_or_a_prompt(tts, clips, expected):
    voice = tts.prepare_voice(str(clips["speaker"]))
    assert tts.capabilities.emotion_reference
    by_clip = tts.generate(TEXT, voice=voice, emotion=str(clips["emotion"]), seed=3, **FRAMES)
    assert np.array_equal(by_clip.audio, expected["emotion"])
    by_prompt = tts.generate(TEXT, voice=voice, emotion=tts.prepare_voice(clips["emotion"]), seed=3, **FRAMES)
    assert np.array_equal(by_prompt.audio, expected["emotion"])
    streamed = np.concatenate([c.samples for c in tts.stream(TEXT, voice=voice, emotion=str(clips["emotion"]), seed=3, **FRAMES)])
    assert np.array_equal(streamed, expected["emotion"])  # a segment comes whole, then its silence
    # emo_alpha weighs the clip against the voice's speaker features (at 0, whichever clip: the same);
    # an emotion vector drops the clip, as upstream does
    none = tts.generate(TEXT, voice=voice, emotion=str(clips["emotion"]), seed=3, emo_alpha=0.0, **FRAMES).audio
    assert np.array_equal(tts.generate(TEXT, voice=voice, emotion=str(clips["speaker"]), seed=3, emo_alpha=0.0, **FRAMES).audio, none)
    assert not np.array_equal(none, expected["emotion"])
    sad = tts.generate(TEXT, voice=voice, seed=3, emo_sad=0.6, **FRAMES).audio
    assert np.array_equal(tts.generate(TEXT, voice=voice, emotion=str(clips["emotion"]), seed=3, emo_sad=0.6, **FRAMES).audio, sad)


def test_indextts_1_5_refuses_an_emotion_reference(tmp_path):
    pytest.importorskip("koe_indextts")
    import koe

    with koe.load(shared_fixture("indextts", "IndexTTS-1.5")) as old:
        voice = old.prepare_voice((speechy(2.0), 24000))
        assert not old.capabilities.emotion_reference
        with pytest.raises(UnsupportedVoice, match=r"IndexTTS \(IndexTTS-1.5\) takes no emotion reference"):
            old.generate(TEXT, voice=voice, emotion=(speechy(2.0), 24000), max_mel_tokens=8)


def test_koe_speak_with_an_emotion_clip_or_voice(release, clips, expected, tmp_path, monkeypatch, session_tmp):
    koe = koe_command(tmp_path, monkeypatch)
    common = ("-m", release, "--ref", clips["speaker"], "--seed", "3", "--opt", "max_mel_tokens=12")
    koe("speak", TEXT, *common, "--emotion-ref", clips["emotion"], "-o", tmp_path / "clip.wav")
    assert np.array_equal(decode((tmp_path / "clip.wav").read_bytes())[2], int16(expected["emotion"]))
    koe("voices", "add", "joy", "--ref", clips["emotion"])
    koe("speak", TEXT, *common, "--emotion-voice", "joy", "-o", tmp_path / "voice.wav")
    assert (tmp_path / "voice.wav").read_bytes() == (tmp_path / "clip.wav").read_bytes()
    one_line_error(koe("speak", TEXT, *common, "--emotion-ref", clips["emotion"], "--emotion-voice", "joy", "-o", tmp_path / "x.wav", ok=False), "not both")
    unknown = koe("speak", TEXT, *common, "--emotion-voice", "nobody", "-o", tmp_path / "x.wav", ok=False)
    assert unknown.exit_code != 0 and "unknown emotion voice 'nobody'" in unknown.stderr and "Traceback" not in unknown.output
    qwen = koe("speak", TEXT, "-m", model_folder(session_tmp, "base"), "--ref", clips["speaker"], "--emotion-voice", "joy", "-o", tmp_path / "x.wav", ok=False)
    assert qwen.exit_code != 0 and "takes no emotion reference" in qwen.stderr and "Traceback" not in qwen.output
    assert not (tmp_path / "x.wav").exists()


@pytest.fixture(scope="module")
def home(release, clips, tmp_path_factory) -> KoeHome:
    home = KoeHome(load_settings(tmp_path_factory.mktemp("emotion-home"), flags={"models": {"default": "itts"}}, environ={}))
    home.models.import_model(release, "itts", link=True)
    return home


def test_the_server_takes_an_emotion_voice(home, clips, expected):
    with TestClient(create_app(home)) as client:
        for name in ("speaker", "emotion"):
            r = client.post("/v1/audio/voices", data={"name": name}, files={"file": ("clip.wav", clips[name].read_bytes(), "audio/wav")})
            assert r.status_code == 201, r.text
        card = client.get("/v1/models/itts").json()
        assert card["capabilities"]["emotion_reference"] is True
        body = {"model": "itts", "input": TEXT, "voice": "speaker", "response_format": "wav", "seed": 3, "options": FRAMES}
        r = client.post("/v1/audio/speech", json={**body, "emotion_voice": "emotion"})  # what an OpenAI client's extra_body sends
        assert r.status_code == 200, r.text
        assert np.array_equal(decode(r.content)[2], int16(expected["emotion"]))
        by_id = client.post("/v1/audio/speech", json={**body, "emotion_voice": {"id": "emotion"}})
        assert by_id.status_code == 200 and by_id.content == r.content
        own = client.post("/v1/audio/speech", json=body)
        assert np.array_equal(decode(own.content)[2], int16(expected["own"]))
        streamed = client.post("/v1/audio/speech", json={**body, "emotion_voice": "emotion", "stream_format": "audio", "response_format": "pcm"})
        assert np.array_equal(np.frombuffer(streamed.content, "<i2"), int16(expected["emotion"]))
        assert_error(client.post("/v1/audio/speech", json={**body, "emotion_voice": "nobody"}), 404, "unknown emotion voice 'nobody'", param="emotion_voice")
        assert_error(client.post("/v1/audio/speech", json={**body, "emotion_voice": " "}), 400, "emotion_voice is empty", param="emotion_voice")
        assert_error(
            client.post("/v1/audio/speech", content=json.dumps({**body, "emotion_voice": "\ud800"}), headers={"content-type": "application/json"}),
            400,
            param="emotion_voice",
        )


def test_the_openai_client_sends_it_in_extra_body(home, clips, expected):
    openai = pytest.importorskip("openai")
    from test_server_e2e import live_server

    if not home.voices.exists("speaker"):
        home.voices.add("speaker", str(clips["speaker"]))
        home.voices.add("emotion", str(clips["emotion"]))
    with live_server(create_app(home)) as s:
        api = openai.OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0)
        spoken = api.audio.speech.create(
            model="itts", voice="speaker", input=TEXT, response_format="wav", extra_body={"emotion_voice": "emotion", "seed": 3, "options": FRAMES}
        )
        assert np.array_equal(decode(spoken.read())[2], int16(expected["emotion"]))


def test_the_history_replays_the_emotion_reference(home, clips):
    if not home.voices.exists("emotion"):
        home.voices.add("speaker", str(clips["speaker"]))
        home.voices.add("emotion", str(clips["emotion"]))
    from koe.service.history import History

    synth = Synthesizer(home)
    first = synth.speak(SpeechRequest(text=TEXT, voice="speaker", emotion_voice="emotion", seed=3, options=dict(FRAMES), format="wav"))
    assert first.metadata["emotion_voice"] == "emotion" and first.output_id is not None
    history = History(home)
    again = history.replay_request(first.output_id)
    assert again.emotion_voice == "emotion"
    assert synth.speak(again).audio == first.audio
    clip = synth.speak(SpeechRequest(text=TEXT, voice="speaker", emotion_audio=str(clips["emotion"]), seed=3, options=dict(FRAMES), format="wav"))
    assert clip.metadata["emotion_clip"] is True and clip.audio == first.audio
    with pytest.raises(InvalidRequest, match="took its emotion from a clip"):
        history.replay_request(clip.output_id)
    assert history.replay_request(clip.output_id, emotion_audio=str(clips["emotion"])).emotion_audio == str(clips["emotion"])
    with pytest.raises(NotFound):
        synth.plan(SpeechRequest(text=TEXT, voice="speaker", emotion_voice="nobody"))


def test_an_emotion_in_words_without_the_emotion_model_is_a_clear_error_on_indextts_2(tmp_path):
    """Upstream's emo_text is read by the release's Qwen emotion model: a folder without it refuses
    such a request (naming what is missing) rather than ignoring the words."""
    from koe_indextts.engine import IndexTTSEngine

    from koe.engines.base import RequestError, SynthesisRequest

    engine = IndexTTSEngine.load(shared_fixture("indextts", "IndexTTS-2"))
    clip = (np.sin(np.arange(16000) / 7.0).astype(np.float32) * 0.3, 16000)
    voice = engine.prepare_voice(clip)
    with pytest.raises(RequestError, match="Qwen emotion model") as e:
        list(engine.synthesize(SynthesisRequest(text="Hello.", voice=voice, instruct="speak angrily")))
    assert e.value.param == "instructions"
