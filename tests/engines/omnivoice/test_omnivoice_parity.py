"""OmniVoice against upstream omnivoice==0.2.1 (its own venv), bit for bit on the CPU in float32
at one torch thread: random-weight models in the released layout (upstream loads them with no
missing or unexpected keys), `torch.manual_seed(N)` right before upstream's `generate` and before
koe's, the same calls.

Upstream's side also hands back each `_generate_iterative` result (the codes) and each raw decode,
so a difference is located: the sampler, the tokenizer's decoder, or the post-processing.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle_harness import run_oracle, same

import koe
from koe.compat.omnivoice import OmniVoice
from koe.engines.base import SynthesisRequest, collect
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.omnivoice.generate import Settings, unmask
from koe.engines.omnivoice.synthesis import OmniVoiceModel, Output
from koe.engines.registry import load_engine

pytestmark = pytest.mark.oracle

EN = "Hello world, this is a test of the voice."
ZH = "你好世界，我们在中国。今天天气很好。"
TAGS = "[laughter] Well, that was unexpected [sigh] but fine."
MIXED = "  Hello\n world,\t  你好   世界 （test）!  "

SAMPLER = ("num_step", "guidance_scale", "t_shift", "layer_penalty_factor", "position_temperature", "class_temperature")
OUTPUT = ("postprocess_output", "pad_duration", "fade_duration")

CASES = [
    {"text": EN, "seed": 1, "num_step": 8},
    {"text": EN, "seed": 2, "num_step": 8, "postprocess_output": False},
    {"text": ZH, "seed": 3, "num_step": 6, "guidance_scale": 0.0},
    {"text": TAGS, "seed": 4, "num_step": 5, "class_temperature": 0.8},
    {"text": MIXED, "seed": 5, "num_step": 7, "t_shift": 0.5, "layer_penalty_factor": 0.0, "position_temperature": 0.0},
    {"text": EN, "seed": 6, "num_step": 4, "speed": 1.7, "guidance_scale": 3.5, "position_temperature": 2.0, "class_temperature": 1.5},
    {"text": EN, "seed": 7, "num_step": 3, "duration": 0.9},
    {"text": "Hi.", "seed": 8, "num_step": 12, "pad_duration": 0.0, "fade_duration": 0.3},
    {"text": EN, "seed": 9},  # upstream's defaults: 32 steps, guidance 2, t-shift 0.1
    {"text": [EN, ZH, "Short one."], "seed": 10, "num_step": 6, "speed": [1.0, 0.8, 1.3]},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("omnivoice") / "model")


@pytest.fixture(scope="module")
def upstream(model_dir, tmp_path_factory):
    return run_oracle("generate", {"model": str(model_dir), "cases": CASES}, tmp_path_factory.mktemp("omnivoice-gen"), family="omnivoice")


def _koe(model: OmniVoiceModel, case: dict) -> tuple[list[torch.Tensor], list[np.ndarray]]:
    texts = case["text"] if isinstance(case["text"], list) else [case["text"]]
    n = len(texts)

    def per_item(key):
        value = case.get(key)
        return value if isinstance(value, list) else [value] * n

    settings = Settings(**{k: case[k] for k in SAMPLER if k in case})
    output = Output(**{k: case[k] for k in OUTPUT if k in case})
    frames = [model.frames_for(t, d, s) for t, d, s in zip(texts, per_item("duration"), per_item("speed"), strict=True)]
    torch.manual_seed(case["seed"])
    codes = unmask(model.lm, model.items(texts, frames=frames), settings)
    return codes, [model.finish(model.decode(c), None, output) for c in codes]


def test_upstream_loads_the_fixture_strictly(upstream) -> None:
    keys = upstream[1]["keys"]
    assert keys["checked"] > 300 and keys["missing"] == [] and keys["unexpected"] == []


@pytest.mark.parametrize("index", range(len(CASES)))
def test_own_voice_matches_upstream_bit_for_bit(model_dir, upstream, index) -> None:
    tensors, info = upstream
    model = OmniVoiceModel.load(model_dir)
    codes, waves = _koe(model, CASES[index])
    assert [len(c[0]) for c in codes] == info["cases"][index]["target_lens"][0]
    for k, c in enumerate(codes):
        assert same(c, tensors[f"case{index}.tokens{k}"]), f"codes of item {k}"
        assert same(model.decode(c)[None, None], tensors[f"case{index}.raw{k}"]), f"decoded samples of item {k}"
    for j, wave in enumerate(waves):
        expected = tensors[f"case{index}.{j}"]
        assert wave.dtype == np.float32 and wave.shape == expected.shape
        assert same(wave, expected), f"output {j}"


TOKENIZER_TEXTS = [
    EN,
    ZH,
    TAGS,
    MIXED,
    "<|lang_start|>en<|lang_end|><|instruct_start|>female, low pitch<|instruct_end|>",
    "<|denoise|><|lang_start|>None<|lang_end|><|instruct_start|>None<|instruct_end|>",
    "<|text_start|>It's 3:45 p.m. — isn't it? Don't! 1234567 ½ café naïve<|text_end|>",
    "こんにちは、世界。안녕하세요! Привет, мир. مرحبا بالعالم",
    "emoji 🎉🌍 and\ttabs  and   spaces\n\nnew lines",
    "[question-en] [surprise-wa][dissatisfaction-hnn]x",
]


def test_text_ids_match_upstreams_tokenizer(model_dir, tmp_path) -> None:
    _, info = run_oracle("text_ids", {"model": str(model_dir), "texts": TOKENIZER_TEXTS, "special": True}, tmp_path, family="omnivoice")
    model = OmniVoiceModel.load(model_dir)
    assert [model.text.ids(t) for t in TOKENIZER_TEXTS] == info["ids"]


def test_the_engine_native_api_and_drop_in_give_upstream_s_samples(model_dir, upstream) -> None:
    """Upstream's options as a request's (`seed=N`), a batch of texts through `koe.load`'s
    `generate([...])` and through `koe.compat.omnivoice.OmniVoice`."""
    tensors, _ = upstream
    engine = load_engine(model_dir, device="cpu")
    for index in (1, 3, 5, 6, 7):
        case = CASES[index]
        options = {k: v for k, v in case.items() if k not in ("text", "seed")}
        got = collect(engine.synthesize(SynthesisRequest(case["text"], seed=case["seed"], options=options))).samples
        assert same(got, tensors[f"case{index}.0"]), f"engine, case {index}"
    batch = CASES[9]
    expected = [tensors[f"case9.{j}"] for j in range(len(batch["text"]))]
    with koe.load(model_dir, device="cpu") as tts:
        said = tts.generate(batch["text"], seed=batch["seed"], speed=batch["speed"], num_step=batch["num_step"])
    assert all(same(s.audio, e) for s, e in zip(said, expected, strict=True))
    drop_in = OmniVoice.from_pretrained(str(model_dir))
    torch.manual_seed(batch["seed"])
    waves = drop_in.generate(text=batch["text"], speed=batch["speed"], num_step=batch["num_step"])
    assert all(same(w, e) for w, e in zip(waves, expected, strict=True))
