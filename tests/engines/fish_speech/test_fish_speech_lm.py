"""Fish Speech S2's dual-AR LM against upstream's goldens (`lm`): the first logits of two prompts
and `generate`'s codes for six sampling cases, in float32 and bfloat16, bit for bit; the frames RAS
replaced; strict loading (missing, unexpected, misshapen tensors), sharded safetensors and model.pth."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
import torch
from fish_goldens import check_recorded, check_state, inputs, load_golden, written
from koe_fish_speech.config import LMConfigError, read_lm_config
from koe_fish_speech.fixtures_lm import lm_config_json, lm_state
from koe_fish_speech.fixtures_tokenizer import SEMANTIC_BEGIN_ID, SEMANTIC_END_ID
from koe_fish_speech.generate import IM_END_ID, Sampling, generate_codes, generate_frames
from koe_fish_speech.model import load_lm
from safetensors.torch import load_file, save_file

from koe.runtime.weights import WeightsError

G = inputs("lm")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def golden():
    return load_golden("lm")


@pytest.fixture(scope="module")
def folder(tmp_path_factory, golden):
    path = written("lm")
    check_recorded(golden, path)
    return path


@pytest.fixture(scope="module")
def models(folder):
    torch.set_num_threads(1)
    models = {name: load_lm(folder, dtype) for name, dtype in DTYPES.items()}
    models["float32_torch"] = load_lm(folder, torch.float32, exact_kernels=False)
    return models


def _run(model, case: dict) -> tuple[torch.Tensor, list[int]]:
    torch.manual_seed(case["seed"])
    sampling = Sampling(case["temperature"], case["top_p"], case["top_k"])
    prompt = torch.from_numpy(G.prompt(case["prompt"]))
    return generate_codes(
        model, prompt, semantic_begin_id=SEMANTIC_BEGIN_ID, semantic_end_id=SEMANTIC_END_ID, max_new_tokens=case["max_new_tokens"], sampling=sampling
    )


def test_fixture_is_the_goldens(golden):
    check_state(golden, lm_state(lm_config_json("tiny"), seed=0))
    assert golden["semantic_ids"].tolist() == [SEMANTIC_BEGIN_ID, SEMANTIC_END_ID, IM_END_ID]


@pytest.mark.parametrize("dname", DTYPES)
@pytest.mark.parametrize("name", list(G.PROMPTS))
def test_first_logits(models, golden, dname, name):
    model = models[dname]
    prompt = torch.from_numpy(G.prompt(name))
    with torch.inference_mode():
        logits, _ = model.slow(prompt[None], 0, model.slow.new_cache(), (SEMANTIC_BEGIN_ID, SEMANTIC_END_ID))
    logits = logits[0, -1]
    head = torch.cat([logits[SEMANTIC_BEGIN_ID : SEMANTIC_BEGIN_ID + 32], logits[IM_END_ID : IM_END_ID + 1]]).float().numpy()
    assert np.array_equal(head, golden[f"{dname}.{name}.logits_head"])
    assert hashlib.sha256(logits.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest() == str(golden[f"{dname}.{name}.logits_sha256"])


@pytest.mark.parametrize("dname", DTYPES)
@pytest.mark.parametrize("index", range(len(G.CASES)))
def test_generate_codes(models, golden, dname, index):
    codes, ras = _run(models[dname], G.CASES[index])
    want = golden[f"{dname}.case{index}.codes"]
    assert codes.shape == want.shape and np.array_equal(codes.numpy(), want)
    assert ras == [i for i in golden[f"{dname}.case{index}.ras"].tolist() if i < want.shape[1]]


@pytest.mark.parametrize("index", [1, 3])
def test_generate_codes_on_torch_kernels(models, golden, index):
    """The float32 path without koe's exact kernels (where they do not apply) gives the same codes."""
    codes, _ = _run(models["float32_torch"], G.CASES[index])
    assert np.array_equal(codes.numpy(), golden[f"float32.case{index}.codes"])


def test_goldens_cover_ras_and_im_end(golden):
    for dname in DTYPES:
        assert any(len(golden[f"{dname}.case{i}.ras"]) for i in range(len(G.CASES))), "RAS never replaced a token"
        assert any(int(golden[f"{dname}.case{i}.last_token"]) == IM_END_ID for i in range(len(G.CASES))), "no case ended at <|im_end|>"
        assert max(len(set(golden[f"{dname}.case{i}.codes"][0].tolist())) for i in range(len(G.CASES))) > 20, "sampling is degenerate"


