"""OmniVoice's opt-in bf16 mode: the LM in bfloat16, the audio tokenizer in float32.

It changes bits against the exact float32 path (the accuracy tool measures how much), and on the
CPU it gives upstream's own bfloat16 run (`OmniVoice.from_pretrained(dtype=torch.bfloat16)`, whose
audio tokenizer also stays float32) sample for sample, at one torch thread.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

import koe
from koe.engines.base import SynthesisRequest, VoiceReference, collect
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.registry import load_engine
from koe.runtime.precision import UnsupportedPrecision

EN = "Hello world, this is a test of the voice."
CASES = [
    {"text": EN, "seed": 1, "num_step": 8},
    {"text": EN, "seed": 2, "num_step": 6, "instruct": "female, low pitch", "class_temperature": 0.7},
    {"text": [EN, "Short one."], "seed": 3, "num_step": 5},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("omnivoice-bf16") / "model")


def test_bf16_is_offered_named_and_refused_beside_other_modes(model_dir) -> None:
    engine = load_engine(model_dir, device="cpu", precision="bf16")
    assert engine.precision == "bfloat16" and "bf16" in engine.capabilities.precisions
    assert engine.model.lm.audio_heads.weight.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in engine.model.codec.parameters())
    out = collect(engine.synthesize(SynthesisRequest(EN, seed=0, options={"num_step": 4})))
    assert out.metadata["precision"] == "bfloat16" and out.samples.dtype == np.float32 and np.isfinite(out.samples).all()
    clip = (0.2 * np.sin(np.linspace(0, 400 * np.pi, 48000)).astype(np.float32), 24000)
    voice = engine.prepare_voice(VoiceReference(clip, "A short clip."))
    cloned = collect(engine.synthesize(SynthesisRequest(EN, voice=voice, seed=0, options={"num_step": 3})))
    assert np.isfinite(cloned.samples).all() and cloned.samples.size > 0
    exact = collect(load_engine(model_dir, device="cpu").synthesize(SynthesisRequest(EN, seed=0, options={"num_step": 4})))
    assert exact.metadata["precision"] == "float32" and not np.array_equal(exact.samples, out.samples)
    with pytest.raises(UnsupportedPrecision, match="fp32 \\(exact\\) or bf16"):
        load_engine(model_dir, device="cpu", precision="int8")
    with pytest.raises(ValueError, match="float16"):
        load_engine(model_dir, device="cpu", dtype=torch.float16)
    assert load_engine(model_dir, device="cpu", dtype="bf16").precision == "bfloat16"


@pytest.mark.oracle
def test_bf16_gives_upstream_s_own_bf16_samples(model_dir, tmp_path) -> None:
    """The model's own voice, a designed one, a batch and a clone (koe runs upstream's padded
    batch in bf16: oneDNN's bf16 products depend on the rows around them)."""
    clip = tmp_path / "clip.wav"
    t = np.arange(3 * 24000) / 24000
    sf.write(clip, (0.3 * np.sin(2 * np.pi * 160 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32), 24000)
    clone = {"text": EN, "seed": 4, "num_step": 5, "ref_audio": {"path": str(clip)}, "ref_text": "A short clip of a steady voice."}
    cases = [*CASES, clone]
    tensors, _ = run_oracle("generate", {"model": str(model_dir), "cases": cases, "dtype": "bfloat16"}, tmp_path, family="omnivoice")
    with koe.load(model_dir, device="cpu", precision="bf16") as tts:
        voice = tts.prepare_voice(str(clip), clone["ref_text"])
        for i, case in enumerate(cases):
            options = {k: v for k, v in case.items() if k not in ("text", "seed", "ref_audio", "ref_text")}
            if "ref_audio" in case:
                options["voice"] = voice
            said = tts.generate(case["text"], seed=case["seed"], **options)
            said = said if isinstance(said, list) else [said]
            for j, s in enumerate(said):
                assert s.metadata["precision"] == "bfloat16"
                assert same(s.audio, tensors[f"case{i}.{j}"]), f"case {i}, output {j}"


def test_the_accuracy_tool_measures_bf16_against_the_exact_path(model_dir, tmp_path, capsys) -> None:
    from koe.bench import kit
    from koe.engines.omnivoice.bench.accuracy import main

    out = tmp_path / "acc.json"
    assert main(kit, ["--precision", "bf16", "--size", "tiny", "--num-step", "4", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["precision"] == "bfloat16" and result["num_step"] == 4
    forced = result["teacher_forced"]
    assert 0.9 < forced["cosine_mean"] <= 1.0 and 0.0 <= forced["top1_agreement"] <= 1.0
    assert 0.0 <= result["free_running"]["codes_equal"] <= 1.0 and "waveform_snr_db" in result["free_running"]
