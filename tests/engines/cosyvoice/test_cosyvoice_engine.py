"""The CosyVoice engine on random-weight folders (no oracle: what koe adds around upstream's calls):
its checks and errors, saved speakers, prompts saved and loaded, the token cap, the LM's opt-in
precisions, voice conversion's refusals, streamed text."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from shared_folders import fixture as shared_fixture

import koe
from koe.engines.base import ConversionRequest, InvalidOption, RequestError, SynthesisRequest, UnsupportedVoice, VoicePromptMismatch, collect

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off:UserWarning")

V2, V3 = "CosyVoice2-0.5B", "Fun-CosyVoice3-0.5B-2512"


def _tone(seconds: float, sr: int = 24000) -> tuple[np.ndarray, int]:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 150 * t * (1 + 0.05 * np.sin(2 * np.pi * 3 * t)))).astype(np.float32), sr


@pytest.fixture(scope="module")
def folders():
    return {v: shared_fixture("cosyvoice", v) for v in (V2, V3)}


@pytest.fixture(scope="module")
def models(folders):
    loaded = {v: koe.load(f, device="cpu") for v, f in folders.items()}
    yield loaded
    for tts in loaded.values():
        tts.close()


def test_capabilities_name_the_modes(models):
    caps = models[V2].engine.capabilities
    assert caps.conversion and caps.text_stream and caps.instruct and not caps.stream_is_one_shot
    assert caps.sample_rate == 24000 and caps.variant == V2 and models[V3].engine.capabilities.variant == V3
    assert caps.length_option == "max_tokens" and caps.speakers == ()


def test_no_voice_is_refused_saying_how_to_clone(models):
    with pytest.raises(UnsupportedVoice, match="cloned voice"):
        models[V2].generate("Hello.")


def test_a_v2_prompt_is_refused_by_v3(models):
    voice = models[V2].prepare_voice(_tone(1.5), "A clip.")
    with pytest.raises(VoicePromptMismatch, match="CosyVoice 2"):
        models[V3].generate("Hello.", voice=voice, max_tokens=2)


@pytest.mark.parametrize(("seconds", "rate", "match"), [(0.5, 24000, "at least 1 s"), (31.0, 16000, "at most 30 s"), (2.0, 8000, "16000 Hz")])
def test_clips_the_tokenizer_cannot_take_are_refused(models, seconds, rate, match):
    with pytest.raises(UnsupportedVoice, match=match):
        models[V2].prepare_voice(_tone(seconds, rate), "A clip.")


def test_speed_while_streaming_is_refused(models):
    voice = models[V2].prepare_voice(_tone(1.5), "A clip.")
    with pytest.raises(InvalidOption, match="one-shot") as e:
        list(models[V2].stream("Hello.", voice=voice, speed=1.2))
    assert e.value.param == "speed"


def test_max_tokens_caps_the_speech_and_says_so(models):
    voice = models[V2].prepare_voice(_tone(1.5), "A clip.")
    out = models[V2].generate("Hello there, how are you?", voice=voice, seed=1, max_tokens=3)
    assert len(out.audio) == 3 * 960 and out.metadata["frames"] == 3
    assert out.metadata["segments"][0]["tokens"] == 3


def test_prompts_survive_save_and_load(models, tmp_path):
    tts = models[V3]
    voice = tts.prepare_voice(_tone(2.0), "A clip.")
    voice.save(tmp_path / "v")
    again = tts.engine.load_voice(tmp_path / "v")
    assert again.text == "A clip." and again.version == 3
    for a, b in zip(
        (voice.prompt.speech_token, voice.prompt.speech_feat, voice.prompt.embedding),
        (again.prompt.speech_token, again.prompt.speech_feat, again.prompt.embedding),
        strict=True,
    ):
        assert torch.equal(a, b)
    one = tts.generate("Hello.", voice=voice, seed=4, max_tokens=6).audio
    assert np.array_equal(one, tts.generate("Hello.", voice=again, seed=4, max_tokens=6).audio)


def test_saved_speakers_are_presets(folders, tmp_path):
    """`spk2info.pt` entries (what upstream's add_zero_shot_spk saves, and an SFT release's embeddings) are speakers."""
    import shutil

    folder = tmp_path / "spk"
    shutil.copytree(folders[V2], folder)
    tts = koe.load(folder, device="cpu")
    inputs = tts.engine.model.inputs.zero_shot("", "A clip.", tts.engine.model.inputs.prompt(*_tone(1.5)))
    del inputs["text"], inputs["text_len"]
    torch.save({"Alice": inputs, "Bob": {"embedding": torch.randn(1, 192)}}, folder / "spk2info.pt")
    tts.close()
    tts = koe.load(folder, device="cpu")
    assert tts.engine.capabilities.speakers == ("Alice", "Bob")
    for name in ("alice", "Bob"):
        out = tts.generate("Hello.", voice=name, seed=2, max_tokens=4)
        assert len(out.audio) == 4 * 960 and out.metadata["segments"][0]["mode"] == "saved speaker"
    with pytest.raises(UnsupportedVoice, match="unknown speaker"):
        tts.generate("Hello.", voice="Carol", max_tokens=2)
    tts.close()


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_the_lm_loads_in_an_opt_in_precision_named_in_the_metadata(folders, precision):
    tts = koe.load(folders[V2], device="cpu", precision=precision)
    try:
        voice = tts.prepare_voice(_tone(1.5), "A clip.")
        out = tts.generate("Hello.", voice=voice, seed=1, max_tokens=4)
        assert len(out.audio) == 4 * 960 and out.metadata["precision"] != "float32"
    finally:
        tts.close()


def test_conversion_refuses_a_source_over_30_s_and_a_preset(models):
    tts = models[V2]
    voice = tts.prepare_voice(_tone(1.5), "A clip.")
    with pytest.raises(RequestError, match="at most 30 s") as e:
        list(tts.engine.convert(ConversionRequest(source=_tone(31.0, 16000), voice=voice)))
    assert e.value.param == "source"
    out = collect(tts.engine.convert(ConversionRequest(source=_tone(1.2), voice=voice, seed=3)))
    assert len(out.samples) > 0 and out.metadata["mode"] == "conversion"


def test_streamed_text_speaks_as_it_comes(models):
    """Text in pieces reaches the LM as it arrives: the request's audio, then the metadata."""
    tts = models[V2]
    voice = tts.prepare_voice(_tone(1.5), "A clip.")
    asked: list[str] = []

    def pieces():
        for p in ("Hello ", "there, ", "how are you?"):
            asked.append(p)
            yield p

    chunks = list(tts.stream(pieces(), voice=voice, seed=5, max_tokens=30))
    assert asked == ["Hello ", "there, ", "how are you?"] and chunks[-1].final
    assert chunks[-1].metadata.get("text_stream") and sum(len(c.samples) for c in chunks) > 0


