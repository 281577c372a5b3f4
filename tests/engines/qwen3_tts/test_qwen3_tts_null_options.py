"""Qwen3-TTS and an explicit None (docs/exactness.md, "An option given as None"): `non_streaming_mode=None`
is false on every way in, as upstream's wrapper passes it on to a truth test (CustomVoice's default is
true): the drop-in, `koe.load(...).generate`/`stream`, `koe speak --opt non_streaming_mode=null` and the
service's options (the server's JSON null); the sampling options' None is generation_config's value,
koe's default, on every way in."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fixtures_models import model_folder
from product_helpers import koe_command

import koe
from koe.compat.qwen_tts import Qwen3TTSModel
from koe.engines.base import InvalidOption
from koe.engines.qwen3_tts.spec import options_schema
from koe.service import KoeHome, SpeechRequest, load_settings
from koe.service.synthesis.synthesizer import Synthesizer

CALL = {"text": "Hello world, this is koe speaking.", "speaker": "ryan", "language": "english", "max_new_tokens": 12}


def test_the_drop_in_passes_non_streaming_mode_none_on_as_upstream(session_tmp):
    tts = Qwen3TTSModel.from_pretrained(str(model_folder(session_tmp, "custom_voice")), device_map="cpu", dtype=torch.float32)
    got = {}
    for name, flag in (("none", None), ("off", False), ("default", True)):
        torch.manual_seed(7)
        got[name] = tts.generate_custom_voice(**CALL, non_streaming_mode=flag)[0][0]
    np.testing.assert_array_equal(got["none"], got["off"])
    assert not np.array_equal(got["none"], got["default"])  # the text fed along (None) and up front (the default) differ


def test_the_sampling_options_none_is_the_default():
    schema = options_schema({}, "custom_voice")
    assert schema.validate({"temperature": None, "top_k": None, "max_new_tokens": None, "do_sample": None}) == {}
    assert [o["name"] for o in schema.describe() if "null" in o] == ["non_streaming_mode"]


def test_koes_own_ways_in_take_non_streaming_mode_none_as_false(session_tmp, tmp_path, monkeypatch):
    folder = model_folder(session_tmp, "custom_voice")
    tts = koe.load(folder, device="cpu")
    args = {k: v for k, v in CALL.items() if k != "text"}
    got = {
        name: tts.generate(CALL["text"], seed=7, **args, **flag).codes
        for name, flag in (("none", {"non_streaming_mode": None}), ("off", {"non_streaming_mode": False}), ("default", {}))
    }
    torch.testing.assert_close(got["none"], got["off"], rtol=0, atol=0)
    assert not torch.equal(got["none"], got["default"])  # not given: CustomVoice's default, the text up front
    streamed = {flag: np.concatenate([c.samples for c in tts.stream(CALL["text"], seed=7, **args, non_streaming_mode=flag)]) for flag in (None, False)}
    np.testing.assert_array_equal(streamed[None], streamed[False])
    with pytest.raises(InvalidOption, match=r"must be true or false, or null \(false"):
        tts.generate(CALL["text"], **args, non_streaming_mode="no")
    tts.close()
    home = KoeHome(load_settings(tmp_path / "home", flags={"synthesis": {"options": {"non_streaming_mode": True}}}, environ={}))
    home.models.import_model(folder, "cv", link=True)
    synth = Synthesizer(home)

    def service(options: dict) -> bytes:
        plan = synth.plan(
            SpeechRequest(
                text=CALL["text"], model="cv", voice="ryan", language="english", seed=7, format="pcm", options={"max_new_tokens": 12, **options}, save=False
            )
        )
        return synth.speak(plan).audio

    assert service({"non_streaming_mode": None}) == service({"non_streaming_mode": False}) != service({})  # null wins over the settings' true
    home.close()
    koe_cli = koe_command(tmp_path / "cli", monkeypatch)
    base = ["--model", folder, "--speaker", "ryan", "--language", "english", "--seed", "7", "--opt", "max_new_tokens=12"]
    for name, opt in (("null", "non_streaming_mode=null"), ("off", "non_streaming_mode=false")):
        koe_cli("speak", CALL["text"], *base, "--opt", opt, "-o", tmp_path / f"{name}.wav")
    assert (tmp_path / "null.wav").read_bytes() == (tmp_path / "off.wav").read_bytes()


def test_the_schema_says_what_null_means_for_non_streaming_mode():
    described = {o["name"]: o for o in options_schema({}, "custom_voice").describe()}
    assert described["non_streaming_mode"]["null"].startswith("false")
    assert options_schema({}, "custom_voice").validate({"non_streaming_mode": None}) == {"non_streaming_mode": None}
