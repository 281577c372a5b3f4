"""koe's audio front end against upstream qwen-tts / librosa, bit for bit, plus its error handling."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

from koe.audio.errors import AudioError
from koe.audio.io import load_audio, write_wav
from koe.audio.mel import mel_filterbank, mel_spectrogram
from koe.audio.resample import resample


def speechlike(seconds: float, sr: int, seed: int = 0, channels: int = 1) -> np.ndarray:
    """Voiced-speech-like float32 test signal: a gliding harmonic source with syllable-rate
    amplitude modulation, formant-ish harmonic weights and a little noise; `(n,)` or `(n, channels)`."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sr)
    t = np.arange(n) / sr
    out = []
    for c in range(channels):
        f0 = 110 + 30 * c + 25 * np.sin(2 * np.pi * 0.7 * t + c) + 10 * np.sin(2 * np.pi * 3.1 * t)
        phase = 2 * np.pi * np.cumsum(f0) / sr
        voice = np.zeros(n)
        for h in range(1, 30):
            if h * f0.max() >= sr / 2:
                break
            formant = np.exp(-(((h * 120 - 700) / 400) ** 2)) + 0.5 * np.exp(-(((h * 120 - 1800) / 600) ** 2)) + 0.05
            voice += formant / h**0.5 * np.sin(h * phase + rng.uniform(0, 2 * np.pi))
        envelope = 0.5 * (1 + np.sin(2 * np.pi * 4.0 * t + c)) ** 2
        sig = envelope * voice + 0.01 * rng.standard_normal(n)
        out.append(0.25 * sig / np.abs(sig).max())
    y = np.stack(out, axis=1).astype(np.float32)
    return y[:, 0].copy() if channels == 1 else y


def _encode_av(path: Path, x: np.ndarray, sr: int, fmt: str, codec: str) -> None:
    """Write (n, channels) float32 audio with PyAV (for containers libsndfile can't write)."""
    layout = "stereo" if x.shape[1] == 2 else "mono"
    with av.open(str(path), "w", format=fmt) as container:
        stream = container.add_stream(codec, rate=sr, layout=layout)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(x.T), format="fltp", layout=layout)
        frame.sample_rate = sr
        target = stream.codec_context.codec.audio_formats[0].name
        for converted in av.AudioResampler(format=target, layout=layout, rate=sr).resample(frame):
            for packet in stream.encode(converted):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("audio-files")
    paths = {
        "stereo44k.flac": d / "stereo44k.flac",
        "mono16k.wav": d / "mono16k.wav",
        "stereo44k.mp3": d / "stereo44k.mp3",
        "stereo24k_float.wav": d / "stereo24k_float.wav",
        "mono48k.opus": d / "mono48k.opus",
        "six48k.wav": d / "six48k.wav",
    }
    sf.write(paths["stereo44k.flac"], speechlike(2.0, 44100, seed=1, channels=2), 44100, subtype="PCM_16")
    sf.write(paths["mono16k.wav"], speechlike(2.0, 16000, seed=2), 16000, subtype="PCM_16")
    sf.write(paths["stereo44k.mp3"], speechlike(2.0, 44100, seed=3, channels=2), 44100, format="MP3")
    sf.write(paths["stereo24k_float.wav"], speechlike(1.5, 24000, seed=4, channels=2), 24000, subtype="FLOAT")
    sf.write(paths["mono48k.opus"], speechlike(1.5, 48000, seed=5), 48000, format="OGG", subtype="OPUS")
    sf.write(paths["six48k.wav"], speechlike(1.0, 48000, seed=6, channels=6), 48000, subtype="PCM_24")
    return paths


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, files) -> tuple[dict[str, torch.Tensor], dict, dict[str, np.ndarray]]:
    """One oracle run for the whole module: filterbanks, resampling, loading and mels."""
    d = tmp_path_factory.mktemp("audio-oracle")
    inputs = {
        "rs16k": speechlike(3.0, 16000, seed=10),
        "rs44k": speechlike(3.0, 44100, seed=11),
        "rs48k": speechlike(1.0, 48000, seed=12),
        "rs22k_odd": speechlike(0.5, 22050, seed=13)[: 11025 - 7],
        "mel24k": speechlike(2.5, 24000, seed=14),
        "mel24k_short": speechlike(0.06, 24000, seed=15),
    }
    for key, arr in inputs.items():
        np.save(d / f"{key}.npy", arr)
    tasks = [
        {"kind": "mel_filterbank", "name": "fb_spk", "sr": 24000, "n_fft": 1024, "n_mels": 128, "fmin": 0, "fmax": 12000},
        {"kind": "mel_filterbank", "name": "fb_16k", "sr": 16000, "n_fft": 512, "n_mels": 80, "fmin": 20, "fmax": 7600},
        {"kind": "mel_filterbank", "name": "fb_22k", "sr": 22050, "n_fft": 2048, "n_mels": 128, "fmin": 0, "fmax": None},
    ]
    for key, sr in [("rs16k", 16000), ("rs44k", 44100), ("rs48k", 48000), ("rs22k_odd", 22050)]:
        tasks.append({"kind": "resample", "name": key, "npy": str(d / f"{key}.npy"), "orig_sr": sr, "target_sr": 24000})
    for key, path in files.items():
        tasks.append({"kind": "load", "name": key, "path": str(path)})
    for key in ("mel24k", "mel24k_short"):
        tasks.append({"kind": "mel", "name": key, "npy": str(d / f"{key}.npy")})
    tensors, info = run_oracle("speaker", {"tasks": tasks}, d)
    return tensors, info, inputs


