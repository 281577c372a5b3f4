"""koe vs upstream qwen-tts==0.1.1, bit for bit on the CPU in float32 (CustomVoice and VoiceDesign).

Each model layout runs one oracle process with all its calls; koe then repeats every call twice:
natively (`engine.generate(..., seed=N)`) and through the drop-in `koe.compat.qwen_tts` class
(after `torch.manual_seed(N)`, drawing from torch's global generator as upstream does).
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
from fixtures_models import model_folder
from oracle_harness import assert_same_outputs, generated, run_oracle

import koe
from koe.compat.qwen_tts import Qwen3TTSModel

pytestmark = pytest.mark.oracle

GREEDY = {"do_sample": False, "subtalker_dosample": False}

CUSTOM_VOICE_CALLS = {
    "sampled": {"seed": 0, "kwargs": {"text": "Hello world, this is koe speaking.", "speaker": "ryan", "language": "english", "max_new_tokens": 14}},
    "greedy": {"seed": 1, "kwargs": {"text": "Greedy decoding, please.", "speaker": "vivian", "language": "english", "max_new_tokens": 12, **GREEDY}},
    "instruct": {
        "seed": 2,
        "kwargs": {"text": "Say it with feeling!", "speaker": "serena", "language": "english", "instruct": "Speak very happily.", "max_new_tokens": 12},
    },
    "dialect_auto": {"seed": 3, "kwargs": {"text": "今天天气真不错，我们去公园吧。", "speaker": "dylan", "language": "auto", "max_new_tokens": 12}},
    "streaming_text": {
        "seed": 4,
        "kwargs": {"text": "Text fed one token per frame.", "speaker": "aiden", "language": "english", "non_streaming_mode": False, "max_new_tokens": 16},
    },
    "filters": {
        "seed": 5,
        "kwargs": {
            "text": "Top p and temperature.",
            "speaker": "sohee",
            "language": "korean",
            "top_p": 0.8,
            "top_k": 20,
            "temperature": 0.7,
            "repetition_penalty": 1.3,
            "subtalker_top_p": 0.9,
            "subtalker_temperature": 1.1,
            "max_new_tokens": 12,
        },
    },
    "batch": {
        "seed": 6,
        "kwargs": {
            "text": ["The first sentence of a batch is longer.", "Short one."],
            "speaker": ["ryan", "eric"],
            "language": ["english", "chinese"],
            "max_new_tokens": 10,
        },
    },
}
VOICE_DESIGN_CALLS = {
    "sampled": {
        "seed": 10,
        "kwargs": {"text": "A voice from a description.", "instruct": "A warm, low male voice, slow and calm.", "language": "english", "max_new_tokens": 14},
    },
    "greedy": {
        "seed": 11,
        "kwargs": {"text": "Greedy design.", "instruct": "A bright young female voice.", "language": "english", "max_new_tokens": 12, **GREEDY},
    },
    "streaming_text": {
        "seed": 12,
        "kwargs": {
            "text": "Streaming text feeding for design.",
            "instruct": "Whispering.",
            "language": "auto",
            "non_streaming_mode": False,
            "max_new_tokens": 12,
        },
    },
    "batch": {
        "seed": 13,
        "kwargs": {"text": ["One.", "Two is a bit longer than one."], "instruct": ["Deep voice.", ""], "language": "english", "max_new_tokens": 10},
    },
}
METHOD = {"custom_voice": "generate_custom_voice", "voice_design": "generate_voice_design"}
CALLS = {"custom_voice": CUSTOM_VOICE_CALLS, "voice_design": VOICE_DESIGN_CALLS}
LAYOUTS = ["tiny", "tiny-proj"]  # 0.6B-like (no predictor projection) and 1.7B-like


@pytest.fixture(scope="module", params=[(k, s) for k in CALLS for s in LAYOUTS], ids=lambda p: f"{p[0]}-{p[1]}")
def case(request, tmp_path_factory):
    kind, size = request.param
    root = tmp_path_factory.getbasetemp()
    folder = model_folder(root, kind, size)
    names = list(CALLS[kind])
    calls = [{"method": METHOD[kind], **CALLS[kind][n]} for n in names]
    tensors, info = run_oracle("qwen_generate", {"model_dir": str(folder), "calls": calls}, root / f"oracle-{kind}-{size}")
    return kind, size, folder, names, tensors, info


def test_oracle_loads_fixture_without_missing_or_unexpected_keys(case):
    *_, info = case
    loading = info["loading"]
    assert loading["missing_keys"] == [] and loading["unexpected_keys"] == [] and loading["mismatched_keys"] == []
    assert info["attn"] == {"talker": "sdpa", "code_predictor": "sdpa"}


def test_native_api_equals_upstream(case):
    kind, size, folder, names, tensors, _ = case
    tts = koe.load(folder)
    for i, name in enumerate(names):
        call = CALLS[kind][name]
        kwargs = dict(call["kwargs"])
        text = kwargs.pop("text")
        if kind == "custom_voice" and "non_streaming_mode" not in kwargs:
            kwargs["non_streaming_mode"] = True
        with pytest.warns(UserWarning, match="ignores instructions") if (name == "instruct" and size == "tiny") else nullcontext():
            out = tts.generate(text, seed=call["seed"], **kwargs)
        out = out if isinstance(out, list) else [out]
        assert_same_outputs([(r.codes, r.audio) for r in out], generated(tensors, i), f"{kind}/{size}/{name}")
        assert all(r.sample_rate == 24000 for r in out)


def test_drop_in_class_equals_upstream(case):
    kind, size, folder, names, tensors, _ = case
    tts = Qwen3TTSModel.from_pretrained(str(folder), device_map="cpu", dtype=torch.float32)
    for i, name in enumerate(names):
        call = CALLS[kind][name]
        torch.manual_seed(call["seed"])
        wavs, sr = getattr(tts, METHOD[kind])(**call["kwargs"])
        assert sr == 24000
        codes = tts.last_codes
        assert_same_outputs(list(zip(codes, wavs)), generated(tensors, i), f"compat {kind}/{size}/{name}")
