"""VoxCPM folders as released: pickled weights, the 0.5B first release's layout, bfloat16 configs.

Each against upstream voxcpm==2.0.3 in its own venv (keys checked strictly there):
- `pytorch_model.bin` + `audiovae.pth` (wrapped in {"state_dict": ...}, as upstream unwraps them)
  load with `weights_only=True` and give the safetensors folder's samples; a pickle that would run
  code is refused, never executed;
- the 0.5B layout: no `architecture` field (upstream reads "voxcpm"), patch size 2, a 16 kHz VAE;
- a config saying bfloat16 (the releases do): upstream keeps bfloat16 on a CPU; koe's default is
  float32, and `precision="bf16"` gives upstream's own bfloat16 samples bit for bit.
"""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import load_file, save_file

import koe
from koe.engines.base import SynthesisRequest, collect
from koe.engines.registry import load_engine
from koe.engines.voxcpm.audio_vae import AudioVAE, VAEConfig
from koe.engines.voxcpm.fixtures import write_random_model
from koe.runtime.weights import WeightsError

pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore:speech was cut off:UserWarning")]

TEXT = "Hello world, this is a test."
CASES = [{"text": TEXT, "seed": 3, "max_len": 8, "retry_badcase": False}, {"text": "Hello world.", "seed": 4, "max_len": 6, "streaming": True}]


def _koe(engine, case: dict) -> np.ndarray:
    options = {k: case[k] for k in ("max_len", "retry_badcase") if k in case}
    return collect(engine.synthesize(SynthesisRequest(text=case["text"], seed=case["seed"], stream=bool(case.get("streaming")), options=options))).samples


def _assert_upstream(folder, tmp_path, **load):
    tensors, info = run_oracle("generate", {"model": str(folder), "cases": CASES}, tmp_path / "oracle", family="voxcpm")
    engine = load_engine(folder, device="cpu", **load)
    for i, case in enumerate(CASES):
        assert same(_koe(engine, case), tensors[f"case{i}"]), f"case {i}"
    return engine, info


def test_pickled_weights_load_safely_and_give_the_same_samples(tmp_path):
    folder = write_random_model(tmp_path / "m", "VoxCPM2")
    reference = [_koe(load_engine(folder, device="cpu"), case) for case in CASES]
    torch.save({"state_dict": load_file(str(folder / "model.safetensors"))}, folder / "pytorch_model.bin")
    torch.save(load_file(str(folder / "audiovae.safetensors")), folder / "audiovae.pth")
    (folder / "model.safetensors").unlink()
    (folder / "audiovae.safetensors").unlink()
    engine, _ = _assert_upstream(folder, tmp_path)
    for case, expected in zip(CASES, reference, strict=True):
        assert np.array_equal(_koe(engine, case), expected)

    class Boom:
        def __reduce__(self):
            return (print, ("this pickle ran code",))

    with open(folder / "audiovae.pth", "wb") as f:
        pickle.dump({"decoder.x": Boom()}, f)
    with pytest.raises(WeightsError, match="refused"):
        koe.load(folder, device="cpu")


def test_the_first_release_layout_runs_as_upstream(tmp_path):
    """VoxCPM-0.5B: architecture "voxcpm" by default, patch size 2, AudioVAE V1 at 16 kHz."""
    folder = write_random_model(tmp_path / "m", "VoxCPM1.5")
    raw = json.loads((folder / "config.json").read_text())
    del raw["architecture"]
    raw["patch_size"] = 2
    raw["audio_vae_config"] = {
        "encoder_dim": 8,
        "encoder_rates": [2, 5, 8, 8],
        "latent_dim": 16,
        "decoder_dim": 64,
        "decoder_rates": [8, 8, 5, 2],
        "depthwise": True,
        "sample_rate": 16000,
        "use_noise_block": False,
    }
    (folder / "config.json").write_text(json.dumps(raw))
    vae = AudioVAE(VAEConfig.from_json(raw["audio_vae_config"], 1))
    save_file({k: v.contiguous() for k, v in vae.state_dict().items()}, str(folder / "audiovae.safetensors"))
    engine, info = _assert_upstream(folder, tmp_path)
    assert info["sample_rate"] == engine.sample_rate == 16000 and info["model_class"] == "VoxCPMModel"
    assert engine.capabilities.variant == "VoxCPM-0.5B" and engine.capabilities.stream_step_s == pytest.approx(2 * 640 / 16000)


@pytest.mark.parametrize("variant", ["VoxCPM2", "VoxCPM1.5"])
def test_bf16_is_upstreams_own_cpu_bf16(variant, tmp_path):
    folder = write_random_model(tmp_path / "m", variant, dtype=torch.bfloat16)
    raw = json.loads((folder / "config.json").read_text())
    raw["dtype"] = "bfloat16"
    (folder / "config.json").write_text(json.dumps(raw))
    engine, info = _assert_upstream(folder, tmp_path, precision="bf16")
    assert info["dtype"] == "bfloat16"
    out = collect(engine.synthesize(SynthesisRequest(text=TEXT, seed=3, options={"max_len": 8, "retry_badcase": False})))
    assert out.metadata["precision"] == "bfloat16"
    exact = load_engine(folder, device="cpu")  # the default: float32 from the bf16 file
    assert exact.precision == "float32"
    assert not np.array_equal(_koe(exact, CASES[0]), out.samples)


def test_a_missing_or_misshapen_file_is_an_error_naming_it(tmp_path):
    folder = write_random_model(tmp_path / "m", "VoxCPM2")
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    (broken / "audiovae.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="audiovae"):
        koe.load(broken, device="cpu")
    shutil.copy(folder / "audiovae.safetensors", broken / "audiovae.safetensors")
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["stop_head.weight"] = torch.zeros(3, tensors["stop_head.weight"].shape[1])
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(WeightsError, match="stop_head"):
        koe.load(broken, device="cpu")
    del tensors["stop_head.weight"]
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(WeightsError, match="stop_head"):
        koe.load(broken, device="cpu")