def _assert_bits(actual: torch.Tensor | np.ndarray, expected) -> None:
    """`actual` equals the oracle's `expected` (a tensor, or a recorded run's digest) bit for bit."""
    actual = torch.as_tensor(np.asarray(actual)) if isinstance(actual, np.ndarray) else actual
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape, expected.dtype, expected.shape)
    if not same(actual, expected):
        if not isinstance(expected, torch.Tensor):  # a digest keeps only its first values
            raise AssertionError(f"not bit-equal: first values {actual.reshape(-1)[: len(expected.head)].tolist()}, upstream's {list(expected.head)}")
        diff = (actual.double() - expected.double()).abs().max().item()
        raise AssertionError(f"not bit-equal: max abs diff {diff:.3e}")


# ---------------------------------------------------------------------------------------------
# parity with upstream


@pytest.mark.oracle
@pytest.mark.parametrize(
    "name,args",
    [("fb_spk", (24000, 1024, 128, 0, 12000)), ("fb_16k", (16000, 512, 80, 20, 7600)), ("fb_22k", (22050, 2048, 128, 0, None))],
)
def test_mel_filterbank_bits(oracle, name, args):
    tensors, _, _ = oracle
    _assert_bits(np.ascontiguousarray(mel_filterbank(*args)), tensors[f"{name}.fb"])


@pytest.mark.oracle
@pytest.mark.parametrize("name,sr", [("rs16k", 16000), ("rs44k", 44100), ("rs48k", 48000), ("rs22k_odd", 22050)])
def test_resample_matches_librosa(oracle, name, sr):
    tensors, info, inputs = oracle
    y = resample(inputs[name], sr, 24000)
    assert y.dtype == np.float32 and info[f"{name}.dtype"] == "float32"
    assert y.shape[0] == int(np.ceil(inputs[name].shape[0] * 24000 / sr))
    _assert_bits(y, tensors[f"{name}.y"])


def test_resample_same_rate_is_identity():
    x = speechlike(0.2, 24000)
    assert resample(x, 24000, 24000) is x


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["stereo44k.flac", "mono16k.wav", "stereo44k.mp3", "stereo24k_float.wav", "mono48k.opus", "six48k.wav"])
def test_load_audio_matches_upstream(oracle, files, name):
    tensors, info, _ = oracle
    wav, sr = load_audio(files[name])
    assert sr == info[f"{name}.sr"]
    assert wav.ndim == 1 and wav.dtype == np.float32
    _assert_bits(wav, tensors[f"{name}.wav"])
    # bytes of the same file decode to the same samples
    wav_b, sr_b = load_audio(files[name].read_bytes())
    assert sr_b == sr and np.array_equal(wav_b, wav)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["mel24k", "mel24k_short"])
def test_mel_spectrogram_matches_upstream(oracle, name):
    tensors, _, inputs = oracle
    mel = mel_spectrogram(torch.from_numpy(inputs[name]).unsqueeze(0))
    _assert_bits(mel, tensors[f"{name}.mel"])


# ---------------------------------------------------------------------------------------------
# loading paths without an upstream equivalent


def test_numpy_inputs_mirror_upstream_cast_then_mean():
    stereo = speechlike(0.5, 16000, seed=20, channels=2).astype(np.float64)
    expected = np.mean(stereo.astype(np.float32), axis=-1).astype(np.float32)
    for src in [(stereo, 16000)]:
        y, sr = load_audio(src)
        assert sr == 16000 and y.dtype == np.float32 and np.array_equal(y, expected)
    y, _ = load_audio(stereo, sample_rate=16000)
    assert np.array_equal(y, expected)
    y_cf, _ = load_audio(np.ascontiguousarray(stereo.T), sample_rate=16000)  # (channels, n) accepted
    assert np.array_equal(y_cf, expected)


def test_int16_array_is_scaled():
    x = (speechlike(0.3, 16000, seed=21) * 32767).astype(np.int16)
    y, _ = load_audio((x, 16000))
    assert np.allclose(y, x / 32768.0, atol=0, rtol=0)


