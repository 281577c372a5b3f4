"""VoxCPM's prompt audio against upstream's own reads (librosa.load; torchaudio.load + functional.resample).

Exact equality: every clip (16-bit / 24-bit / float WAV at 16, 22.05, 44.1 and 48 kHz, mono, stereo
and 3 channels, FLAC; MP3 and Ogg Vorbis for VoxCPM2's librosa path) is read by koe from its path,
its bytes, a file object and as `(samples, rate)`, and must give upstream's float32 samples, and
upstream's padding to whole patches. One oracle run (the VoxCPM oracle venv) serves every case.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

from koe.audio.errors import AudioError
from koe.engines.voxcpm.audio import SILENT_PEAK, load_prompt_audio, pad_to_patches

# (method, target rate, patch_len = patch_size * chunk_size, pad on the left)
TARGETS = {
    "v2_prompt": ("librosa", 16000, 4 * 640, True),  # VoxCPM2 prompt audio
    "v2_reference": ("librosa", 16000, 4 * 640, False),  # VoxCPM2 structural reference
    "v15": ("torchaudio", 44100, 4 * 1764, True),  # VoxCPM 1.5
    "v05": ("torchaudio", 16000, 2 * 640, True),  # VoxCPM 0.5B
}


def _speech(rng: np.random.Generator, frames: int, rate: int, channels: int) -> np.ndarray:
    """Tone plus noise under a syllable-rate envelope, each channel a little different: (frames, channels)."""
    t = np.arange(frames) / rate
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.7 * t) ** 2
    columns = []
    for c in range(channels):
        tone = 0.5 * np.sin(2 * np.pi * (180 + 40 * c) * t)
        columns.append(0.25 * envelope * (0.6 * rng.standard_normal(frames) + tone))
    return np.stack(columns, axis=1)


def _clips() -> dict[str, tuple[int, int, int, str, str]]:
    """name -> (rate, frames, channels, soundfile format, subtype)."""
    clips = {}
    for rate in (16000, 22050, 44100, 48000):
        frames = int(1.37 * rate) + 3  # a length that is a multiple of nothing
        for channels in (1, 2):
            for subtype in ("PCM_16", "FLOAT"):
                clips[f"wav_{rate}_{channels}ch_{subtype.lower()}"] = (rate, frames, channels, "WAV", subtype)
    clips["wav_44100_2ch_pcm_24"] = (44100, 61001, 2, "WAV", "PCM_24")
    clips["wav_48000_3ch_float"] = (48000, 50001, 3, "WAV", "FLOAT")
    clips["wav_16000_1ch_whole_patches"] = (16000, 8 * 2560, 1, "WAV", "PCM_16")  # no padding, no resampling
    clips["flac_22050_2ch_pcm_16"] = (22050, 30011, 2, "FLAC", "PCM_16")
    clips["flac_48000_1ch_pcm_24"] = (48000, 52007, 1, "FLAC", "PCM_24")
    return clips


# decoded by libsndfile in upstream's librosa path too (torchaudio's FFmpeg decoders differ for these)
LIBROSA_ONLY = {
    "mp3_44100_1ch": (44100, 50000, 1, "MP3", "MPEG_LAYER_III"),
    "ogg_48000_2ch": (48000, 50000, 2, "OGG", "VORBIS"),
}
CLIPS = _clips()


def _cases() -> list[tuple[str, str]]:
    cases = [(clip, target) for clip in CLIPS for target in TARGETS]
    return cases + [(clip, target) for clip in LIBROSA_ONLY for target in TARGETS if TARGETS[target][0] == "librosa"]


@pytest.fixture(scope="session")
def files(session_tmp):
    folder = session_tmp / "voxcpm-audio"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(1234)
    paths = {}
    for name, (rate, frames, channels, fmt, subtype) in {**CLIPS, **LIBROSA_ONLY}.items():
        path = folder / f"{name}.{fmt.lower()}"
        samples = _speech(rng, frames, rate, channels)
        sf.write(str(path), samples[:, 0] if channels == 1 else samples, rate, format=fmt, subtype=subtype)
        paths[name] = path
    return paths


@pytest.fixture(scope="session")
def oracle(files, session_tmp):
    cases = []
    for clip, target in _cases():
        method, rate, patch_len, left = TARGETS[target]
        cases.append({"name": f"{clip}/{target}", "path": str(files[clip]), "method": method, "target_rate": rate, "patch_len": patch_len, "left": left})
    tensors, info = run_oracle("audio_front", {"cases": cases}, session_tmp / "voxcpm-audio-oracle", family="voxcpm")
    return tensors, info


@pytest.mark.parametrize("clip,target", _cases())
def test_prompt_audio_matches_upstream(oracle, files, clip, target):
    tensors, _ = oracle
    method, rate, patch_len, left = TARGETS[target]
    expected = tensors[f"{clip}/{target}/audio"]
    path = files[clip]
    decoded, source_rate = sf.read(str(path), dtype="float32", always_2d=False)
    sources = {
        "path": path,
        "str": str(path),
        "bytes": path.read_bytes(),
        "file object": io.BytesIO(path.read_bytes()),
        "(samples, rate)": (decoded, source_rate),
    }
    for kind, source in sources.items():
        got = load_prompt_audio(source, rate, method)
        assert got.dtype == np.float32 and got.ndim == 1, kind
        assert same(got, expected), f"{kind}: {got.shape}, upstream {tuple(expected.shape)}"
    padded = pad_to_patches(torch.from_numpy(got)[None], patch_len, left=left)
    assert same(padded, tensors[f"{clip}/{target}/padded"])
    assert np.array_equal(pad_to_patches(got, patch_len, left=left), padded[0].numpy())


def test_channels_first_and_integer_arrays_read_as_the_file(files):
    path = files["wav_22050_2ch_pcm_16"]
    from_file = load_prompt_audio(path, 16000, "librosa")
    decoded, rate = sf.read(str(path), dtype="float32")
    as_int16, _ = sf.read(str(path), dtype="int16")
    for method, target in (("librosa", 16000), ("torchaudio", 44100)):
        from_file = load_prompt_audio(path, target, method)
        assert np.array_equal(load_prompt_audio((decoded.T.copy(), rate), target, method), from_file)
        assert np.array_equal(load_prompt_audio((as_int16, rate), target, method), from_file)
        assert np.array_equal(load_prompt_audio((decoded.astype(np.float64), rate), target, method), from_file)


def test_same_rate_is_not_resampled(files):
    path = files["wav_16000_1ch_whole_patches"]
    decoded, _ = sf.read(str(path), dtype="float32")
    for method in ("librosa", "torchaudio"):
        assert np.array_equal(load_prompt_audio(path, 16000, method), decoded)


def test_ffmpeg_only_format_is_16_bit_on_the_librosa_path(session_tmp):
    """m4a: libsndfile cannot read it; upstream's librosa falls back to audioread's 16-bit FFmpeg pipe."""
    import av

    path = session_tmp / "voxcpm-clip.m4a"
    rate = 44100
    samples = _speech(np.random.default_rng(5), rate, rate, 1)[:, 0].astype(np.float32)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(samples[None], format="flt", layout="mono")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    pcm16 = load_prompt_audio(path, rate, "librosa")
    as_float = load_prompt_audio(path, rate, "torchaudio")
    assert np.array_equal(pcm16 * 32768, np.round(pcm16 * 32768))
    assert pcm16.shape == as_float.shape
    assert np.abs(pcm16 - as_float).max() <= 0.5 / 32768 + 1e-9
    assert not np.array_equal(as_float * 32768, np.round(as_float * 32768))


# ---------------------------------------------------------------------------------------------
# pad_to_patches


def test_pad_to_patches():
    audio = np.arange(1, 6, dtype=np.float32)
    assert np.array_equal(pad_to_patches(audio, 4, left=True), [0, 0, 0, 1, 2, 3, 4, 5])
    assert np.array_equal(pad_to_patches(audio, 4, left=False), [1, 2, 3, 4, 5, 0, 0, 0])
    assert pad_to_patches(audio, 5, left=True) is audio
    tensor = torch.arange(1.0, 6.0)[None]
    assert torch.equal(pad_to_patches(tensor, 3, left=True), torch.tensor([[0.0, 1, 2, 3, 4, 5]]))
    with pytest.raises(ValueError):
        pad_to_patches(audio, 0, left=True)


# ---------------------------------------------------------------------------------------------
# errors


def _wav_bytes(samples: np.ndarray, rate: int = 16000, subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="WAV", subtype=subtype)
    return buf.getvalue()


@pytest.mark.parametrize("method", ["librosa", "torchaudio"])
def test_unreadable_and_empty_audio_is_refused(session_tmp, method):
    with pytest.raises(AudioError, match="no such audio file"):
        load_prompt_audio(session_tmp / "missing.wav", 16000, method)
    with pytest.raises(AudioError, match="empty"):
        load_prompt_audio(b"", 16000, method)
    empty_file = session_tmp / "voxcpm-empty.wav"
    empty_file.write_bytes(b"")
    with pytest.raises(AudioError, match="empty"):
        load_prompt_audio(empty_file, 16000, method)
    with pytest.raises(AudioError, match="not a readable audio file"):
        load_prompt_audio(b"this is not audio at all" * 100, 16000, method)
    header_only = io.BytesIO()
    with sf.SoundFile(header_only, "w", 16000, 1, format="WAV", subtype="PCM_16"):
        pass
    with pytest.raises(AudioError, match="no samples"):
        load_prompt_audio(header_only.getvalue(), 16000, method)
    whole = _wav_bytes(0.3 * np.sin(np.arange(16000) / 5.0))
    with pytest.raises(AudioError, match="truncated"):
        load_prompt_audio(whole[: len(whole) // 2], 16000, method)
    with pytest.raises(AudioError, match="binary mode"):
        load_prompt_audio(io.StringIO("RIFF"), 16000, method)
    with pytest.raises(AudioError, match="unsupported audio source"):
        load_prompt_audio(12345, 16000, method)


@pytest.mark.parametrize("method", ["librosa", "torchaudio"])
def test_silent_audio_is_refused(method):
    rate = 16000
    with pytest.raises(AudioError, match="the reference is silent"):
        load_prompt_audio(_wav_bytes(np.zeros(rate)), rate, method)
    quiet = np.full(rate, 0.5 * SILENT_PEAK, dtype=np.float32)
    with pytest.raises(AudioError, match="the reference is silent"):
        load_prompt_audio((quiet, rate), rate, method)
    left = 0.3 * np.sin(np.arange(rate) / 7.0)
    with pytest.raises(AudioError, match="the reference is silent"):  # channels that cancel in the mix
        load_prompt_audio((np.stack([left, -left], axis=1).astype(np.float32), rate), rate, method)
    audible = np.full(rate, 2 * SILENT_PEAK, dtype=np.float32)
    assert load_prompt_audio((audible, rate), rate, method).shape == (rate,)


@pytest.mark.parametrize("method", ["librosa", "torchaudio"])
def test_duration_limits(method):
    rate = 22050
    clip = (0.3 * np.sin(np.arange(2 * rate) / 7.0)).astype(np.float32)  # 2 s
    for source in ((clip, rate), _wav_bytes(clip, rate)):
        with pytest.raises(AudioError, match="too short"):
            load_prompt_audio(source, 16000, method, min_seconds=2.5)
        with pytest.raises(AudioError, match="too long"):
            load_prompt_audio(source, 16000, method, max_seconds=1.5)
        assert load_prompt_audio(source, 16000, method, min_seconds=2.0, max_seconds=2.0).shape == (32000,)


def test_bad_arrays_and_arguments_are_refused():
    rate = 16000
    clip = (0.3 * np.sin(np.arange(rate) / 7.0)).astype(np.float32)
    with pytest.raises(AudioError, match="NaN"):
        load_prompt_audio((np.where(np.arange(rate) == 5, np.nan, clip).astype(np.float32), rate), rate, "librosa")
    with pytest.raises(AudioError, match="no samples"):
        load_prompt_audio((np.zeros(0, np.float32), rate), rate, "torchaudio")
    with pytest.raises(AudioError, match="shape"):
        load_prompt_audio((clip.reshape(1, 1, -1), rate), rate, "librosa")
    with pytest.raises(AudioError, match="dtype"):
        load_prompt_audio((clip.astype(str), rate), rate, "librosa")
    for bad_rate in (0, -16000, 22050.5, "fast"):
        with pytest.raises(AudioError, match="sample rate"):
            load_prompt_audio((clip, bad_rate), rate, "librosa")
    with pytest.raises(AudioError, match="tuple"):
        load_prompt_audio((clip,), rate, "librosa")
    with pytest.raises(ValueError, match="unknown prompt audio method"):
        load_prompt_audio((clip, rate), rate, "sox")
    with pytest.raises(ValueError, match="target sample rate"):
        load_prompt_audio((clip, rate), 0, "librosa")
