"""Model folders: variant detection, sharded weights, dtype choice."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from fixtures_models import model_folder
from safetensors.torch import load_file, save_file

import koe
from koe.engines.registry import UnknownModelError, detect
from koe.runtime.device import resolve_device, resolve_dtype


@pytest.mark.parametrize("kind, size, tag", [("custom_voice", "tiny", "0b6"), ("voice_design", "tiny-proj", "1b7"), ("base", "tiny", "0b6")])
def test_detect_variant_and_size(tmp_path_factory, kind, size, tag):
    info = detect(model_folder(tmp_path_factory.getbasetemp(), kind, size))
    assert (info.family, info.variant, info.size) == ("qwen3_tts", kind, tag)


def test_unknown_folder(tmp_path):
    with pytest.raises(UnknownModelError, match="no config.json"):
        koe.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(UnknownModelError, match="'llama' is not supported"):
        koe.load(tmp_path)


def test_sharded_weights_load_and_speak_the_same(tmp_path, tmp_path_factory):
    src = model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny")
    dst = tmp_path / "sharded"
    shutil.copytree(src, dst)
    state = load_file(str(dst / "model.safetensors"))
    (dst / "model.safetensors").unlink()
    names = sorted(state)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:]), 1):
        shard = f"model-0000{i}-of-00002.safetensors"
        save_file({n: state[n] for n in part}, str(dst / shard))
        weight_map.update({n: shard for n in part})
    (dst / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    a = koe.load(src).generate("Sharded.", speaker="ryan", seed=3, max_new_tokens=6)
    b = koe.load(dst).generate("Sharded.", speaker="ryan", seed=3, max_new_tokens=6)
    assert torch.equal(a.codes, b.codes) and np.array_equal(a.audio, b.audio)


def test_missing_shard_is_named(tmp_path, tmp_path_factory):
    dst = tmp_path / "m"
    shutil.copytree(model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny"), dst)
    (dst / "model.safetensors").unlink()
    (dst / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(ValueError, match="model-00001-of-00002.safetensors"):
        koe.load(dst)


def test_default_dtypes():
    assert resolve_dtype(None, torch.device("cpu")) == torch.float32
    assert resolve_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("float8", torch.device("cpu"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where there is no GPU")
def test_cuda_request_without_gpu_is_clear():
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        resolve_device("cuda")


def test_dtype_override_is_reported(tmp_path_factory):
    tts = koe.load(model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny"), dtype="bfloat16")
    r = tts.generate("Brain float.", speaker="ryan", seed=0, max_new_tokens=4)
    assert r.metadata["precision"] == "bfloat16" and r.audio.dtype == np.float32


def test_code_predictor_rotary_table_equals_each_positions_own(tmp_path_factory):
    """The code predictor's steps read cos/sin from one table of positions 0..G (made once): each
    position's values are bit for bit those computed for it alone, for a row or a batch."""
    from koe.nn.rotary import rotary_cos_sin

    predictor = koe.load(model_folder(tmp_path_factory.getbasetemp(), "custom_voice", "tiny")).engine.network.talker.code_predictor
    for dtype in (torch.float32, torch.bfloat16):
        cos, sin = predictor._rotary_table(dtype, torch.device("cpu"))
        assert cos.shape[1] == predictor.cfg.num_code_groups + 1
        for p in range(cos.shape[1]):
            for rows in (1, 3):
                own_cos, own_sin = rotary_cos_sin(predictor.inv_freq, torch.full((rows, 1), p), dtype)
                assert torch.equal(own_cos, cos[:, p : p + 1].expand(rows, -1, -1)) and torch.equal(own_sin, sin[:, p : p + 1].expand(rows, -1, -1))
