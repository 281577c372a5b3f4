"""F5-TTS audio front end against upstream (f5-tts 1.1.22 + torchaudio + pydub in the oracle venv).

Exact equality throughout: the sinc resampler, the HTK filterbank, the Vocos log-mel, and the whole
reference preprocessing (pydub silence splitting, 12 s clipping, edge trimming, the 50 ms pad, the
WAV round trip, channel mean, rms, level and 24 kHz resampling) on WAV files of several widths,
rates and channel counts. One oracle run serves every comparison.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.audio import pcm
from koe.audio.errors import AudioError
from koe.audio.mel import htk_mel_filterbank, vocos_log_mel
from koe.audio.pcm import pcm16_from_float
from koe.audio.silence import WindowRms
from koe.audio.sinc_resample import resample_sinc
from koe.engines.base import UnsupportedVoice
from koe.engines.f5_tts.reference import MIN_REFERENCE_SECONDS, load_reference, normalised_reference, prepare_reference
from koe.engines.f5_tts.text import end_ref_text as fix_transcript
from koe.engines.f5_tts.text import ref_text_for_batches

RESAMPLE_RATES = [(16000, 24000), (44100, 24000), (22050, 24000), (48000, 24000), (8000, 24000), (11025, 24000), (24000, 16000)]
RESAMPLE_LENGTHS = [1, 97, 4000, 33333]
MEL_LENGTHS = [600, 24000, 50001]
FBANKS = [(513, 100, 24000), (1025, 80, 16000), (257, 64, 22050)]


# ---------------------------------------------------------------------------------------------
# synthetic speech-like clips


def _speech(rng: np.random.Generator, seconds: float, sr: int, level: float = 0.2) -> np.ndarray:
    """Noise shaped by a syllable-rate envelope: loud enough everywhere to be non-silent."""
    n = int(seconds * sr)
    t = np.arange(n) / sr
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.7 * t) ** 2
    tone = np.sin(2 * np.pi * 180 * t) * 0.5
    return (level * envelope * (rng.standard_normal(n) * 0.6 + tone)).astype(np.float64)


def _quiet(rng: np.random.Generator, seconds: float, sr: int, level: float = 3e-4) -> np.ndarray:
    return level * rng.standard_normal(int(seconds * sr))


def _stereo(left: np.ndarray, right_gain: float = 0.7) -> np.ndarray:
    return np.stack([left, right_gain * np.roll(left, 37)], axis=1)


def _clips(rng: np.random.Generator) -> dict[str, tuple[np.ndarray, int, str, str, float]]:
    """name -> (samples (n,) or (n, ch), rate, soundfile subtype, transcript, target rms)."""
    clips = {}
    sr = 16000
    parts = []
    for _ in range(4):
        parts += [_speech(rng, 3.2, sr), _quiet(rng, 1.5, sr)]
    clips["long_pauses_16k_mono16"] = (np.concatenate(parts), sr, "PCM_16", "Some words here", 0.1)

    sr = 44100
    parts = []
    for _ in range(7):
        parts += [_speech(rng, 1.9, sr), _quiet(rng, 0.3, sr)]
    clips["short_pauses_44k_stereo16"] = (_stereo(np.concatenate(parts)), sr, "PCM_16", "Ends with a period.", 0.1)

    clips["no_silence_24k_mono24"] = (_speech(rng, 13.5, 24000, level=0.3), 24000, "PCM_24", "Already fixed. ", 0.1)
    sr = 24000
    clips["edges_24k_mono16"] = (
        np.concatenate([np.zeros(int(0.2 * sr)), _quiet(rng, 1.1, sr), _speech(rng, 4.0, sr), _quiet(rng, 2.2, sr, 1e-4)]),
        sr,
        "PCM_16",
        "中文结尾。",
        0.1,
    )
    clips["quiet_16k_mono16"] = (_speech(rng, 5.0, 16000, level=0.02), 16000, "PCM_16", "trailing space ", 0.1)
    sr = 44100
    clips["edges_44k_stereo24"] = (
        _stereo(np.concatenate([_quiet(rng, 0.7, sr), _speech(rng, 5.0, sr), _quiet(rng, 0.9, sr)])),
        sr,
        "PCM_24",
        "Stereo clip",
        0.1,
    )
    clips["pause_16k_stereo24"] = (
        _stereo(np.concatenate([_speech(rng, 2.0, 16000), _quiet(rng, 2.5, 16000), _speech(rng, 2.5, 16000)])),
        16000,
        "PCM_24",
        "Two parts",
        0.1,
    )
    sr = 8000
    clips["pause_8k_mono16"] = (
        np.concatenate([_quiet(rng, 0.4, sr), _speech(rng, 2.0, sr), _quiet(rng, 2.5, sr), _speech(rng, 2.5, sr)]),
        sr,
        "PCM_16",
        "Telephone",
        0.1,
    )
    clips["u8_22k_mono"] = (np.concatenate([_speech(rng, 3.0, 22050), np.zeros(9000)]), 22050, "PCM_U8", "Eight bits", 0.1)
    sr = 48000
    clips["full_48k_stereo32"] = (
        _stereo(np.concatenate([_quiet(rng, 0.5, sr), np.clip(_speech(rng, 4.0, sr, level=0.9), -1, 1), _quiet(rng, 0.5, sr)])),
        sr,
        "PCM_32",
        "Loud",
        0.1,
    )
    clips["short_16k_mono16"] = (_speech(rng, 0.8, 16000), 16000, "PCM_16", "Short", 0.05)
    # lengths whose rounded milliseconds run past the data: pydub zero-fills the last slice
    clips["odd_length_16k_mono16"] = (_speech(rng, 3.0 + 9 / 16000, 16000), 16000, "PCM_16", "Odd", 0.1)
    clips["odd_length_44k_stereo24"] = (_stereo(_speech(rng, 3.0 + 30 / 44100, 44100)), 44100, "PCM_24", "Odd two", 0.1)
    return clips


# ---------------------------------------------------------------------------------------------
# one oracle run for everything


@pytest.fixture(scope="session")
def oracle(session_tmp):
    rng = np.random.default_rng(1234)
    work = session_tmp / "f5_audio_front"
    work.mkdir(parents=True, exist_ok=True)
    inputs: dict[str, torch.Tensor] = {}
    job: dict = {"inputs": str(work / "inputs.safetensors"), "resample": [], "fbank": [], "mel": [], "vocos_mel": [], "reference": []}

    g = torch.Generator().manual_seed(7)
    for orig, new in RESAMPLE_RATES:
        for length in RESAMPLE_LENGTHS:
            key = f"noise_{orig}_{new}_{length}"
            inputs[key] = torch.randn(2, length, generator=g) * 0.3
            job["resample"].append({"name": key, "input": key, "orig": orig, "new": new})
        key = f"sine_{orig}_{new}"
        t = torch.arange(orig * 2 + 13, dtype=torch.float64) / orig
        inputs[key] = (0.5 * torch.sin(2 * torch.pi * 440.0 * t)).to(torch.float32)
        job["resample"].append({"name": key, "input": key, "orig": orig, "new": new})
    for n_freqs, n_mels, sr in FBANKS:
        job["fbank"].append({"name": f"{n_freqs}_{n_mels}_{sr}", "n_freqs": n_freqs, "n_mels": n_mels, "sample_rate": sr})
    for length in MEL_LENGTHS:
        key = f"mel_{length}"
        inputs[key] = torch.randn(2, length, generator=g) * 0.2
        job["mel"].append({"name": key, "input": key})
        job["vocos_mel"].append({"name": key, "input": key})

    clips = _clips(rng)
    for name, (samples, sr, subtype, text, target_rms) in clips.items():
        path = work / f"{name}.wav"
        sf.write(str(path), samples, sr, subtype=subtype)
        job["reference"].append({"name": name, "path": str(path), "text": text, "target_rms": target_rms})

    save_file(inputs, job["inputs"])
    tensors, info = run_oracle("audio_front", job, work, family="f5_tts")
    return {"inputs": inputs, "tensors": tensors, "info": info, "job": job, "work": work}


# ---------------------------------------------------------------------------------------------
# resampling, filterbank, mel


@pytest.mark.parametrize("orig,new", RESAMPLE_RATES)
def test_resample_matches_torchaudio(oracle, orig, new):
    for case in oracle["job"]["resample"]:
        if (case["orig"], case["new"]) != (orig, new):
            continue
        expected = oracle["tensors"][f"resample/{case['name']}"]
        got = resample_sinc(oracle["inputs"][case["input"]], orig, new)
        assert got.shape == expected.shape, case["name"]
        assert same(got, expected), case["name"]


def test_resample_same_rate_is_identity():
    x = torch.randn(3, 100)
    assert resample_sinc(x, 24000, 24000) is x
    with pytest.raises(ValueError):
        resample_sinc(x, 0, 24000)


def test_htk_filterbank_matches_torchaudio(oracle):
    for n_freqs, n_mels, sr in FBANKS:
        expected = oracle["tensors"][f"fbank/{n_freqs}_{n_mels}_{sr}"]
        got = htk_mel_filterbank(n_freqs, n_mels, sr)
        assert got.dtype == torch.float32 and got.shape == (n_freqs, n_mels)
        assert same(got, expected)


def test_vocos_log_mel_matches_upstream(oracle):
    for length in MEL_LENGTHS:
        x = oracle["inputs"][f"mel_{length}"]
        f5 = oracle["tensors"][f"mel/mel_{length}"]
        vocos = oracle["tensors"][f"vocos_mel/mel_{length}"]
        got = vocos_log_mel(x)
        assert got.shape == (2, 100, length // 256 + 1)
        assert same(got, f5), length
        assert same(vocos_log_mel(x, floor=1e-7), vocos), length
        assert same(vocos_log_mel(x[:, None]), f5)  # (batch, 1, samples) as upstream accepts


# ---------------------------------------------------------------------------------------------
# reference preprocessing


def _reference_cases(oracle):
    return {case["name"]: case for case in oracle["job"]["reference"]}


@pytest.mark.parametrize(
    "name",
    [
        "long_pauses_16k_mono16",
        "short_pauses_44k_stereo16",
        "no_silence_24k_mono24",
        "edges_24k_mono16",
        "quiet_16k_mono16",
        "edges_44k_stereo24",
        "pause_16k_stereo24",
        "pause_8k_mono16",
        "u8_22k_mono",
        "full_48k_stereo32",
        "short_16k_mono16",
        "odd_length_16k_mono16",
        "odd_length_44k_stereo24",
    ],
)
def test_reference_matches_upstream(oracle, name):
    case = _reference_cases(oracle)[name]
    expected = oracle["tensors"]
    info = oracle["info"]["reference"][name]
    clip = load_reference(case["path"], case["text"])

    loaded = expected[f"reference/{name}/loaded"]  # upstream's temporary WAV, (channels, frames)
    assert clip.sample_rate == info["sample_rate"]
    assert clip.channels == loaded.shape[0]
    assert same(clip.samples[None], expected[f"reference/{name}/mono"])  # upstream's channel mean, (1, frames)
    assert clip.text == info["text"]

    audio, rms = normalised_reference(clip, case["target_rms"])
    assert audio.dtype == torch.float32
    assert audio.shape == expected[f"reference/{name}/audio"].shape
    assert same(audio, expected[f"reference/{name}/audio"])
    assert rms == float(expected[f"reference/{name}/rms"][0])


def test_reference_clipping_steps(oracle):
    cases = _reference_cases(oracle)
    steps = {
        name: load_reference(cases[name]["path"], cases[name]["text"]).clip_steps
        for name in ("long_pauses_16k_mono16", "short_pauses_44k_stereo16", "no_silence_24k_mono24", "edges_24k_mono16")
    }
    assert steps["long_pauses_16k_mono16"] == (1,)
    assert 2 in steps["short_pauses_44k_stereo16"]
    assert steps["no_silence_24k_mono24"][-1] == 3
    assert steps["edges_24k_mono16"] == ()
    odd = load_reference(cases["odd_length_16k_mono16"]["path"], "x")
    # 48009 frames are 3001 ms to pydub: zero-filled to 48016; the 50 ms pad is 551 frames at 11025 Hz -> 799 at 16 kHz
    assert odd.samples.shape[0] == 48016 + 799
    assert not odd.samples[48009:].any() and odd.samples[48008] != 0
    clip = load_reference(cases["edges_24k_mono16"]["path"], "x")
    assert clip.leading_trim_ms > 0 and clip.trailing_trim_ms > 0
    assert clip.info["leading_trim_ms"] == clip.leading_trim_ms and clip.info["clipped"] is False
    assert clip.seconds < 12.1


def test_tuple_source_is_the_pcm16_wav(session_tmp):
    rng = np.random.default_rng(5)
    samples = np.concatenate([_quiet(rng, 0.3, 22050), _speech(rng, 2.0, 22050), _quiet(rng, 0.3, 22050)]).astype(np.float32)
    stereo = _stereo(samples.astype(np.float64))
    for arr in (samples, stereo):
        path = session_tmp / f"tuple_{arr.ndim}.wav"
        sf.write(str(path), arr, 22050, subtype="PCM_16")
        from_file = load_reference(path, "Hello")
        from_tuple = load_reference((arr, 22050), "Hello")
        assert np.array_equal(from_file.samples, from_tuple.samples)
        assert from_file.sample_rate == from_tuple.sample_rate == 22050
        # the same bytes, with another extension (upstream would go through ffmpeg; same PCM)
        assert np.array_equal(load_reference(path.read_bytes(), "Hello").samples, from_file.samples)


def test_pcm16_from_float_is_soundfile_pcm16():
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        x = np.concatenate([rng.uniform(-1.3, 1.3, 50000), rng.uniform(-(2**-7), 2**-7, 50000), [1.0, -1.0, 0.5, -0.5, 0.0]]).astype(dtype)
        buf = io.BytesIO()
        sf.write(buf, x, 8000, format="WAV", subtype="PCM_16")
        buf.seek(0)
        stored, _ = sf.read(buf, dtype="int16")
        assert np.array_equal(pcm16_from_float(x), stored)


def test_flac_source_decodes_to_pcm16(session_tmp):
    rng = np.random.default_rng(9)
    samples = np.concatenate([_speech(rng, 2.0, 16000), _quiet(rng, 0.5, 16000)])
    ints = pcm16_from_float(samples)
    path = session_tmp / "ref.flac"
    sf.write(str(path), ints, 16000, subtype="PCM_16")
    clip = load_reference(path, "Flac")
    assert np.array_equal(clip.samples, prepare_reference(ints, 16000, 2, "Flac").samples)


# ---------------------------------------------------------------------------------------------
# the pydub/audioop pieces against the stdlib's audioop itself


def _audioop():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pytest.importorskip("audioop")


def _to_bytes(data: np.ndarray, width: int) -> bytes:
    return data.astype({1: "<i1", 2: "<i2", 4: "<i4"}[width]).tobytes()


def test_ratecv_and_lin2lin_match_audioop():
    audioop = _audioop()
    rng = np.random.default_rng(11)
    for width in (1, 2, 4):
        top = 1 << (8 * width - 1)
        for channels in (1, 2):
            for in_rate, out_rate in ((8000, 11025), (11025, 24000), (11025, 44100), (7999, 11025), (44100, 48000), (11025, 16000)):
                for frames in (1, 2, 551, 1777):
                    data = rng.integers(-top, top, (frames, channels))
                    expected, _ = audioop.ratecv(_to_bytes(data, width), width, channels, in_rate, out_rate, None)
                    got = pcm.ratecv(data, width, in_rate, out_rate)
                    assert _to_bytes(got, width) == expected, (width, channels, in_rate, out_rate, frames)
        data = rng.integers(-top, top, (300, 2))
        for new_width in (1, 2, 4):
            assert _to_bytes(pcm.lin2lin(data, width, new_width), new_width) == audioop.lin2lin(_to_bytes(data, width), width, new_width)


def test_window_rms_matches_audioop_rms_on_pydub_slices():
    audioop = _audioop()
    rng = np.random.default_rng(12)
    for width, rate, channels in ((2, 44100, 2), (2, 16000, 1), (4, 48000, 2), (4, 22050, 1), (1, 11025, 1)):
        top = 1 << (8 * width - 1)
        frames = rate * 3 + 17
        data = (rng.integers(-top, top, (frames, channels)) * rng.uniform(0, 1, (frames, 1)) ** 4).astype(np.int64)
        data[rate // 2 : rate] = rng.integers(-3, 1, (rate - rate // 2, channels))  # tiny (mostly negative) samples
        data[rate : rate + rate // 3] = 0  # digital silence
        seg = pcm.Pcm(data, rate, width)
        length = seg.ms()
        starts = np.concatenate([rng.integers(0, length, 300), np.arange(480, 1400, 10), [0, length - 10, length - 1, length]])
        ends = starts + rng.choice([10, 100, 1000], starts.size)
        got = WindowRms(seg)(starts, ends)
        for s, e, r in zip(starts.tolist(), ends.tolist(), got.tolist()):
            piece = seg.slice_ms(s, e)
            assert r == audioop.rms(_to_bytes(piece.data, width), width), (width, s, e)
        # the sequential fallback is audioop's own sum
        assert WindowRms(seg)._audioop_rms(0, 1000, 1000 * channels) == audioop.rms(_to_bytes(data[:1000], width), width)


def test_fix_transcript():
    assert fix_transcript("Hello") == "Hello. "
    assert fix_transcript("Hello.") == "Hello. "
    assert fix_transcript("Hello. ") == "Hello. "
    assert fix_transcript("你好。") == "你好。"
    assert fix_transcript("Hi ") == "Hi . "
    assert ref_text_for_batches("Hello. ") == "Hello.  "
    assert ref_text_for_batches("你好。") == "你好。"


# ---------------------------------------------------------------------------------------------
# errors


def _wav_bytes(samples: np.ndarray, sr: int = 16000, subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, sr, format="WAV", subtype=subtype)
    return buf.getvalue()


@pytest.mark.parametrize("text", [None, "", "   \n"])
def test_missing_transcript_is_refused(text):
    rng = np.random.default_rng(0)
    with pytest.raises(UnsupportedVoice, match="needs the reference's transcript"):
        load_reference((_speech(rng, 1.0, 16000), 16000), text)
    with pytest.raises(UnsupportedVoice, match="transcript"):
        prepare_reference(np.zeros((100, 1), dtype=np.int16), 16000, 2, text)


def test_not_audio_is_refused(session_tmp):
    path = session_tmp / "not_audio.wav"
    path.write_bytes(b"this is not a sound file at all" * 50)
    with pytest.raises(AudioError):
        load_reference(path, "Hello")
    with pytest.raises(AudioError):
        load_reference(b"\x00\x01garbage" * 100, "Hello")
    with pytest.raises(AudioError, match="no such audio file"):
        load_reference(session_tmp / "missing.wav", "Hello")
    with pytest.raises(AudioError):
        load_reference(np.zeros(10), "Hello")  # a bare array: no sample rate


def test_empty_audio_is_refused(session_tmp):
    path = session_tmp / "empty.wav"
    path.write_bytes(b"")
    with pytest.raises(AudioError, match="empty"):
        load_reference(path, "Hello")
    with pytest.raises(AudioError, match="no samples"):
        load_reference(_wav_bytes(np.zeros(0)), "Hello")
    with pytest.raises(AudioError, match="no samples"):
        load_reference((np.zeros(0, dtype=np.float32), 16000), "Hello")


def test_silent_audio_is_refused():
    with pytest.raises(AudioError, match="silent"):
        load_reference(_wav_bytes(np.zeros(32000)), "Hello")
    rng = np.random.default_rng(1)
    # above -50 dBFS (so not split away) but below -42 dBFS everywhere: trimmed to nothing
    hum = 10 ** (-46 / 20) * np.sqrt(2) * np.sin(2 * np.pi * 100 * np.arange(48000) / 16000) + 1e-5 * rng.standard_normal(48000)
    with pytest.raises(AudioError, match="-42 dBFS"):
        load_reference((hum, 16000), "Hello")
    with pytest.raises(AudioError, match="NaN"):
        load_reference((np.full(1000, np.nan), 16000), "Hello")


def test_too_short_audio_is_refused():
    rng = np.random.default_rng(2)
    blip = np.concatenate([np.zeros(8000), _speech(rng, 0.2, 16000), np.zeros(8000)])
    with pytest.raises(AudioError, match=f"at least {MIN_REFERENCE_SECONDS} s"):
        load_reference((blip, 16000), "Hello")
    ok = np.concatenate([np.zeros(8000), _speech(rng, 0.5, 16000), np.zeros(8000)])
    assert load_reference((ok, 16000), "Hello").seconds >= MIN_REFERENCE_SECONDS


def test_prepare_reference_checks_its_pcm():
    with pytest.raises(AudioError, match="integer PCM"):
        prepare_reference(np.zeros((10, 1), dtype=np.float32), 16000, 2, "Hi")
    with pytest.raises(AudioError, match="out of range"):
        prepare_reference(np.full((10, 1), 40000), 16000, 2, "Hi")
    with pytest.raises(AudioError, match="sample width"):
        prepare_reference(np.zeros((10, 1), dtype=np.int16), 16000, 5, "Hi")


def test_float_wav_goes_the_ffmpeg_way(session_tmp):
    """pydub's reader refuses float WAV and hands it to ffmpeg, which decodes it to 32-bit PCM."""
    rng = np.random.default_rng(4)
    samples = np.concatenate([_speech(rng, 1.5, 24000), _quiet(rng, 0.2, 24000)]).astype(np.float32)
    path = session_tmp / "float.wav"
    sf.write(str(path), samples, 24000, subtype="FLOAT")
    clip = load_reference(path, "Float")
    ints = np.clip(np.rint(samples.astype(np.float64) * 2.0**31), -(2.0**31), 2.0**31 - 1).astype(np.int64)
    expected = prepare_reference(ints, 24000, 4, "Float")
    assert clip.sample_width == 4 and np.array_equal(clip.samples, expected.samples)
