"""Bad input through the CosyVoice drop-in (`koe.compat.cosyvoice`): each a clear error, raised
before any audio is yielded (streamed calls included), on random-weight v2 and v3 folders.
Upstream raises for the same input (asserts, KeyErrors, libsndfile's errors), except for v3's
streamed text in cross-lingual mode, where its LM thread fails and its stream waits forever
(test_cosyvoice_compat_parity shows that against upstream)."""

from __future__ import annotations

import io

import pytest

from koe.compat.cosyvoice import AutoModel, CosyVoice3, UnknownSpeakerError
from koe.engines.cosyvoice.features import ClipError
from koe.engines.cosyvoice.fixtures import write_clip, write_random_model, write_sft_speakers

V3 = "You are a helpful assistant.<|endofprompt|>"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("cosyvoice-errors")
    v2 = write_random_model(d / "v2", "CosyVoice2-0.5B", seed=1)
    v3 = write_random_model(d / "v3", "Fun-CosyVoice3-0.5B-2512", seed=2)
    write_sft_speakers(v3)
    clips = {
        "ok": str(write_clip(d / "ok.wav", 2.0, 16000)),
        "long": str(write_clip(d / "long.wav", 30.5, 16000)),
        "low": str(write_clip(d / "low.wav", 2.0, 8000)),
        "missing": str(d / "missing.wav"),
        "not audio": str(d / "notes.txt"),
    }
    (d / "notes.txt").write_text("not a clip")
    v2_model, v3_model = AutoModel(model_dir=str(v2)), AutoModel(model_dir=str(v3))
    v3_model.add_zero_shot_spk(V3 + "A saved prompt.", clips["ok"], "saved")
    return {"v2": v2_model, "v3": v3_model, "clips": clips, "folders": (v2, v3)}


def _fails(calls, error: type[BaseException], match: str) -> None:
    """`calls()` gives a generator; iterating it raises `error` before it yields anything."""
    made = []
    with pytest.raises(error, match=match):
        for out in calls():
            made.append(out)
    assert made == []


@pytest.mark.parametrize("stream", [False, True], ids=["offline", "stream"])
def test_v3_without_its_end_of_prompt_marker(setup, stream):
    m, ok = setup["v3"], setup["clips"]["ok"]
    calls = [
        lambda: m.inference_zero_shot("Hello.", "A prompt.", ok, stream=stream),
        lambda: m.inference_cross_lingual("Hello.", ok, stream=stream),
        lambda: m.inference_instruct2("Hello.", "Speak happily.", ok, stream=stream),
        lambda: m.inference_sft("Hello.", "sft_0", stream=stream),
        lambda: m.inference_zero_shot(iter(["Hello ", "there."]), "A prompt.", ok, stream=stream),
        lambda: m.inference_cross_lingual(iter([V3, "Hello."]), ok, stream=stream),  # streamed text: the marker belongs in the prompt text
    ]
    for call in calls:
        _fails(call, ValueError, "<\\|endofprompt\\|>")


def test_v2_needs_no_marker(setup):
    out = list(setup["v2"].inference_zero_shot("Hi.", "A prompt.", setup["clips"]["ok"]))
    assert len(out) == 1 and out[0]["tts_speech"].shape[0] == 1


@pytest.mark.parametrize("which", ["v2", "v3"])
def test_clips_out_of_range(setup, which):
    m, clips = setup[which], setup["clips"]
    text, prompt_text = (V3 + "Hello.", V3 + "A prompt.") if which == "v3" else ("Hello.", "A prompt.")
    for clip, match in (("long", "30.* at most 30 s"), ("low", "8000 Hz.*at least 16000 Hz")):
        _fails(lambda clip=clip: m.inference_zero_shot(text, prompt_text, clips[clip], stream=True), ClipError, match)
        _fails(lambda clip=clip: m.inference_cross_lingual(text, clips[clip]), ClipError, match)
        _fails(lambda clip=clip: m.inference_vc(clips[clip], clips["ok"], stream=True), ClipError, match)
        _fails(lambda clip=clip: m.inference_vc(clips["ok"], clips[clip]), ClipError, match)
        with pytest.raises(ClipError, match=match):
            m.add_zero_shot_spk(prompt_text, clips[clip], "nope")
    assert "nope" not in m.list_available_spks()
    assert issubclass(ClipError, ValueError)


def test_missing_or_unreadable_clips(setup):
    m, clips = setup["v2"], setup["clips"]
    _fails(lambda: m.inference_vc(None, clips["ok"]), ValueError, "source_wav is needed")
    _fails(lambda: m.inference_vc(clips["ok"], ""), ValueError, "prompt_wav is needed")
    _fails(lambda: m.inference_zero_shot("Hello.", "A prompt.", None), ValueError, "prompt_wav is needed")
    _fails(lambda: m.inference_cross_lingual("Hello.", clips["missing"]), FileNotFoundError, "prompt_wav: no such file")
    _fails(lambda: m.inference_instruct2("Hello.", "Gently.", clips["not audio"]), ValueError, "prompt_wav: cannot read")
    _fails(lambda: m.inference_vc(io.BytesIO(b"garbage"), clips["ok"]), ValueError, "source_wav: cannot read")


def test_speakers(setup):
    m = setup["v3"]
    for call in (
        lambda: m.inference_zero_shot(V3 + "Hello.", "", "", zero_shot_spk_id="bob"),
        lambda: m.inference_cross_lingual(V3 + "Hello.", "", zero_shot_spk_id="bob", stream=True),
        lambda: m.inference_instruct2("Hello.", V3, "", zero_shot_spk_id="bob"),
        lambda: m.inference_sft(V3 + "Hello.", "bob"),
    ):
        _fails(call, UnknownSpeakerError, "unknown speaker 'bob'; this model's speakers: 'sft_0', 'sft_1', 'saved'")
    assert issubclass(UnknownSpeakerError, KeyError)  # upstream's table lookup raises a KeyError
    _fails(lambda: setup["v2"].inference_sft("Hello.", "bob"), KeyError, "none \\(add one with add_zero_shot_spk\\)")
    _fails(lambda: m.inference_zero_shot(V3 + "Hello.", "", "", zero_shot_spk_id="sft_0"), ValueError, "SFT speaker.*inference_sft")
    _fails(lambda: m.inference_cross_lingual(V3 + "Hello.", "", zero_shot_spk_id="sft_1"), ValueError, "SFT speaker.*inference_sft")
    _fails(lambda: m.inference_sft(V3 + "Hello.", "saved"), ValueError, "add_zero_shot_spk.*zero_shot_spk_id='saved'")
    with pytest.raises(ValueError, match="empty zero_shot_spk_id"):
        m.add_zero_shot_spk(V3 + "A prompt.", setup["clips"]["ok"], "")


def test_other_misuse(setup):
    m, ok = setup["v3"], setup["clips"]["ok"]
    _fails(lambda: m.inference_zero_shot(V3 + "Hello.", "", "", zero_shot_spk_id="saved", stream=True, speed=1.5), ValueError, "speed")
    _fails(lambda: m.inference_zero_shot(iter(["Hello.", 3]), V3, ok), TypeError, "streamed text must be strings, got int")
    with pytest.raises(ValueError, match="cosyvoice3.yaml not found"):
        CosyVoice3(str(setup["folders"][0]))
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        AutoModel(model_dir=str(setup["folders"][0].parent / "nothing-here"))
