"""VoxCPM end to end against upstream voxcpm==2.0.3 (its own venv), bit for bit on the CPU in float32.

Upstream's side: `VoxCPM(folder, enable_denoiser=False, optimize=False, device="cpu")`, then per
case `torch.manual_seed(N)` and `generate(...)` / `generate_streaming(...)`, on random-weight
models in the released layout (its keys checked strictly), both architectures. koe's side, twice:
the drop-in `koe.compat.voxcpm.VoxCPM` (the same calls, torch's global generator) and the public
API (`koe.load`, `make_voice` / `prepare_voice`, `synthesize` with `seed=N`). Random weights rarely
stop by themselves, so most cases cap `max_len`; a few run to upstream's own length cap.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

from koe.compat.voxcpm import VoxCPM
from koe.engines.base import SynthesisRequest, VoiceReference, collect
from koe.engines.registry import load_engine
from koe.engines.voxcpm.fixtures import write_random_model

pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore:speech was cut off:UserWarning")]

EN = "Hello world, this is a test of the voice."
ZH = "你好世界，我们在中国。"
MIXED = "  Hello\n world,   你好   世界!  "


def _speechy(seconds: float, sr: int, channels: int = 1, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 140 + 20 * np.sin(2 * np.pi * 0.7 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 5))
    x = x * (0.55 + 0.45 * np.sin(2 * np.pi * 3.1 * t)) + 0.02 * rng.standard_normal(len(t))
    x = (0.3 * x / np.max(np.abs(x))).astype(np.float32)
    return np.stack([x, 0.8 * x], axis=1) if channels == 2 else x


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("voxcpm-clips")
    made = {
        "en16": (_speechy(1.7, 16000), 16000, "PCM_16"),
        "st44": (_speechy(1.3, 44100, channels=2, seed=1), 44100, "FLOAT"),
        "mono22": (_speechy(2.1, 22050, seed=2), 22050, "PCM_16"),
    }
    paths = {}
    for name, (x, sr, subtype) in made.items():
        paths[name] = str(d / f"{name}.wav")
        sf.write(paths[name], x, sr, subtype=subtype)
    return paths


def _cases(v2: bool, clips: dict) -> list[dict]:
    cap = {"max_len": 9, "retry_badcase": False}
    cases = [
        {"text": EN, "seed": 1, **cap},
        {"text": ZH, "seed": 2, "cfg_value": 1.3, "inference_timesteps": 4, **cap},
        {"text": MIXED, "seed": 3, "cfg_value": 3.0, "inference_timesteps": 13, "min_len": 4, **cap},
        {"text": EN, "seed": 4, "prompt_wav_path": clips["en16"], "prompt_text": "A prompt, spoken.", **cap},
        {"text": ZH, "seed": 5, "prompt_wav_path": clips["st44"], "prompt_text": "你好，中国。", "inference_timesteps": 6, **cap},
        {"text": EN, "seed": 6, "prompt_wav_path": clips["mono22"], "prompt_text": "the mono prompt", "streaming": True, "max_len": 7},
        {"text": EN, "seed": 7, "streaming": True, "max_len": 6},
        # retries: a tiny ratio makes every run a "bad case"; the draws go on without a reseed
        {"text": "Hello.", "seed": 8, "retry_badcase": True, "retry_badcase_ratio_threshold": 0.8, "retry_badcase_max_times": 3},
        {"text": EN, "seed": 9, "retry_badcase": True},  # upstream's own length cap (6 per token + 10)
        # retry_badcase=None: upstream tests the flag's truth, so no retries (its default is True)
        {"text": "Hello.", "seed": 14, "retry_badcase": None, "retry_badcase_ratio_threshold": 0.9, "retry_badcase_max_times": 3},
    ]
    if v2:
        cases += [
            {"text": EN, "seed": 10, "reference_wav_path": clips["st44"], **cap},
            {"text": ZH, "seed": 11, "reference_wav_path": clips["mono22"], "prompt_wav_path": clips["en16"], "prompt_text": "你好", **cap},
            {"text": EN, "seed": 12, "reference_wav_path": clips["en16"], "streaming": True, "max_len": 6},
            {
                "text": EN,
                "seed": 13,
                "reference_wav_path": clips["en16"],
                "prompt_wav_path": clips["st44"],
                "prompt_text": "hello world",
                "streaming": True,
                "max_len": 6,
            },
            # what prepare_voice makes of a clip with its transcript: the clip as prompt and as reference
            {"text": EN, "seed": 4, "prompt_wav_path": clips["en16"], "prompt_text": "A prompt, spoken.", "reference_wav_path": clips["en16"], **cap},
        ]
    return cases


@pytest.fixture(scope="module", params=["VoxCPM2", "VoxCPM1.5"])
def model(request, tmp_path_factory, clips):
    variant = request.param
    folder = write_random_model(tmp_path_factory.mktemp(f"voxcpm-{variant}"), variant)
    cases = _cases(variant == "VoxCPM2", clips)
    tensors, info = run_oracle("generate", {"model": str(folder), "cases": cases}, tmp_path_factory.mktemp("oracle"), family="voxcpm", keep=("case*.chunk*",))
    assert info["keys"]["missing"] == [] and info["keys"]["unexpected"] == [] and info["dtype"] == "float32"
    return variant, folder, cases, tensors, info


def _upstream(tensors, info, i):
    row = info["cases"][i]
    if row["streaming"]:
        return [tensors[f"case{i}.chunk{j}"].numpy() for j in range(row["chunks"])]  # kept whole: joined below
    return tensors[f"case{i}"]


def test_the_drop_in_class_gives_upstreams_samples(model):
    variant, folder, cases, tensors, info = model
    m = VoxCPM(str(folder), zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")
    assert m.tts_model.sample_rate == info["sample_rate"]
    for i, case in enumerate(cases):
        kwargs = {k: v for k, v in case.items() if k not in ("seed", "streaming")}
        torch.manual_seed(case["seed"])
        expected = _upstream(tensors, info, i)
        if case.get("streaming"):
            with pytest.warns(UserWarning, match="Retry on bad cases"):  # upstream warns the same: its default retry is on
                got = list(m.generate_streaming(**kwargs))
            assert len(got) == len(expected), f"case {i}"
            for a, b in zip(got, expected, strict=True):
                assert a.dtype == np.float32 and same(a, b), f"case {i} ({variant})"
        else:
            got = m.generate(**kwargs)
            assert got.dtype == np.float32 and got.ndim == 1
            assert same(got, expected), f"case {i} ({variant}): {case}"


def _voice(engine, case):
    if "prompt_wav_path" in case or "reference_wav_path" in case:
        return engine.make_voice(case.get("prompt_wav_path"), case.get("prompt_text"), case.get("reference_wav_path"))
    return None


def test_koe_load_gives_upstreams_samples_with_a_seed(model):
    variant, folder, cases, tensors, info = model
    engine = load_engine(folder, device="cpu")
    assert engine.sample_rate == info["sample_rate"]
    options = ("cfg_value", "inference_timesteps", "min_len", "max_len", "retry_badcase", "retry_badcase_max_times", "retry_badcase_ratio_threshold")
    for i, case in enumerate(cases):
        request = SynthesisRequest(
            text=case["text"],
            voice=_voice(engine, case),
            seed=case["seed"],
            stream=bool(case.get("streaming")),
            options={k: case[k] for k in options if k in case and not (case.get("streaming") and k == "retry_badcase")},
        )
        expected = _upstream(tensors, info, i)
        expected = np.concatenate(expected) if isinstance(expected, list) else expected
        got = collect(engine.synthesize(request))
        assert same(got.samples, expected), f"case {i} ({variant}): {case}"
        assert got.metadata["seed"] == case["seed"] and got.metadata["precision"] == "float32" and len(expected) > 0
        if case.get("retry_badcase_ratio_threshold") == 0.8:
            assert got.metadata["segments"][0]["runs"] == 3  # every run was a "bad case": made three times
        if "retry_badcase" in case and case["retry_badcase"] is None:
            assert got.metadata["segments"][0]["runs"] == 1  # None: no retries, as upstream
        if case.get("streaming"):
            assert info["cases"][i]["chunks"] >= 2
    engine.close()


def test_a_prepared_voice_is_upstreams_clone(model, tmp_path):
    """The contract's `prepare_voice`: with a transcript a continuation prompt (VoxCPM2: the clip is its
    reference too, upstream's "ultimate cloning"); a saved and reloaded voice gives the same samples."""
    variant, folder, cases, tensors, info = model
    engine = load_engine(folder, device="cpu")
    voice = engine.prepare_voice(VoiceReference(cases[3]["prompt_wav_path"], cases[3]["prompt_text"]))
    assert voice.mode == ("ref_continuation" if variant == "VoxCPM2" else "continuation")
    voice.save(tmp_path / "v")
    again = engine.load_voice(tmp_path / "v")
    request = SynthesisRequest(text=EN, voice=again, seed=4, options={"max_len": 9, "retry_badcase": False})
    expected = tensors[f"case{len(cases) - 1 if variant == 'VoxCPM2' else 3}"]
    assert same(collect(engine.synthesize(request)).samples, expected)
    engine.close()