def test_frames_stream_and_stop(models, golden):
    case = G.CASES[0]
    torch.manual_seed(case["seed"])
    asked = []
    frames = generate_frames(
        models["float32"],
        torch.from_numpy(G.prompt(case["prompt"])),
        semantic_begin_id=SEMANTIC_BEGIN_ID,
        semantic_end_id=SEMANTIC_END_ID,
        max_new_tokens=case["max_new_tokens"],
        sampling=Sampling(case["temperature"], case["top_p"], case["top_k"]),
        stop=lambda: asked.append(1) or len(asked) >= 3,
    )
    got = torch.stack([f.codes for f in frames], dim=1).numpy()
    assert np.array_equal(got, golden["float32.case0.codes"][:, :3])


def test_sharded_and_pth(tmp_path, folder, golden):
    state = load_file(str(folder / "model.safetensors"))
    names = list(state)
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    shutil.copy(folder / "config.json", sharded)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2], "model-00002-of-00002.safetensors": names[len(names) // 2 :]}
    for file, part in halves.items():
        save_file({k: state[k] for k in part}, str(sharded / file))
    index = {"weight_map": {k: file for file, part in halves.items() for k in part}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    pth = tmp_path / "pth"
    pth.mkdir()
    shutil.copy(folder / "config.json", pth)
    internal = {}
    for k, v in state.items():
        if k.startswith("text_model.model."):
            internal["model." + k.removeprefix("text_model.model.")] = v
        elif k.startswith("audio_decoder.codebook_embeddings"):
            internal["model." + k.removeprefix("audio_decoder.")] = v
        else:
            internal["model.fast_" + k.removeprefix("audio_decoder.")] = v
    internal["model.audio_projector.weight"] = torch.zeros(2)  # upstream drops audio_* from a model.pth
    torch.save({"state_dict": internal}, pth / "model.pth")
    want = golden["float32.case1.codes"]
    for where in (sharded, pth):
        codes, _ = _run(load_lm(where), G.CASES[1])
        assert np.array_equal(codes.numpy(), want), where.name


def _broken(where, folder, change) -> None:
    """Load a copy of the LM whose state `change` altered."""
    where.mkdir()
    state = load_file(str(folder / "model.safetensors"))
    change(state)
    shutil.copy(folder / "config.json", where)
    save_file(state, str(where / "model.safetensors"))
    load_lm(where)


def test_strict_loading(tmp_path, folder):
    with pytest.raises(WeightsError, match="missing tensors: slow.norm.weight"):
        _broken(tmp_path / "a", folder, lambda s: s.pop("text_model.model.norm.weight"))
    with pytest.raises(WeightsError, match="unexpected tensors: text_model.model.extra.weight"):
        _broken(tmp_path / "b", folder, lambda s: s.update({"text_model.model.extra.weight": torch.zeros(3)}))
    with pytest.raises(WeightsError, match="audio_decoder.output.weight has shape"):
        _broken(tmp_path / "c", folder, lambda s: s.update({"audio_decoder.output.weight": torch.zeros(5, 128)}))
    (tmp_path / "a" / "model.safetensors").unlink()
    with pytest.raises(WeightsError, match="no LM weights"):
        load_lm(tmp_path / "a")


def test_config_errors(tmp_path):
    good = lm_config_json("tiny")
    cases = [
        ({**good, "model_type": "dual_ar"}, "model_type is 'dual_ar'"),
        ({**good, "text_config": {k: v for k, v in good["text_config"].items() if k != "dim"}}, "text_config.dim is missing"),
        ({**good, "audio_decoder_config": {**good["audio_decoder_config"], "num_codebooks": "ten"}}, "num_codebooks has the wrong type"),
        ({**good, "text_config": {**good["text_config"], "n_local_heads": 3}}, "multiple of n_local_heads"),
        ({**good, "text_config": {**good["text_config"], "max_seq_len": 1001}}, "multiple of 8"),
    ]
    for data, message in cases:
        (tmp_path / "config.json").write_text(json.dumps(data))
        with pytest.raises(LMConfigError, match=message):
            read_lm_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(good))
    config = read_lm_config(tmp_path)
    assert (config.slow.layers, config.fast.layers, config.slow.head_dim, config.fast.qk_norm, config.slow.qk_norm) == (2, 2, 64, False, True)
    minimal = {
        "model_type": "fish_qwen3_omni",
        "text_config": {"vocab_size": 100, "n_layer": 1, "n_head": 4, "dim": 256},
        "audio_decoder_config": {"vocab_size": 8, "num_codebooks": 2, "n_layer": 1},
    }
    (tmp_path / "config.json").write_text(json.dumps(minimal))
    config = read_lm_config(tmp_path)
    assert (config.slow.head_dim, config.slow.kv_heads, config.slow.intermediate_size, config.max_seq_len, config.norm_eps) == (64, 4, 768, 2048, 1e-5)
    assert config.fast == config.slow.__class__(1, 256, 4, 4, 64, 768, False, False, False)
