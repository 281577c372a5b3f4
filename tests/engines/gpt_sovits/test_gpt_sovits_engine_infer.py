"""GPT-SoVITS v2 end to end against upstream's `TTS.run`, bit for bit.

The golden (goldens/infer.npz, tests/oracle_gpt_sovits/golden_infer.py) is upstream's
`TTS(TTS_Config(...)).run(inputs)` on koe's tiny release folder (golden_infer.py): English, Chinese,
mixed and auto text, a long text cut by cut0..cut5 in batches of two, speed 1.3 and 0.8, other
sampling settings, serial and batched AR decoding with buckets, reference-free, two references, no
fragment interval, and return_fragment (koe's stream). koe's engine, its voice built from the same
clip and transcript, must give the float samples upstream turns into int16, and so its int16 samples.
"""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pytest
from sovits_goldens import array_sha256, check_state, fixtures, inputs

from koe.engines.base import SynthesisRequest, VoiceReference
from koe.engines.gpt_sovits.engine import GPTSoVITSEngine
from koe.engines.gpt_sovits.synthesis import RunSettings, fragments, set_seed, to_int16

G = inputs("infer")
golden, folder = fixtures("infer")
CASES = list(G.CASES)


@pytest.fixture(scope="module")
def engine(folder):
    return GPTSoVITSEngine.load(folder / "model")


@pytest.fixture(scope="module")
def voices(engine, folder):
    made = {}

    def voice(case: dict):
        key = (case["prompt_text"], case["prompt_lang"], bool(case.get("aux")))
        if key not in made:
            v = engine.build_voice(VoiceReference(str(folder / "ref.wav"), case["prompt_text"] or None), prompt_lang=case["prompt_lang"])
            made[key] = engine.add_references(v, [str(folder / "aux.wav")]) if case.get("aux") else v
        return made[key]

    return voice


def test_fixture_is_the_goldens(golden):
    check_state(golden, G.state())


@pytest.fixture(scope="module")
def spoken(folder, engine, voices):
    cases, made = json.loads((folder / "cases.json").read_text(encoding="utf-8")), {}

    def speak(name: str) -> list[np.ndarray]:
        if name not in made:
            case = cases[name]
            settings = RunSettings(**{f.name: case[f.name] for f in fields(RunSettings) if f.name in case})
            voice = voices(case)  # before the seed, as a prepared voice is
            set_seed(case["seed"])
            streamed = bool(case.get("return_fragment"))
            made[name] = list(fragments(engine.models, voice, case["text"], case["text_lang"], settings, streamed=streamed))
        return made[name]

    return speak


@pytest.mark.parametrize("name", CASES)
def test_run_equals_upstream(name, golden, engine, spoken):
    chunks = spoken(name)
    assert int(golden[f"{name}.sr"]) == engine.sample_rate
    assert len(chunks) == int(golden[f"{name}.count"])
    for k, audio in enumerate(chunks):
        assert len(audio) == int(golden[f"{name}.{k}.length"]), k
        assert array_sha256(audio.astype(np.float32)) == str(golden[f"{name}.{k}.float"]), k  # before upstream's int16 step
        pcm = to_int16(audio)
        np.testing.assert_array_equal(pcm[:32], golden[f"{name}.{k}.head"])
        assert array_sha256(pcm) == str(golden[f"{name}.{k}.int16"]), k


@pytest.mark.parametrize("name", ["mixed", "batched"])
def test_the_engine_contract_gives_upstreams_samples(name, golden, folder):
    """Through `synthesize` (the pipeline, the options under koe's names), on a fresh engine whose
    Chinese front end is first built mid-request: upstream's float samples."""
    case = json.loads((folder / "cases.json").read_text(encoding="utf-8"))[name]
    engine = GPTSoVITSEngine.load(folder / "model")
    try:
        voice = engine.prepare_voice(VoiceReference(str(folder / "ref.wav"), case["prompt_text"]), prompt_lang=case["prompt_lang"])
        options = {"text_split_method": case.get("text_split_method", "cut1"), "batch_fragments": case.get("batch_size", 1)}
        chunks = list(engine.synthesize(SynthesisRequest(case["text"], voice=voice, language=case["text_lang"], seed=case["seed"], options=options)))
    finally:
        engine.close()
    audio = np.concatenate([c.samples for c in chunks])
    assert array_sha256(audio.astype(np.float32)) == str(golden[f"{name}.0.float"])
