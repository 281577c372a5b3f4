"""OmniVoice's long texts against upstream omnivoice==0.2.1, bit for bit: chunked at punctuation,
with and without a reference (without: the first chunk becomes the rest's reference), in batches
mixing long and short texts, with speed and duration; joined with upstream's fades and gap. The
chunking threshold and chunk length are lowered so the tiny model's texts are "long"."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

from koe.compat.omnivoice import OmniVoice
from koe.engines.base import SynthesisRequest, collect
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.omnivoice.generate import Settings
from koe.engines.omnivoice.synthesis import Chunking, OmniVoiceModel, Output
from koe.engines.registry import load_engine

pytestmark = pytest.mark.oracle

LONG = "Mr. Smith went to Washington. He saw the capitol, the monument, and the river! Then he went home; it was late. Was it worth it? Yes."
LONG_ZH = "今天天气很好。我们去公园散步吧，然后去吃饭。你觉得怎么样？好的！"
SHORT = "Short one."
CHUNKS = {"audio_chunk_threshold": 2.0, "audio_chunk_duration": 1.5}

CASES = [
    {"text": LONG, "seed": 1, "num_step": 4, **CHUNKS},
    {"text": LONG_ZH, "seed": 2, "num_step": 3, **CHUNKS, "ref": True},
    {"text": [LONG, SHORT, LONG_ZH], "seed": 3, "num_step": 3, **CHUNKS},
    {"text": [LONG, LONG_ZH], "seed": 4, "num_step": 3, **CHUNKS, "ref": True, "speed": [1.3, 0.9]},
    {"text": LONG, "seed": 5, "num_step": 3, **CHUNKS, "duration": 6.0, "postprocess_output": False},
]


def _clip(seconds: float, sr: int) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("omnivoice") / "model")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("omnivoice-long-clip") / "ref.wav"
    sf.write(str(path), _clip(1.4, 24000), 24000, subtype="FLOAT")
    return str(path)


@pytest.fixture(scope="module")
def upstream(model_dir, clip, tmp_path_factory):
    cases = []
    for c in CASES:
        case = {k: v for k, v in c.items() if k != "ref"}
        if c.get("ref"):
            case.update(ref_audio={"path": clip}, ref_text="A reference voice")
        cases.append(case)
    return run_oracle("generate", {"model": str(model_dir), "cases": cases}, tmp_path_factory.mktemp("omnivoice-long"), family="omnivoice")


@pytest.mark.parametrize("index", range(len(CASES)))
def test_long_texts_match_upstream(model_dir, clip, upstream, index) -> None:
    tensors, info = upstream
    case = CASES[index]
    texts = case["text"] if isinstance(case["text"], list) else [case["text"]]
    n = len(texts)
    model = OmniVoiceModel.load(model_dir)
    torch.manual_seed(case["seed"])
    voices = [model.prompt(clip, "A reference voice")] * n if case.get("ref") else None
    speeds = case.get("speed")
    waves = model.generate(
        texts,
        Settings(num_step=case["num_step"]),
        Output(postprocess_output=case.get("postprocess_output", True)),
        durations=[case["duration"]] * n if "duration" in case else None,
        speeds=speeds if isinstance(speeds, list) else None,
        voices=voices,
        chunking=Chunking(**CHUNKS),
    )
    assert len(info["cases"][index]["target_lens"]) > 1  # upstream did chunk
    for j, wave in enumerate(waves):
        assert same(wave, tensors[f"case{index}.{j}"]), f"text {j}"


def test_long_texts_through_the_engine_and_the_drop_in(model_dir, clip, upstream) -> None:
    """A long text as one request (the pipeline does not segment it: upstream's chunks, one call),
    streamed one piece per chunk with the same tokens; a batch of long texts with a reference and
    per-text speeds through the drop-in."""
    tensors, _ = upstream
    engine = load_engine(model_dir, device="cpu")
    case = CASES[0]
    request = SynthesisRequest(case["text"], seed=case["seed"], options={"num_step": case["num_step"], **CHUNKS})
    assert same(collect(engine.synthesize(request)).samples, tensors["case0.0"])
    streamed = [c for c in engine.synthesize(replace(request, stream=True)) if len(c.samples)]
    assert len(streamed) == len(engine.model.chunks_of(case["text"], engine.model.frames_for(case["text"]), Chunking(**CHUNKS))) > 1
    drop_in = OmniVoice.from_pretrained(str(model_dir))
    case = CASES[3]
    torch.manual_seed(case["seed"])
    waves = drop_in.generate(case["text"], ref_audio=clip, ref_text="A reference voice", speed=case["speed"], num_step=case["num_step"], **CHUNKS)
    assert all(same(w, tensors[f"case3.{j}"]) for j, w in enumerate(waves))
