"""koe's ECAPA-TDNN speaker encoder and embedding extraction against upstream, bit for bit.

The test writes a random state dict (koe's encoder built after a fixed seed); the oracle loads it
strictly into upstream's `Qwen3TTSSpeakerEncoder` and embeds the audio; koe's encoder with the same
state dict must give the identical embedding.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import load_file, save_file
from test_audio import speechlike

from koe.audio.errors import AudioError
from koe.audio.io import load_audio
from koe.audio.resample import resample
from koe.engines.qwen3_tts.speaker import extract_speaker_embedding
from koe.nn.speaker import SpeakerEncoder, SpeakerEncoderConfig

TINY = {
    "mel_dim": 128,
    "enc_dim": 32,
    "enc_channels": [16, 16, 16, 16, 48],
    "enc_kernel_sizes": [5, 3, 3, 3, 1],
    "enc_dilations": [1, 2, 3, 4, 1],
    "enc_attention_channels": 8,
    "enc_res2net_scale": 4,
    "enc_se_channels": 8,
    "sample_rate": 24000,
}
REAL_06B = {
    "mel_dim": 128,
    "enc_dim": 1024,
    "enc_channels": [512, 512, 512, 512, 1536],
    "enc_kernel_sizes": [5, 3, 3, 3, 1],
    "enc_dilations": [1, 2, 3, 4, 1],
    "enc_attention_channels": 128,
    "enc_res2net_scale": 8,
    "enc_se_channels": 128,
    "sample_rate": 24000,
}
REAL_17B = {**REAL_06B, "enc_dim": 2048}

# name -> (config, seed, source): source is ("npy", seconds, seed) for 24 kHz audio, or a file key
CASES = {
    "tiny_npy": (TINY, 1, ("npy", 3.0, 40)),
    "real06_npy": (REAL_06B, 2, ("npy", 4.0, 41)),
    "tiny_wav16k": (TINY, 3, "mono16k.wav"),
    "real17_flac44k": (REAL_17B, 4, "stereo44k.flac"),
    "real06_wav24k": (REAL_06B, 5, "stereo24k.wav"),
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> tuple[dict[str, torch.Tensor], Path, dict]:
    d = tmp_path_factory.mktemp("speaker-oracle")
    files = {
        "mono16k.wav": d / "mono16k.wav",
        "stereo44k.flac": d / "stereo44k.flac",
        "stereo24k.wav": d / "stereo24k.wav",
    }
    sf.write(files["mono16k.wav"], speechlike(3.0, 16000, seed=50), 16000, subtype="PCM_16")
    sf.write(files["stereo44k.flac"], speechlike(3.0, 44100, seed=51, channels=2), 44100, subtype="PCM_16")
    sf.write(files["stereo24k.wav"], speechlike(2.5, 24000, seed=52, channels=2), 24000, subtype="PCM_16")
    tasks, sources = [], {}
    for name, (config, seed, source) in CASES.items():
        torch.manual_seed(seed)
        save_file(SpeakerEncoder(SpeakerEncoderConfig.from_dict(config)).state_dict(), str(d / f"{name}.safetensors"))
        task = {"kind": "encoder", "name": name, "config": config, "weights": str(d / f"{name}.safetensors")}
        if isinstance(source, tuple):
            audio = speechlike(source[1], 24000, seed=source[2])
            np.save(d / f"{name}.npy", audio)
            task["npy"] = str(d / f"{name}.npy")
            sources[name] = audio
        else:
            task["path"] = str(files[source])
            sources[name] = files[source]
        tasks.append(task)
    tensors, _ = run_oracle("speaker", {"tasks": tasks}, d, keep=("*.emb",))  # a failure says how far
    return tensors, d, sources


def _koe_encoder(d: Path, name: str, config: dict) -> SpeakerEncoder:
    encoder = SpeakerEncoder(SpeakerEncoderConfig.from_dict(config)).eval()
    encoder.load_state_dict(load_file(str(d / f"{name}.safetensors")), strict=True)
    return encoder


@pytest.mark.oracle
@pytest.mark.parametrize("name", list(CASES))
def test_embedding_bit_exact(oracle, name):
    tensors, d, sources = oracle
    config, _, source = CASES[name]
    encoder = _koe_encoder(d, name, config)
    if isinstance(source, tuple):
        audio = sources[name]
    else:  # upstream's whole front end: load, mono, resample to 24 kHz
        wav, sr = load_audio(sources[name])
        audio = resample(wav, sr, 24000) if sr != 24000 else wav
        expected_audio = tensors[f"{name}.audio24k"]
        assert audio.dtype == np.float32 and same(audio, expected_audio)
    emb = extract_speaker_embedding(encoder, audio)
    expected = tensors[f"{name}.emb"]
    assert emb.shape == expected.shape == (config["enc_dim"],) and emb.dtype == expected.dtype
    assert torch.isfinite(emb).all() and emb.abs().max() > 0
    if not same(emb, expected):
        raise AssertionError(f"embedding differs: max abs diff {(emb - expected).abs().max().item():.3e}")


def test_state_dict_names():
    encoder = SpeakerEncoder(SpeakerEncoderConfig.from_dict(REAL_06B))
    keys = set(encoder.state_dict())
    for key in [
        "blocks.0.conv.weight",
        "blocks.1.tdnn1.conv.weight",
        "blocks.1.res2net_block.blocks.6.conv.bias",
        "blocks.3.se_block.conv1.weight",
        "blocks.3.se_block.conv2.bias",
        "blocks.3.tdnn2.conv.weight",
        "mfa.conv.weight",
        "asp.tdnn.conv.weight",
        "asp.conv.bias",
        "fc.weight",
        "fc.bias",
    ]:
        assert key in keys, key
    assert len(keys) == 2 * (1 + 3 * (1 + 7 + 1 + 2) + 1 + 2 + 1)
    assert encoder.state_dict()["fc.weight"].shape == (1024, 3072, 1)


def test_config_from_dict_validation():
    cfg = SpeakerEncoderConfig.from_dict({**REAL_17B, "model_type": "ignored"})
    assert cfg.enc_dim == 2048 and cfg.enc_channels == (512, 512, 512, 512, 1536)
    assert SpeakerEncoderConfig.from_dict({}) == SpeakerEncoderConfig()
    bad = [
        {"enc_channels": [512, 512, 1536], "enc_kernel_sizes": [5, 3], "enc_dilations": [1, 2, 1]},
        {"enc_dim": 0},
        {"mel_dim": "128"},
        {"enc_channels": "512"},
        {"enc_channels": [512, 500, 512, 512, 1536]},  # not divisible by res2net scale 8
        {"enc_dim": True},
    ]
    for overrides in bad:
        with pytest.raises(ValueError):
            SpeakerEncoderConfig.from_dict({**REAL_06B, **overrides})
    with pytest.raises(ValueError):
        SpeakerEncoderConfig.from_dict([1, 2])  # type: ignore[arg-type]


def test_too_short_or_wrong_audio_raises():
    encoder = SpeakerEncoder(SpeakerEncoderConfig.from_dict(TINY)).eval()
    with pytest.raises(AudioError, match="too short"):
        extract_speaker_embedding(encoder, speechlike(0.03, 24000))
    with pytest.raises(AudioError, match="too short"):
        extract_speaker_embedding(encoder, speechlike(1200 / 24000, 24000))
    with pytest.raises(AudioError, match="float32 mono"):
        extract_speaker_embedding(encoder, speechlike(1.0, 24000).astype(np.float64))
    assert extract_speaker_embedding(encoder, speechlike(1280 / 24000, 24000)).shape == (32,)
