"""Qwen3-TTS and an explicit None (docs/exactness.md, "An option given as None"): the drop-in passes
`non_streaming_mode=None` on as upstream's wrapper does, to a truth test (so: false, where
CustomVoice's default is true); the sampling options' None is generation_config's value, koe's
default, on every way in."""

from __future__ import annotations

import numpy as np
import torch
from fixtures_models import model_folder

from koe.compat.qwen_tts import Qwen3TTSModel
from koe.engines.qwen3_tts.spec import options_schema

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
    assert all("null" not in o for o in schema.describe())
