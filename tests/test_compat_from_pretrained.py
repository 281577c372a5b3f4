"""The drop-ins take the released hub ids: read from the Hugging Face cache they give the same audio,
bit for bit and with the same seed, as the same files loaded from a folder.

`Qwen3TTSModel.from_pretrained("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")`, `F5TTS()` (the release
`SWivid/F5-TTS/F5TTS_v1_Base`: a checkpoint repo's subfolder + the Vocos repo, assembled into the
store) and `VoxCPM.from_pretrained("openbmb/VoxCPM2")`, each from a temp `HF_HUB_CACHE` written
in huggingface_hub's layout (tests/hf_cache.py), offline (`HF_HUB_OFFLINE=1`: nothing may reach
the network), with random-weight fixtures in the released layouts.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml
from fixtures_models import model_folder
from hf_cache import cache_repo, folder_files

from koe.engines.f5_tts import config as f5_config
from koe.engines.registry import write_fixture
from koe.service.errors import Unavailable

QWEN = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
REF_TEXT = "Some call me nature, others call me mother nature."


@pytest.fixture
def hf(tmp_path, monkeypatch):
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    for name in ("HF_HOME", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT") + tuple(k for k in os.environ if k.startswith("KOE_")):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KOE_HOME", str(tmp_path / "home"))
    return cache


def test_qwen3_tts_from_pretrained_hub_id_reads_the_cache(hf, session_tmp, tmp_path, monkeypatch):
    from koe.compat.qwen_tts import Qwen3TTSModel

    folder = model_folder(session_tmp, "custom_voice")
    with pytest.raises(Unavailable, match=f"koe models pull {QWEN}"):
        Qwen3TTSModel.from_pretrained(QWEN, device_map="cpu")
    snapshot = cache_repo(hf, QWEN, folder_files(folder))
    call = {"text": "Hello world, this is koe speaking.", "speaker": "ryan", "language": "english", "max_new_tokens": 12}
    cached = Qwen3TTSModel.from_pretrained(QWEN, device_map="cpu", dtype=torch.float32)
    assert cached.engine.folder == snapshot  # used in place: no copy
    torch.manual_seed(7)
    got, sr = cached.generate_custom_voice(**call)
    direct = Qwen3TTSModel.from_pretrained(str(folder), device_map="cpu", dtype=torch.float32)
    torch.manual_seed(7)
    expected, sr2 = direct.generate_custom_voice(**call)
    assert sr == sr2 and len(got) == 1 and got[0].size > 0 and np.array_equal(got[0], expected[0])
    elsewhere = tmp_path / "elsewhere"  # upstream's cache_dir= is read instead of HF_HUB_CACHE
    cache_repo(elsewhere, QWEN, folder_files(folder))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    assert (
        Qwen3TTSModel.from_pretrained(QWEN, cache_dir=str(elsewhere), device_map="cpu").engine.folder.parents[1]
        == elsewhere / "models--Qwen--Qwen3-TTS-12Hz-0.6B-CustomVoice"
    )


@pytest.fixture
def f5(session_tmp, monkeypatch):
    """A tiny F5-TTS fixture; its arch stands in for the released F5TTS_v1_Base on both sides."""
    folder = session_tmp / "f5-compat-pretrained"
    if not folder.is_dir():
        write_fixture(folder, family="f5_tts", variant="F5TTS_v1_Base")
    monkeypatch.setitem(f5_config.ARCHS, "F5TTS_v1_Base", yaml.safe_load((folder / "config.yaml").read_text())["model"])
    return folder


def _clip(path, seconds=3.0, sr=24000):
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    sf.write(path, x.astype(np.float32), sr, subtype="PCM_16")
    return str(path)


def test_f5_tts_default_constructor_reads_the_release_from_the_cache(hf, f5, tmp_path):
    from koe.compat.f5_tts import F5TTS

    with pytest.raises(Unavailable, match="koe models pull SWivid/F5-TTS/F5TTS_v1_Base"):
        F5TTS(device="cpu")
    ckpt = next(f5.glob("model_*.safetensors"))
    cache_repo(hf, "SWivid/F5-TTS", {f"F5TTS_v1_Base/{ckpt.name}": ckpt.read_bytes(), "F5TTS_v1_Base/vocab.txt": (f5 / "vocab.txt").read_bytes()})
    cache_repo(hf, "charactr/vocos-mel-24khz", folder_files(f5 / "vocos"))
    ref = _clip(tmp_path / "ref.wav")
    cached = F5TTS(device="cpu")
    wav, sr, spec = cached.infer(ref, REF_TEXT, "A single batch of text.", seed=5, nfe_step=6)
    direct = F5TTS(ckpt_file=str(ckpt), vocab_file=str(f5 / "vocab.txt"), vocoder_local_path=str(f5 / "vocos"), device="cpu")
    wav2, sr2, spec2 = direct.infer(ref, REF_TEXT, "A single batch of text.", seed=5, nfe_step=6)
    assert sr == sr2 == 24000 and wav.size > 0 and np.array_equal(wav, wav2) and np.array_equal(spec, spec2)
    store = tmp_path / "home" / "models" / "F5TTS_v1_Base"  # assembled once into the store, found there next time
    assert (store / "config.yaml").is_file() and (store / "vocos" / "pytorch_model.bin").is_file()
    assert F5TTS(device="cpu").engine.folder == store
    with_ckpt = F5TTS(ckpt_file=str(ckpt), vocab_file=str(f5 / "vocab.txt"), device="cpu")  # its vocoder from the cache
    assert np.array_equal(with_ckpt.infer(ref, REF_TEXT, "A single batch of text.", seed=5, nfe_step=6)[0], wav)


def test_voxcpm_from_pretrained_hub_id_reads_the_cache(hf, session_tmp):
    from koe.compat.voxcpm import VoxCPM

    folder = session_tmp / "voxcpm-compat-pretrained"
    if not folder.is_dir():
        write_fixture(folder, family="voxcpm", variant="VoxCPM2")
    with pytest.raises(Unavailable, match="koe models pull openbmb/VoxCPM2"):
        VoxCPM.from_pretrained("openbmb/VoxCPM2", load_denoiser=False, device="cpu")
    snapshot = cache_repo(hf, "openbmb/VoxCPM2", folder_files(folder))
    cached = VoxCPM.from_pretrained("openbmb/VoxCPM2", load_denoiser=False, optimize=False, device="cpu")
    assert cached.engine.folder == snapshot
    direct = VoxCPM(str(folder), zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")
    call = {"text": "Hello from the cache.", "inference_timesteps": 4, "max_len": 8, "retry_badcase": False}
    torch.manual_seed(3)
    got = cached.generate(**call)
    torch.manual_seed(3)
    expected = direct.generate(**call)
    assert got.dtype == np.float32 and got.size > 0 and np.array_equal(got, expected)
    with pytest.raises(Unavailable, match="local_files_only=True"):
        VoxCPM.from_pretrained("openbmb/VoxCPM1.5", load_denoiser=False, local_files_only=True)