def test_pyav_formats_decode(tmp_path):
    x = speechlike(1.0, 44100, seed=22, channels=2)
    m4a = tmp_path / "ref.m4a"
    _encode_av(m4a, x, 44100, "ipod", "aac")
    y, sr = load_audio(m4a)
    assert sr == 44100 and y.dtype == np.float32 and y.ndim == 1
    assert abs(y.shape[0] - x.shape[0]) <= 4096
    assert 0.1 < float(np.abs(y).max()) < 0.5
    y_b, _ = load_audio(m4a.read_bytes())
    assert np.array_equal(y_b, y)


def test_write_wav_atomic_roundtrip(tmp_path):
    x = speechlike(0.5, 24000, seed=23)
    out = write_wav(tmp_path / "out.wav", x, 24000, subtype="FLOAT")
    assert out == tmp_path / "out.wav"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.wav"]
    y, sr = load_audio(out)
    assert sr == 24000 and np.array_equal(y, x)
    write_wav(out, x, 24000)  # PCM_16 default, overwrites in place
    y16, _ = load_audio(out)
    assert np.abs(y16 - x).max() <= 1 / 32768
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.wav"]


def test_write_wav_failure_leaves_nothing(tmp_path):
    with pytest.raises(ValueError):
        write_wav(tmp_path / "bad.wav", np.zeros((10, 2)), 24000, subtype="NOT_A_SUBTYPE")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# AudioError cases


def _wav_bytes(x: np.ndarray, sr: int, subtype: str = "PCM_16", fmt: str = "WAV") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, sr, format=fmt, subtype=subtype)
    return buf.getvalue()


def test_error_missing_and_empty(tmp_path):
    with pytest.raises(AudioError, match="no such audio file"):
        load_audio(tmp_path / "nope.wav")
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(AudioError, match="empty"):
        load_audio(empty)
    with pytest.raises(AudioError, match="empty"):
        load_audio(b"")
    zero_frames = tmp_path / "zero.wav"
    zero_frames.write_bytes(_wav_bytes(np.zeros(0, dtype=np.float32), 16000))
    with pytest.raises(AudioError, match="no samples"):
        load_audio(zero_frames)
    with pytest.raises(AudioError, match="no samples"):
        load_audio((np.zeros(0, dtype=np.float32), 16000))


def test_error_not_audio(tmp_path):
    text = tmp_path / "notes.wav"
    text.write_text("this is not audio at all\n" * 100)
    with pytest.raises(AudioError, match="not a readable audio file"):
        load_audio(text)
    with pytest.raises(AudioError, match="not a readable audio file"):  # fixed bytes: some random ones probe as a container with no audio stream
        load_audio(random.Random(0).randbytes(4096))
    with pytest.raises(AudioError, match="not a readable audio file|no audio stream"):
        load_audio(os.urandom(4096))
    with pytest.raises(AudioError):
        load_audio(12345)  # type: ignore[arg-type]
    with pytest.raises(AudioError, match="sample_rate"):
        load_audio(np.ones(100, dtype=np.float32))


@pytest.mark.parametrize("fmt,subtype", [("WAV", "PCM_16"), ("WAV", "FLOAT"), ("FLAC", "PCM_16"), ("MP3", "MPEG_LAYER_III"), ("OGG", "OPUS")])
def test_error_truncated(tmp_path, fmt, subtype):
    sr = 48000 if subtype == "OPUS" else 24000
    data = _wav_bytes(speechlike(2.0, sr, seed=30, channels=2), sr, subtype=subtype, fmt=fmt)
    cut = data[: len(data) // 2]
    path = tmp_path / "cut.bin"
    path.write_bytes(cut)
    with pytest.raises(AudioError, match="truncated"):
        load_audio(path)
    with pytest.raises(AudioError, match="truncated"):
        load_audio(cut)


def test_error_nonfinite(tmp_path):
    x = speechlike(0.5, 16000, seed=31)
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[100] = bad
        path = tmp_path / "bad.wav"
        path.write_bytes(_wav_bytes(y, 16000, subtype="FLOAT"))
        with pytest.raises(AudioError, match="NaN or infinite"):
            load_audio(path)
        with pytest.raises(AudioError, match="NaN or infinite"):
            load_audio((y, 16000))
    with pytest.raises(AudioError, match="NaN or infinite"):
        resample(np.where(np.arange(x.size) == 5, np.nan, x).astype(np.float32), 16000, 24000)


def test_error_silence(tmp_path):
    path = tmp_path / "silence.wav"
    path.write_bytes(_wav_bytes(np.zeros((16000, 2), dtype=np.float32), 16000))
    with pytest.raises(AudioError, match="silence"):
        load_audio(path)
    with pytest.raises(AudioError, match="silence"):
        load_audio((np.zeros(1000), 16000))