def test_no_tokens_make_no_samples_instead_of_failing(models):
    """v3's LM may give its end id first (upstream's vocoder then fails on an empty mel): koe says nothing."""
    model = models[V3].engine.model
    prompt = model.inputs.prompt(*_tone(1.5))
    inputs = model.inputs.zero_shot("Hello.", "You are a helpful assistant.<|endofprompt|>A clip.", prompt)
    assert model.offline([], inputs).shape == (1, 0)
    assert [c.shape for c in model.stream(iter([]), inputs)] == [(1, 0)]


@pytest.mark.parametrize("variant", [V2, V3])
def test_streamed_text_equals_the_drop_ins_generator_input(tmp_path, variant):
    """The engine's streamed text (what `tts.stream(pieces)` and the WebSocket run) gives the drop-in's
    `inference_zero_shot(generator, ...)` samples, which equal upstream's (test_cosyvoice_compat_parity)."""
    import soundfile as sf

    from koe.compat.cosyvoice import AutoModel
    from koe.engines.cosyvoice.fixtures import streamable_copy, write_clip, write_random_model

    base = write_random_model(tmp_path / variant, variant, seed=40 + (variant == V3))
    folder = streamable_copy(base, tmp_path / "streamable")
    clip = write_clip(tmp_path / "clip.wav", 2.4, 16000)
    transcript = ("You are a helpful assistant.<|endofprompt|>" if variant == V3 else "") + "This is the prompt."
    pieces = ["Hello there, ", "this is text ", "arriving from an LLM, ", "piece by piece."]
    drop_in = AutoModel(model_dir=str(folder))
    torch.manual_seed(5)
    want = torch.cat([o["tts_speech"] for o in drop_in.inference_zero_shot(iter(pieces), transcript, str(clip))], dim=1)[0]
    tts = koe.load(folder, device="cpu")
    try:
        voice = tts.prepare_voice(sf.read(clip, dtype="float32"), transcript)
        out = collect(tts.engine.synthesize_text(iter(pieces), SynthesisRequest(text="", voice=voice, seed=5)))
    finally:
        tts.close()
    assert len(want) > 0 and np.array_equal(out.samples, want.numpy())
