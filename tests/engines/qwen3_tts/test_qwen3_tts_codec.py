"""Qwen3-TTS 12 Hz speech tokenizer: koe vs upstream qwen-tts, bit for bit on the CPU in float32."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import load_file, save_file

from koe.engines.qwen3_tts.codec import (
    CodecConfigError,
    SpeechTokenizer,
    SpeechTokenizerConfig,
    WeightsError,
    chunk_plan,
)
from koe.engines.qwen3_tts.codec.random_weights import write_random_speech_tokenizer

SPF = 1920  # samples per frame


def _codes(gen: torch.Generator, frames: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=gen, dtype=torch.int64)


def _signal(gen: torch.Generator, seconds: float, f0: float) -> torch.Tensor:
    """A synthetic voice-like signal: harmonics with a wobbling pitch, an envelope and some noise."""
    n = int(seconds * 24000)
    t = torch.arange(n, dtype=torch.float64) / 24000
    phase = 2 * math.pi * (f0 * t + 3.0 * torch.sin(2 * math.pi * 1.5 * t))
    wav = sum(0.3 / k * torch.sin(k * phase) for k in range(1, 6))
    wav = wav * (0.6 + 0.4 * torch.sin(2 * math.pi * 2.0 * t)) + 0.01 * torch.randn(n, generator=gen, dtype=torch.float64)
    return wav.to(torch.float32)


@pytest.fixture(scope="module")
def tiny_folder(session_tmp: Path) -> Path:
    return write_random_speech_tokenizer(session_tmp / "speech_tokenizer_tiny", size="tiny", seed=0)


def _run_parity(folder: Path, decode_cases: dict, encode_cases: dict, workdir: Path):
    """Run the oracle on all cases at once; returns (inputs, job, outputs, info)."""
    inputs: dict[str, torch.Tensor] = {}
    job: dict = {"folder": str(folder), "inputs": str(workdir / "codec-inputs.safetensors"), "decode": {}, "encode": {}}
    for kind, cases in (("decode", decode_cases), ("encode", encode_cases)):
        for case, items in cases.items():
            job[kind][case] = []
            for i, item in enumerate(items):
                inputs[f"{kind}.{case}.{i}"] = item
                job[kind][case].append(f"{kind}.{case}.{i}")
    workdir.mkdir(parents=True, exist_ok=True)
    save_file(inputs, job["inputs"])
    outputs, info = run_oracle("codec", job, workdir / "oracle", keep=("encode.*",))  # codes: a failure counts them
    return inputs, job, outputs, info


def _assert_same(tokenizer: SpeechTokenizer, inputs, job, outputs) -> None:
    for case, keys in job["decode"].items():
        codes = [inputs[k] for k in keys]
        wavs = tokenizer.decode(codes)
        assert len(wavs) == len(codes)
        for i, (wav, c) in enumerate(zip(wavs, codes)):
            ref = outputs[f"decode.{case}.{i}"]
            assert wav.dtype == torch.float32 and wav.shape == (c.shape[0] * SPF,)
            assert wav.shape == ref.shape, (case, wav.shape, ref.shape)
            assert same(wav, ref), f"decode {case}[{i}]: {_how_far(wav, ref)}"
    for case, keys in job["encode"].items():
        wavs = [inputs[k] for k in keys]
        codes = tokenizer.encode_list(wavs)
        for i, (c, w) in enumerate(zip(codes, wavs)):
            ref = outputs[f"encode.{case}.{i}"]
            assert c.shape == (math.ceil(w.shape[0] / SPF), 16)
            assert c.shape == ref.shape, (case, c.shape, ref.shape)
            assert same(c, ref), f"encode {case}[{i}]: {(c != ref).sum().item()} codes differ"


def _how_far(wav: torch.Tensor, ref) -> str:
    """How koe's waveform differs from upstream's, for a failure's message (a recorded digest keeps
    only its first values)."""
    if isinstance(ref, torch.Tensor):
        return f"max |diff| {(wav - ref).abs().max().item():.3g}"
    return f"first samples {wav[: len(ref.head)].tolist()}, upstream's {list(ref.head)}"


def _only(job: dict, kind: str, case: str) -> dict:
    return {"decode": {}, "encode": {}, kind: {case: job[kind][case]}}


@pytest.fixture(scope="module")
def parity(tiny_folder: Path, session_tmp: Path):
    """One oracle run covering every decode and encode case on the tiny codec."""
    gen = torch.Generator().manual_seed(1234)
    decode_cases = {
        "one_frame": [_codes(gen, 1)],
        "few_frames": [_codes(gen, 7)],
        "window": [_codes(gen, 72)],  # first length with an explicit sliding-window mask
        "long": [_codes(gen, 650)],  # three chunks: 0-300, 300-600 (+25 context), 600-650 (+25)
        "batch": [_codes(gen, 40), _codes(gen, 23)],  # the shorter one is padded with -1
        "batch_long": [_codes(gen, 310), _codes(gen, 90)],
    }
    encode_cases = {
        "single": [_signal(gen, 3.0, 140.0)],
        "odd_length": [_signal(gen, 1.23, 210.0)],  # not a whole number of frames
        "batch": [_signal(gen, 2.5, 120.0), _signal(gen, 1.1, 230.0)],
    }
    return _run_parity(tiny_folder, decode_cases, encode_cases, session_tmp / "codec-tiny")


@pytest.fixture(scope="module")
def tokenizer(tiny_folder: Path) -> SpeechTokenizer:
    return SpeechTokenizer.from_folder(tiny_folder, device="cpu", dtype=torch.float32)


@pytest.mark.oracle
def test_upstream_loads_random_weights_without_missing_or_unexpected_keys(parity):
    _, _, _, info = parity
    loading = info["loading"]
    assert loading["missing_keys"] == [] and loading["unexpected_keys"] == [] and loading["mismatched_keys"] == []
    assert info["decoder_attn_implementation"] == "sdpa"
    assert info["encoder_attention_class"] == "MimiSdpaAttention"


@pytest.mark.oracle
@pytest.mark.parametrize("case", ["one_frame", "few_frames", "window", "long", "batch", "batch_long"])
def test_decode_matches_upstream(parity, tokenizer, case):
    inputs, job, outputs, _ = parity
    _assert_same(tokenizer, inputs, _only(job, "decode", case), outputs)


@pytest.mark.oracle
@pytest.mark.parametrize("case", ["single", "odd_length", "batch"])
def test_encode_matches_upstream(parity, tokenizer, case):
    inputs, job, outputs, _ = parity
    _assert_same(tokenizer, inputs, _only(job, "encode", case), outputs)


@pytest.mark.oracle
@pytest.mark.slow
def test_real_size_codec_matches_upstream(session_tmp):
    """Released sizes (random weights): other kernel shapes and paths than the tiny codec's. Short
    inputs (the decoder at this size takes ~0.17 s a frame on one core, each side): the lengths'
    own paths (the sliding window's mask, chunks) are the tiny codec's cases above."""
    folder = write_random_speech_tokenizer(session_tmp / "speech_tokenizer_real", size="real", seed=1)
    gen = torch.Generator().manual_seed(99)
    decode_cases = {"one_frame": [_codes(gen, 1)], "batch": [_codes(gen, 24), _codes(gen, 9)]}
    encode_cases = {"batch": [_signal(gen, 2.0, 150.0), _signal(gen, 0.9, 220.0)]}
    inputs, job, outputs, info = _run_parity(folder, decode_cases, encode_cases, session_tmp / "codec-real")
    assert info["loading"]["missing_keys"] == [] and info["loading"]["unexpected_keys"] == []
    _assert_same(SpeechTokenizer.from_folder(folder), inputs, job, outputs)


def test_chunked_decode_is_a_sequence_of_decode_chunks(tokenizer):
    """The one-shot decode equals decode_chunk over upstream's plan (what a streamer will replay)."""
    gen = torch.Generator().manual_seed(7)
    codes = _codes(gen, 340)
    whole = tokenizer.decode(codes)[0]
    pieces = [tokenizer.decode_chunk(codes[None, start - ctx : end], ctx)[0] for start, end, ctx in chunk_plan(codes.shape[0])]
    assert torch.equal(torch.cat(pieces), whole)
    assert chunk_plan(650) == [(0, 300, 0), (300, 600, 25), (600, 650, 25)]


def test_padding_frames_count_only_first_codebook(tokenizer):
    """Upstream's length rule: frames whose first code is > -1, times 1920 samples."""
    gen = torch.Generator().manual_seed(3)
    batch = torch.full((2, 6, 16), -1, dtype=torch.int64)
    batch[0] = _codes(gen, 6)
    batch[1, :4] = _codes(gen, 4)
    wavs = tokenizer.decode(batch)
    assert [w.shape[0] for w in wavs] == [6 * SPF, 4 * SPF]


# ---------------------------------------------------------------- strict loading
def _copy(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder, dest)
    return dest


def test_missing_key_is_an_error(tiny_folder, tmp_path):
    dest = _copy(tiny_folder, tmp_path / "st")
    weights = load_file(str(dest / "model.safetensors"))
    del weights["decoder.pre_conv.conv.bias"]
    save_file(weights, str(dest / "model.safetensors"))
    with pytest.raises(WeightsError, match="missing tensors.*decoder.pre_conv.conv.bias"):
        SpeechTokenizer.from_folder(dest)


def test_unexpected_key_is_an_error(tiny_folder, tmp_path):
    dest = _copy(tiny_folder, tmp_path / "st")
    weights = load_file(str(dest / "model.safetensors"))
    weights["decoder.extra.weight"] = torch.zeros(3)
    save_file(weights, str(dest / "model.safetensors"))
    with pytest.raises(WeightsError, match="unexpected tensors.*decoder.extra.weight"):
        SpeechTokenizer.from_folder(dest)


def test_wrong_shape_is_an_error(tiny_folder, tmp_path):
    dest = _copy(tiny_folder, tmp_path / "st")
    weights = load_file(str(dest / "model.safetensors"))
    key = "encoder.encoder_transformer.layers.0.mlp.fc1.weight"
    weights[key] = torch.zeros(weights[key].shape[0] + 1, weights[key].shape[1])
    save_file(weights, str(dest / "model.safetensors"))
    with pytest.raises(WeightsError, match="tensor " + key.replace(".", r"\.") + " has shape"):
        SpeechTokenizer.from_folder(dest)


def test_unknown_tokenizer_type_is_an_error(tiny_folder, tmp_path):
    dest = _copy(tiny_folder, tmp_path / "st")
    raw = json.loads((dest / "config.json").read_text())
    raw["model_type"] = "qwen3_tts_tokenizer_25hz"
    (dest / "config.json").write_text(json.dumps(raw))
    with pytest.raises(CodecConfigError, match="qwen3_tts_tokenizer_25hz"):
        SpeechTokenizer.from_folder(dest)


def test_real_size_config_matches_release_facts():
    from koe.engines.qwen3_tts.codec.random_weights import speech_tokenizer_config_dict

    cfg = SpeechTokenizerConfig.from_dict(speech_tokenizer_config_dict("real"))
    assert cfg.decoder.total_upsample == 1920 and cfg.decoder.head_dim == 64
    assert cfg.encoder.resolved_frame_rate == 12.5 and cfg.encoder.downsample_kernel_size == 4
    assert cfg.encoder_valid_num_quantizers == 16 and cfg.encoder.num_quantizers == 32
