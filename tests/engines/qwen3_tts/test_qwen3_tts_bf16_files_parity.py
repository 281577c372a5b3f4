"""Released checkpoints as they are: talker weights stored in bfloat16 (as Qwen3-TTS releases them),
loaded by koe's exact float32 path, give upstream qwen-tts==0.1.1's float32 path on the same files
(dtype=float32) bit for bit: same seed, same codes, same samples.

The folders are the random-weight fixtures rewritten as released (`koe.engines.qwen3_tts.bench.models.store_as_released`:
model.safetensors in bf16, torch_dtype "bfloat16"); one also has its speech tokenizer in bf16, so the
codec's conversion is covered as well.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import assert_same_outputs, generated, run_oracle
from safetensors import safe_open
from safetensors.torch import save_file

import koe
from koe.compat.qwen_tts import Qwen3TTSModel
from koe.engines.qwen3_tts.bench.models import store_as_released
from koe.engines.qwen3_tts.fixtures import write_random_model
from koe.runtime import exact

pytestmark = pytest.mark.oracle

GREEDY = {"do_sample": False, "subtalker_dosample": False}
REF_TEXT = "This is the reference recording."
CALLS = {
    "custom_voice": {
        "sampled": {"seed": 0, "kwargs": {"text": "Hello world, this is koe speaking.", "speaker": "ryan", "language": "english", "max_new_tokens": 14}},
        "greedy": {"seed": 1, "kwargs": {"text": "Greedy decoding, please.", "speaker": "vivian", "language": "english", "max_new_tokens": 12, **GREEDY}},
        "batch": {
            "seed": 6,
            "kwargs": {
                "text": ["The first sentence of a batch is longer.", "Short one."],
                "speaker": ["ryan", "eric"],
                "language": ["english", "chinese"],
                "max_new_tokens": 10,
            },
        },
    },
    "voice_design": {
        "sampled": {
            "seed": 10,
            "kwargs": {
                "text": "A voice from a description.",
                "instruct": "A warm, low male voice, slow and calm.",
                "language": "english",
                "max_new_tokens": 14,
            },
        },
    },
    "base": {
        "icl": {
            "seed": 0,
            "kwargs": {"text": "Cloned speech, sampled.", "language": "english", "ref_audio": "REF", "ref_text": REF_TEXT, "max_new_tokens": 12},
        },
        "xvec": {"seed": 3, "kwargs": {"text": "Only the x-vector.", "ref_audio": "REF", "x_vector_only_mode": True, "max_new_tokens": 12, **GREEDY}},
    },
}
METHOD = {"custom_voice": "generate_custom_voice", "voice_design": "generate_voice_design", "base": "generate_voice_clone"}
# (kind, size, codec in bf16 too)
FOLDERS = [
    ("custom_voice", "tiny", False),
    ("custom_voice", "tiny-proj", False),
    ("custom_voice", "tiny-wide", False),
    ("custom_voice", "tiny", True),
    ("voice_design", "tiny", False),
    ("base", "tiny", False),
]


def rewrite_bf16(path) -> None:
    """A safetensors file's floating tensors rewritten in bfloat16."""
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
        state = {k: (t.to(torch.bfloat16) if t.is_floating_point() else t) for k in f.keys() for t in [f.get_tensor(k)]}
    path.unlink()
    save_file(state, str(path), metadata=metadata)


def stored_dtypes(path) -> set[str]:
    with safe_open(str(path), "pt") as f:
        return {f.get_slice(k).get_dtype() for k in f.keys()}


@pytest.fixture(scope="module")
def ref_wav(tmp_path_factory):
    t = np.arange(int(2.4 * 24000)) / 24000
    x = 0.3 * np.sin(2 * np.pi * 120 * t * (1 + 0.05 * np.sin(2 * np.pi * 4 * t))) + 0.03 * np.random.default_rng(0).standard_normal(t.size)
    path = tmp_path_factory.mktemp("ref") / "ref24k.wav"
    sf.write(path, x.astype(np.float32), 24000)
    return str(path)


@pytest.fixture(scope="module", params=FOLDERS, ids=lambda p: f"{p[0]}-{p[1]}{'-codec-bf16' if p[2] else ''}")
def case(request, tmp_path_factory, ref_wav):
    kind, size, codec_bf16 = request.param
    root = tmp_path_factory.mktemp(f"bf16-{kind}-{size}")
    folder = write_random_model(root / "model", kind, size)
    store_as_released(folder)
    if codec_bf16:
        rewrite_bf16(folder / "speech_tokenizer" / "model.safetensors")
    assert stored_dtypes(folder / "model.safetensors") == {"BF16"}
    calls = {name: _with_ref(call, ref_wav) for name, call in CALLS[kind].items()}
    job = {"model_dir": str(folder), "calls": [{"method": METHOD[kind], **c} for c in calls.values()]}
    tensors, info = run_oracle("qwen_generate", job, root / "oracle")
    return kind, folder, calls, tensors, info


def _with_ref(call: dict, ref: str) -> dict:
    return {**call, "kwargs": {k: (ref if v == "REF" else v) for k, v in call["kwargs"].items()}}


def test_upstream_loads_the_bf16_files_completely(case):
    *_, info = case
    loading = info["loading"]
    assert loading["missing_keys"] == [] and loading["unexpected_keys"] == [] and loading["mismatched_keys"] == []


def test_koe_float32_path_on_bf16_files_equals_upstream(case):
    kind, folder, calls, tensors, _ = case
    tts = koe.load(folder)
    assert tts.precision == "float32"
    # where koe's exact kernel gives torch's bits here, it runs the products, reading the weights as bf16
    assert tts.engine.kernel == (None if exact.summation_orders() is None else "koe-exact-bf16")
    assert {p.dtype for p in tts.engine.network.parameters()} == {torch.float32}
    assert {p.dtype for p in tts.engine.codec.model.parameters()} == {torch.float32}
    for i, (name, call) in enumerate(calls.items()):
        kwargs = dict(call["kwargs"])
        text = kwargs.pop("text")
        if kind == "custom_voice":
            kwargs["non_streaming_mode"] = True  # upstream's generate_custom_voice default
        if kind == "base":
            kwargs["voice"] = tts.prepare_voice(
                kwargs.pop("ref_audio"), ref_text=kwargs.pop("ref_text", None), x_vector_only=kwargs.pop("x_vector_only_mode", False)
            )
        out = tts.generate(text, seed=call["seed"], **kwargs)
        out = out if isinstance(out, list) else [out]
        assert_same_outputs([(r.codes, r.audio) for r in out], generated(tensors, i), f"{kind}/{name}")


def test_drop_in_class_on_bf16_files_equals_upstream(case):
    kind, folder, calls, tensors, _ = case
    tts = Qwen3TTSModel.from_pretrained(str(folder), device_map="cpu", dtype=torch.float32)
    for i, (name, call) in enumerate(calls.items()):
        torch.manual_seed(call["seed"])
        wavs, sr = getattr(tts, METHOD[kind])(**call["kwargs"])
        assert sr == 24000
        assert_same_outputs(list(zip(tts.last_codes, wavs)), generated(tensors, i), f"compat {kind}/{name}")
