"""CosyVoice's ONNX parts, native in koe, against onnxruntime running the same graphs as upstream's
frontend runs them (`_extract_spk_embedding`, `_extract_speech_token` of CosyVoice at ace7c47, one
thread), on random-weight graphs in the released structure (fixtures_onnx): CAM++ and the S3
speech tokenizer v2 and v3.

What holds: the features upstream computes (Kaldi fbank less its mean; Whisper's 128-bin log-mel;
the clips read, channel-averaged and resampled to 16 kHz) equal koe's bit for bit; the token ids
equal; the speaker embeddings differ only by float rounding (onnxruntime's kernels are not torch's:
measured ≤ 3e-7 on embeddings of magnitude ~0.8, asserted < 1e-5); clips over 30 s are refused by
both. At the released sizes (measured once, not here: 1.5 GB of graphs) the same held on three
clips: tokens equal for v2 and v3, embeddings within 1.8e-7."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.cosyvoice.campplus import load_campplus
from koe.engines.cosyvoice.features import ClipError, clip_16k, speaker_fbank, tokenizer_log_mel
from koe.engines.cosyvoice.fixtures_onnx import write_campplus, write_speech_tokenizer
from koe.engines.cosyvoice.speech_tokenizer import load_speech_tokenizer

pytestmark = pytest.mark.oracle

EMBEDDING_TOLERANCE = 1e-5


def _speechy(seconds: float, sr: int, channels: int = 1, seed: int = 0, level: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 130 + 30 * np.sin(2 * np.pi * 0.9 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 6))
    x = x * (0.5 + 0.5 * np.sin(2 * np.pi * 2.7 * t)) + 0.03 * rng.standard_normal(len(t))
    x = (level * x / np.max(np.abs(x))).astype(np.float32)
    return np.stack([x, 0.7 * x + 0.01], axis=1) if channels == 2 else x


CLIPS = {  # name: (seconds, rate, channels, subtype)
    "mono16": (3.2, 16000, 1, "PCM_16"),
    "stereo24": (2.05, 24000, 2, "FLOAT"),
    "mono44": (5.3, 44100, 1, "FLOAT"),
    "quiet48": (1.0, 48000, 1, "PCM_24"),
    "short16": (0.5, 16000, 1, "FLOAT"),  # under one 100-frame segment after CAM++'s stride
    "long22": (12.4, 22050, 1, "PCM_16"),  # several segments and a partial one
    "over30": (30.5, 16000, 1, "PCM_16"),  # the tokenizer refuses it, the embedding takes it
}
LOW_RATE = (1.0, 8000, 1, "PCM_16")  # refused by both parts: upstream's load_wav wants 16 kHz or more


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    d = tmp_path_factory.mktemp("cosyvoice-onnx")
    graphs = {
        "campplus": write_campplus(d / "campplus.onnx", "tiny", seed=11),
        "v2": write_speech_tokenizer(d / "speech_tokenizer_v2.onnx", 2, "tiny", seed=12),
        "v3": write_speech_tokenizer(d / "speech_tokenizer_v3.onnx", 3, "tiny", seed=13),
    }
    clips = []
    for i, (name, (seconds, sr, channels, subtype)) in enumerate([*CLIPS.items(), ("low8", LOW_RATE)]):
        path = d / f"{name}.wav"
        sf.write(path, _speechy(seconds, sr, channels, seed=i, level=0.02 if name.startswith("quiet") else 0.3), sr, subtype=subtype)
        clips.append(str(path))
    g = torch.Generator().manual_seed(5)
    feats = {"fbank_0": torch.randn(1, 317, 80, generator=g), "fbank_1": torch.randn(1, 90, 80, generator=g)}
    feats |= {"mel_0": torch.randn(1, 128, 411, generator=g) * 0.5, "mel_1": torch.randn(1, 128, 37, generator=g) * 0.5}
    save_file(feats, str(d / "feats.safetensors"))
    job = {
        "campplus": str(graphs["campplus"]),
        "tokenizers": {"v2": str(graphs["v2"]), "v3": str(graphs["v3"])},
        "clips": clips,
        "feats": str(d / "feats.safetensors"),
    }
    tensors, info = run_oracle("onnx_frontend", job, d / "work", family="cosyvoice", keep=("embedding_*", "emb_feat_*"))
    models = {"campplus": load_campplus(graphs["campplus"]), "v2": load_speech_tokenizer(graphs["v2"]), "v3": load_speech_tokenizer(graphs["v3"])}
    return {"tensors": tensors, "info": info, "clips": clips, "feats": feats, "models": models}


def _clip(path: str) -> torch.Tensor:
    samples, sr = sf.read(path, dtype="float32")
    return clip_16k(samples, sr)


def test_graph_inputs_and_outputs_as_upstream_feeds_them(oracle):
    graphs = oracle["info"]["graphs"]
    assert graphs["campplus"]["inputs"] == [["input", "tensor(float)", ["batch", "frames", 80]]]
    assert graphs["campplus"]["outputs"] == [["output", "tensor(float)", ["batch", 192]]]
    for v in ("v2", "v3"):
        assert graphs[v]["inputs"] == [["feats", "tensor(float)", ["batch", 128, "frames"]], ["feats_length", "tensor(int32)", ["batch"]]]
        assert graphs[v]["outputs"] == [["indices", "tensor(int32)", ["batch", "tokens"]]]


@pytest.mark.parametrize("i", range(len(CLIPS)), ids=list(CLIPS))
def test_features_bit_equal(oracle, i):
    up = oracle["tensors"]
    speech = _clip(oracle["clips"][i])
    fbank = speaker_fbank(speech)
    assert fbank.shape[0] == 1 and same(fbank[0], up[f"fbank_up_{i}"])
    if f"mel_up_{i}" in up:
        assert same(tokenizer_log_mel(speech), up[f"mel_up_{i}"])
    else:
        with pytest.raises(ClipError, match="at most 30 s"):
            tokenizer_log_mel(speech)


@pytest.mark.parametrize("i", range(len(CLIPS)), ids=list(CLIPS))
def test_speaker_embedding(oracle, i):
    want = oracle["tensors"][f"embedding_{i}"]
    got = oracle["models"]["campplus"].embed(_clip(oracle["clips"][i]))
    assert got.shape == want.shape == (1, 192) and got.dtype == want.dtype == torch.float32
    assert (got - want).abs().max().item() < EMBEDDING_TOLERANCE


@pytest.mark.parametrize("version", ["v2", "v3"])
@pytest.mark.parametrize("i", range(len(CLIPS)), ids=list(CLIPS))
def test_speech_tokens_equal(oracle, version, i):
    tensors, info = oracle["tensors"], oracle["info"]
    model = oracle["models"][version]
    speech = _clip(oracle["clips"][i])
    if f"tokens_{version}_{i}" not in tensors:  # upstream asserted: the clip is over 30 s
        assert "longer than 30s" in info["errors"][f"{version}_{i}"]
        with pytest.raises(ClipError, match="at most 30 s"):
            model.tokenize(speech)
        return
    want = tensors[f"tokens_{version}_{i}"]
    got = model.tokenize(speech)
    assert got.shape == want.shape == (1, -(-(speech.shape[1] // 160) // 4))  # 25 Hz: a token per 4 mel frames
    assert same(got, want)  # int32, as upstream's
    assert len(set(got.flatten().tolist())) > 5  # the fixture's ids spread over the codebook


def test_graphs_on_given_features(oracle):
    tensors, feats, models = oracle["tensors"], oracle["feats"], oracle["models"]
    with torch.inference_mode():
        for i in (0, 1):
            emb = models["campplus"](feats[f"fbank_{i}"])
            assert (emb - tensors[f"emb_feat_{i}"]).abs().max().item() < EMBEDDING_TOLERANCE
            mel = feats[f"mel_{i}"]
            for v in ("v2", "v3"):
                ids = models[v](mel, torch.tensor([mel.shape[2]], dtype=torch.int32))
                assert same(ids.long(), tensors[f"ids_feat_{v}_{i}"])


def test_clip_under_16k_refused_by_both(oracle):
    i = len(CLIPS)
    assert "must be greater than" in oracle["info"]["errors"][f"load_{i}"]
    assert f"embedding_{i}" not in oracle["tensors"] and f"tokens_v2_{i}" not in oracle["tensors"]
    samples, sr = sf.read(oracle["clips"][i], dtype="float32")
    for model in (oracle["models"]["campplus"].embed_clip, oracle["models"]["v2"].tokenize_clip):
        with pytest.raises(ClipError, match="8000 Hz; CosyVoice needs at least 16000 Hz"):
            model(samples, sr)
