"""OmniVoice's voice design and languages against upstream omnivoice==0.2.1, bit for bit: designed
voices in English and Chinese (instructions translated, accents and dialects), languages by name
and by code, with and without a reference; through the core, the engine and the drop-in."""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same

from koe.compat.omnivoice import OmniVoice
from koe.engines.base import SynthesisRequest, collect
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.omnivoice.generate import Settings, unmask
from koe.engines.omnivoice.synthesis import OmniVoiceModel
from koe.engines.registry import load_engine

pytestmark = pytest.mark.oracle

CASES = [
    {"text": "Hello there, nice to meet you.", "seed": 1, "num_step": 5, "instruct": "Female, Low Pitch, british accent", "language": "English"},
    {"text": "你好，很高兴认识你。", "seed": 2, "num_step": 5, "instruct": "male, elderly", "language": "zh"},
    {"text": "你好，很高兴认识你。", "seed": 3, "num_step": 4, "instruct": "女，四川话", "language": "Chinese"},
    {"text": "Good morning!", "seed": 4, "num_step": 4, "instruct": "男，青年, whisper"},
    {"text": "Bonjour tout le monde.", "seed": 5, "num_step": 4, "language": "French"},
    {"text": "[laughter] Guten Morgen.", "seed": 6, "num_step": 3, "language": "de", "instruct": " , high pitch,"},
    {"text": "Konnichiwa.", "seed": 7, "num_step": 3, "language": "None", "instruct": "child"},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("omnivoice") / "model")


@pytest.fixture(scope="module")
def upstream(model_dir, tmp_path_factory):
    return run_oracle("generate", {"model": str(model_dir), "cases": CASES}, tmp_path_factory.mktemp("omnivoice-design"), family="omnivoice")


@pytest.mark.parametrize("index", range(len(CASES)))
def test_designed_voices_match_upstream(model_dir, upstream, index) -> None:
    tensors, _ = upstream
    case = CASES[index]
    model = OmniVoiceModel.load(model_dir)
    torch.manual_seed(case["seed"])
    waves = model.generate([case["text"]], Settings(num_step=case["num_step"]), language=case.get("language"), instruct=case.get("instruct"))
    assert same(waves[0], tensors[f"case{index}.0"])
    torch.manual_seed(case["seed"])
    codes = unmask(model.lm, model.items([case["text"]], case.get("language"), case.get("instruct")), Settings(num_step=case["num_step"]))
    assert same(codes[0], tensors[f"case{index}.tokens0"])


def test_the_engine_and_the_drop_in_give_upstream_s_samples(model_dir, upstream) -> None:
    """Through the contract (`seed=N`, language and design as a request's) and through
    `koe.compat.omnivoice.OmniVoice` (upstream's own call after `torch.manual_seed(N)`)."""
    tensors, _ = upstream
    engine = load_engine(model_dir, device="cpu")
    drop_in = OmniVoice.from_pretrained(str(model_dir), device_map="cpu", dtype=torch.float32)
    for index in (0, 2, 5, 6):
        case = CASES[index]
        expected = tensors[f"case{index}.0"]
        request = SynthesisRequest(
            case["text"], language=case.get("language"), instruct=case.get("instruct"), seed=case["seed"], options={"num_step": case["num_step"]}
        )
        assert same(collect(engine.synthesize(request)).samples, expected), f"engine, case {index}"
        torch.manual_seed(case["seed"])
        (wave,) = drop_in.generate(case["text"], language=case.get("language"), instruct=case.get("instruct"), num_step=case["num_step"])
        assert same(wave, expected), f"drop-in, case {index}"
