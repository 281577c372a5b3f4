"""Bounded decoding (koe.audio.decode): decompression bombs, lying headers, absurd rates and channels.

Three things are checked here, on real files:

* exactness: reading libsndfile in blocks (any block size, bounded or not) gives the float32
  samples of one soundfile `read()` (what librosa.load does) for wav/flac/ogg-vorbis/ogg-opus/mp3/
  aiff, and mixing PyAV's frames to mono one by one gives the mix of their concatenation; the
  VoxCPM and F5-TTS loaders give the same samples with and without a bound;
* refusals: too long (from the header, or while decoding when the header lies or says nothing),
  with "at most N s"; `trim`; sample rates outside 8000-384000 Hz, more than 64 channels;
* memory: files of an hour that decode to 100+ MB (FLAC of a tone, FLAC of unknown length, a
  streaming WAV, Ogg Vorbis, MP3 without a Xing header, M4A, ADTS AAC, WebM) are refused with
  `max_seconds=30` while the process grows by under 60 MB (measured in forked children of one
  subprocess, so each case has its own peak).

Long files are made cheaply: a FLAC tone whose half period is a whole FLAC block compresses to
constant subframes (~500 KB an hour), and the lossy ones repeat 10 s of encoded packets (remuxed
with PyAV, or concatenated for self-framing MP3/ADTS) instead of encoding an hour.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf

from koe.audio import decode
from koe.audio.decode import MAX_CHANNELS, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE, frame_to_float, read_soundfile, to_mono
from koe.audio.errors import AudioError, AudioTooLong
from koe.audio.io import load_audio
from koe.engines.f5_tts.reference import load_reference
from koe.engines.voxcpm.audio import load_prompt_audio

REPO = Path(__file__).resolve().parents[1]


def _speech(seconds: float, rate: int, channels: int = 1, seed: int = 0) -> np.ndarray:
    """Tone plus noise under a syllable-rate envelope, each channel different: float32 (n, channels)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.7 * t) ** 2
    cols = [0.25 * envelope * (0.5 * rng.standard_normal(n) + np.sin(2 * np.pi * (190 + 37 * c) * t)) for c in range(channels)]
    return np.stack(cols, axis=1).astype(np.float32)


def _write_sf(path: Path, x: np.ndarray, rate: int, fmt: str, subtype: str) -> Path:
    """Write with libsndfile in 4096-frame calls (one big Vorbis write crashes libsndfile 1.2)."""
    with sf.SoundFile(path, "w", rate, x.shape[1], format=fmt, subtype=subtype) as f:
        for i in range(0, len(x), 4096):
            f.write(x[i : i + 4096])
    return path


def _encode_av(path: Path, x: np.ndarray, rate: int, fmt: str, codec: str, bit_rate: int | None = None, options: dict | None = None) -> Path:
    """Encode float32 (n, channels) with PyAV (formats libsndfile can't write)."""
    layout = {1: "mono", 2: "stereo", 6: "5.1"}[x.shape[1]]
    with av.open(str(path), "w", format=fmt, options=options or {}) as container:
        stream = container.add_stream(codec, rate=rate, layout=layout)
        if bit_rate:
            stream.bit_rate = bit_rate
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(x.T), format="fltp", layout=layout)
        frame.sample_rate = rate
        target = stream.codec_context.codec.audio_formats[0].name
        for converted in av.AudioResampler(format=target, layout=layout, rate=rate).resample(frame):
            for packet in stream.encode(converted):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def _repeat_packets(src: Path, dst: Path, times: int, fmt: str) -> Path:
    """`src`'s audio packets muxed `times` times over into `dst` (a long file without encoding it)."""
    with av.open(str(src)) as inp:
        stream = inp.streams.audio[0]
        packets = [(bytes(p), p.pts, p.dts, p.duration) for p in inp.demux(stream) if p.size]
        span = packets[-1][1] + (packets[-1][3] or 0) - packets[0][1]
        with av.open(str(dst), "w", format=fmt) as out:
            ostream = out.add_stream_from_template(stream)
            for r in range(times):
                for data, pts, dts, duration in packets:
                    p = av.Packet(data)
                    p.pts, p.dts, p.duration = pts + r * span, dts + r * span, duration
                    p.time_base, p.stream = stream.time_base, ostream
                    out.mux(p)
    return dst


def _flac_tone(path: Path, seconds: float, rate: int = 44100) -> Path:
    """A square-wave tone whose half period is one FLAC block: constant subframes, ~140 bytes a second."""
    period = np.where(np.arange(8192) < 4096, 8000, -8000).astype(np.int16)
    block = np.tile(period, 64)
    total, written = int(seconds * rate), 0
    with sf.SoundFile(path, "w", rate, 1, format="FLAC", subtype="PCM_16") as f:
        while written < total:
            part = block[: total - written]
            f.write(part)
            written += len(part)
    return path


def _flac_unknown_length(src: Path, dst: Path) -> Path:
    """`src` with STREAMINFO's total-samples field set to 0 ("unknown", as streaming encoders write)."""
    data = bytearray(src.read_bytes())
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO first
    data[8 + 13] &= 0xF0
    data[8 + 14 : 8 + 18] = b"\0\0\0\0"
    dst.write_bytes(bytes(data))
    return dst


def _wav_sizes(src: Path, dst: Path, riff: int | None, data_size: int) -> Path:
    """`src` (a plain WAV) with its RIFF and data chunk sizes replaced."""
    data = bytearray(src.read_bytes())
    at = data.find(b"data")
    if riff is not None:
        data[4:8] = struct.pack("<I", riff)
    data[at + 4 : at + 8] = struct.pack("<I", data_size)
    dst.write_bytes(bytes(data))
    return dst


# ---------------------------------------------------------------------------------------------
# exactness: blocks == one read


SF_FORMATS = [
    ("WAV", "PCM_16", 16000, 1),
    ("WAV", "PCM_24", 48000, 6),
    ("WAV", "FLOAT", 24000, 2),
    ("FLAC", "PCM_16", 44100, 2),
    ("FLAC", "PCM_24", 48000, 1),
    ("OGG", "VORBIS", 44100, 2),
    ("OGG", "VORBIS", 16000, 1),
    ("OGG", "OPUS", 48000, 1),
    ("OGG", "OPUS", 48000, 2),
    ("MP3", "MPEG_LAYER_III", 44100, 2),
    ("MP3", "MPEG_LAYER_III", 16000, 1),
    ("MP3", "MPEG_LAYER_III", 22050, 2),
    ("AIFF", "PCM_16", 22050, 2),
]
EXT = {"WAV": "wav", "FLAC": "flac", "OGG": "ogg", "MP3": "mp3", "AIFF": "aiff"}


@pytest.fixture(scope="module")
def sf_files(tmp_path_factory) -> dict[tuple, Path]:
    d = tmp_path_factory.mktemp("bounds-sf")
    files = {}
    for i, (fmt, subtype, rate, channels) in enumerate(SF_FORMATS):
        path = d / f"{subtype.lower()}_{rate}_{channels}ch.{EXT[fmt]}"
        files[(fmt, subtype, rate, channels)] = _write_sf(path, _speech(1.1, rate, channels, seed=i), rate, fmt, subtype)
    return files


@pytest.mark.parametrize("key", SF_FORMATS, ids=lambda k: f"{k[1]}-{k[2]}-{k[3]}ch")
def test_block_reads_equal_one_read(sf_files, monkeypatch, key):
    """Any block size, bounded or not, gives soundfile's one-call read (librosa's), mp3 and ogg included."""
    path = sf_files[key]
    with sf.SoundFile(path) as f:
        whole = f.read(dtype="float32", always_2d=False)  # what librosa.load reads
    channels = key[3]
    for block_frames in (3, 1000, 4096):
        monkeypatch.setattr(decode, "BLOCK_SAMPLES", block_frames * channels)
        for max_seconds in (None, 30.0):
            with sf.SoundFile(path) as f:
                got = read_soundfile(f, path.name, max_seconds=max_seconds)
            assert got.dtype == np.float32 and np.array_equal(got, whole), (block_frames, max_seconds)
        # the per-block channel mean is the mean of the whole, as librosa.to_mono computes it
        mono_whole = whole if whole.ndim == 1 else np.mean(whole.T, axis=0).astype(np.float32)
        for source in (path, path.read_bytes()):
            y, sr = load_audio(source, max_seconds=30)
            assert sr == key[2] and np.array_equal(y, mono_whole), block_frames


@pytest.fixture(scope="module")
def av_files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bounds-av")
    return {
        "m4a_stereo": _encode_av(d / "stereo.m4a", _speech(2.0, 44100, 2, seed=40), 44100, "ipod", "aac"),
        "m4a_5.1": _encode_av(d / "six.m4a", _speech(1.5, 48000, 6, seed=41), 48000, "ipod", "aac"),
        "adts_mono": _encode_av(d / "mono.aac", _speech(2.0, 16000, 1, seed=42), 16000, "adts", "aac"),
        "webm_stereo": _encode_av(d / "stereo.webm", _speech(2.0, 48000, 2, seed=43), 48000, "webm", "libopus"),
    }


def _pyav_whole(path: Path) -> np.ndarray:
    """The old way: every frame decoded, concatenated, then mixed to mono."""
    with av.open(str(path)) as c:
        frames = np.concatenate([frame_to_float(fr) for fr in c.decode(c.streams.audio[0])], axis=0)
    return to_mono(frames)


def _rate(path: Path) -> int:
    with av.open(str(path)) as c:
        return c.streams.audio[0].sample_rate


@pytest.mark.parametrize("name", ["m4a_stereo", "m4a_5.1", "adts_mono", "webm_stereo"])
def test_pyav_mono_per_frame_equals_mono_of_all(av_files, name):
    path = av_files[name]
    expected = _pyav_whole(path)
    just_enough = len(expected) / _rate(path) + 0.001  # bounded, a frame or so above the decoded length
    for kwargs in ({}, {"max_seconds": 30}, {"max_seconds": just_enough}):
        y, _ = load_audio(path, **kwargs)
        assert np.array_equal(y, expected), kwargs
    y, _ = load_audio(path.read_bytes(), max_seconds=30)
    assert np.array_equal(y, expected)


@pytest.mark.parametrize("method", ["librosa", "torchaudio"])
def test_voxcpm_loader_bounded_is_unchanged(sf_files, av_files, method):
    for path in (
        sf_files[("MP3", "MPEG_LAYER_III", 44100, 2)],
        sf_files[("OGG", "VORBIS", 44100, 2)],
        sf_files[("WAV", "PCM_24", 48000, 6)],
        av_files["m4a_5.1"],
        av_files["adts_mono"],
    ):
        free = load_prompt_audio(path, 16000, method)
        assert np.array_equal(load_prompt_audio(path, 16000, method, max_seconds=60), free), path.name


def test_f5_loader_bounded_is_unchanged(sf_files, av_files):
    for path in (
        sf_files[("FLAC", "PCM_16", 44100, 2)],
        sf_files[("MP3", "MPEG_LAYER_III", 22050, 2)],
        sf_files[("WAV", "FLOAT", 24000, 2)],
        av_files["m4a_stereo"],
    ):
        free = load_reference(path, "Hello there.")
        bounded = load_reference(path, "Hello there.", max_seconds=30)
        assert np.array_equal(bounded.samples, free.samples) and bounded.info == free.info, path.name


# ---------------------------------------------------------------------------------------------
# refusals


@pytest.fixture(scope="module")
def long_files(tmp_path_factory) -> dict[str, Path]:
    """12 s clips (and one exactly 5 s) whose length the header tells, lies about or leaves out."""
    d = tmp_path_factory.mktemp("bounds-long")
    x = _speech(12.0, 16000, seed=50)
    flac = _write_sf(d / "twelve.flac", x, 16000, "FLAC", "PCM_16")
    wav = _write_sf(d / "twelve.wav", x, 16000, "WAV", "PCM_16")
    return {
        "flac": flac,
        "wav": wav,
        "flac_unknown": _flac_unknown_length(flac, d / "unknown.flac"),
        "wav_streaming": _wav_sizes(wav, d / "streaming.wav", 0xFFFFFFFF, 0xFFFFFFFF),
        "mp3": _write_sf(d / "twelve.mp3", x, 16000, "MP3", "MPEG_LAYER_III"),
        "ogg": _write_sf(d / "twelve.ogg", x, 16000, "OGG", "VORBIS"),
        "m4a": _encode_av(d / "twelve.m4a", x, 16000, "ipod", "aac"),
        "adts": _encode_av(d / "twelve.aac", x, 16000, "adts", "aac"),
        "five": _write_sf(d / "five.wav", _speech(5.0, 16000, seed=51), 16000, "WAV", "PCM_16"),
        "five_and_a_frame": _write_sf(d / "five1.wav", _speech(5.0 + 1 / 16000, 16000, seed=52), 16000, "WAV", "PCM_16"),
    }


@pytest.mark.parametrize(
    "name,said",
    [
        ("flac", r"12\.0 s"),  # from the header
        ("flac_unknown", r"more than 5 s"),  # decoding stopped at 5 s
        ("wav_streaming", r"12\.0 s"),  # libsndfile sizes it from the file
        ("mp3", r"12\.\d s"),
        ("ogg", r"12\.0 s"),
        ("m4a", r"12\.\d s"),  # the MP4 index
        ("adts", r"more than 5 s"),  # FFmpeg only guesses ADTS durations: decoded up to the limit
    ],
)
def test_too_long_is_refused_with_the_limit(long_files, name, said):
    path = long_files[name]
    for source in (path, path.read_bytes()):
        with pytest.raises(AudioTooLong, match=rf"^audio is too long: {said} \(at most 5 s is allowed\)$") as e:
            load_audio(source, max_seconds=5)
        assert e.value.max_seconds == 5.0
    with pytest.raises(AudioError, match=r"too long.*at most 5 s"):
        load_prompt_audio(path, 16000, "librosa", max_seconds=5)
    with pytest.raises(AudioError, match=r"too long.*at most 5 s"):
        load_prompt_audio(path, 16000, "torchaudio", max_seconds=5)
    with pytest.raises(AudioError, match=r"too long.*at most 5 s"):
        load_reference(path, "Hello.", max_seconds=5)
    assert len(load_audio(path)[0]) >= 11 * 16000  # without a bound: all of it, as before


def test_the_limit_is_inclusive(long_files):
    y, sr = load_audio(long_files["five"], max_seconds=5)
    assert len(y) == 5 * sr
    with pytest.raises(AudioTooLong, match=r"at most 5 s"):
        load_audio(long_files["five_and_a_frame"], max_seconds=5)
    assert len(load_audio(long_files["five_and_a_frame"], max_seconds=5.001)[0]) == 5 * 16000 + 1


@pytest.mark.parametrize("name", ["flac", "flac_unknown", "mp3", "ogg", "m4a", "adts"])
def test_trim_keeps_the_first_seconds(long_files, name):
    path = long_files[name]
    whole, sr = load_audio(path)
    y, sr_t = load_audio(path, max_seconds=5, trim=True)
    assert sr_t == sr and np.array_equal(y, whole[: 5 * sr])
    short, _ = load_audio(long_files["five"], max_seconds=30, trim=True)
    assert len(short) == 5 * 16000


def test_lying_small_wav_header_reads_what_it_says(long_files, tmp_path):
    """A data chunk that says 1 s in a 12 s file: read as upstream reads it (1 s), never past it."""
    lying = _wav_sizes(long_files["wav"], tmp_path / "lying.wav", None, 16000 * 2)
    y, sr = load_audio(lying, max_seconds=5)
    assert len(y) == sr
    assert np.array_equal(y, sf.read(lying, dtype="float32")[0])


def test_unknown_lengths_decode_in_full(long_files):
    """soundfile's read() cannot read these (it raised ValueError, a 500 in the server); blocks read them to the end."""
    flac, _ = load_audio(long_files["flac"])
    assert np.array_equal(load_audio(long_files["flac_unknown"])[0], flac)  # FLAC total_samples = 0
    gsm = io.BytesIO()
    sf.write(gsm, _speech(4.0, 8000), 8000, format="WAV", subtype="GSM610")  # libsndfile can't seek in GSM 6.10
    y, sr = load_audio(gsm.getvalue())
    assert sr == 8000 and len(y) == 4 * 8000
    with pytest.raises(AudioTooLong, match=r"4\.0 s \(at most 2 s"):
        load_audio(gsm.getvalue(), max_seconds=2)


def test_bad_max_seconds():
    clip = (_speech(1.0, 16000)[:, 0], 16000)
    with pytest.raises(ValueError, match="positive"):
        load_audio(clip, max_seconds=0)
    with pytest.raises(ValueError, match="trim"):
        load_audio(clip, trim=True)
    assert len(load_audio(clip, max_seconds=float("inf"))[0]) == 16000


# ---------------------------------------------------------------------------------------------
# sample rates and channels


def _wav(x: np.ndarray, rate: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@pytest.mark.parametrize("rate", [1, 4000, MIN_SAMPLE_RATE - 1, MAX_SAMPLE_RATE + 1, 1_000_000])
def test_absurd_sample_rates_are_refused(rate):
    x = _speech(max(5 / rate, 0.05), rate)[:, 0] if rate > 100 else np.array([0.1, -0.2, 0.3, -0.1, 0.2], dtype=np.float32)
    said = rf"sample rate {rate} Hz is not supported.*{MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz"
    for source in ((x, rate), _wav(x, rate)):
        with pytest.raises(AudioError, match=said):
            load_audio(source)
        with pytest.raises(AudioError, match=said):
            load_prompt_audio(source, 16000, "librosa")
        with pytest.raises(AudioError, match=said):
            load_reference(source, "Hello.")
    with pytest.raises(AudioError, match=said):
        load_audio(x, sample_rate=rate)


@pytest.mark.parametrize("rate", [MIN_SAMPLE_RATE, 11025, 96000, MAX_SAMPLE_RATE])
def test_sample_rates_at_the_bounds_are_accepted(rate):
    x = _speech(0.5, rate)[:, 0]
    for source in ((x, rate), _wav(x, rate)):
        y, sr = load_audio(source)
        assert sr == rate and len(y) == len(x)


def test_channels_are_bounded(tmp_path):
    for channels, ok in ((MAX_CHANNELS, True), (MAX_CHANNELS + 1, False)):
        x = _speech(0.2, 16000, channels)
        path = tmp_path / f"{channels}.wav"
        sf.write(path, x, 16000, subtype="PCM_16")
        for source in (path, (x, 16000)):
            if ok:
                assert load_audio(source)[0].shape == (len(x),)
            else:
                with pytest.raises(AudioError, match=rf"{channels} channels.*at most {MAX_CHANNELS}"):
                    load_audio(source)
                with pytest.raises(AudioError, match=rf"{channels} channels.*at most {MAX_CHANNELS}"):
                    load_prompt_audio(source, 16000, "torchaudio")
                with pytest.raises(AudioError, match=rf"{channels} channels.*at most {MAX_CHANNELS}"):
                    load_reference(source, "Hello.")


def test_held_samples_are_bounded_when_channels_are_kept(tmp_path, monkeypatch):
    """A loader that keeps the channels (VoxCPM's torchaudio path) stops at MAX_HELD_SAMPLES."""
    path = _write_sf(tmp_path / "eight.wav", _speech(1.0, 16000, 8), 16000, "WAV", "PCM_16")
    monkeypatch.setattr(decode, "MAX_HELD_SAMPLES", 8 * 16000 // 2)
    with pytest.raises(AudioError, match="too large to decode: 8 channels at 16000 Hz"):
        load_prompt_audio(path, 16000, "torchaudio", max_seconds=30)
    assert load_audio(path, max_seconds=30)[0].shape == (16000,)  # mixed to mono as it goes: one channel held


# ---------------------------------------------------------------------------------------------
# memory: an hour of audio, refused with max_seconds=30, costs < 60 MB

_RSS_LIMIT_MB = 60

_MEASURE = r"""
import json, os, resource, sys, traceback
from koe.audio.io import load_audio
from koe.engines.voxcpm.audio import load_prompt_audio
from koe.engines.f5_tts.reference import load_reference

LOADERS = {
    "load_audio": lambda p: load_audio(p, max_seconds=30),
    "load_audio_bytes": lambda p: load_audio(open(p, "rb").read(), max_seconds=30),
    "voxcpm_librosa": lambda p: load_prompt_audio(p, 16000, "librosa", max_seconds=30),
    "voxcpm_torchaudio": lambda p: load_prompt_audio(p, 16000, "torchaudio", max_seconds=30),
    "f5": lambda p: load_reference(p, "Hello.", max_seconds=30),
}
results = {}
for case in json.loads(sys.argv[1]):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            y, sr = LOADERS[case["loader"]](case["path"])
            outcome = {"loaded_seconds": len(y) / sr}
        except Exception as e:
            outcome = {"error": f"{type(e).__name__}: {e}"}
        outcome["growth_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start) / 1024
        os.write(w, json.dumps(outcome).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    results[case["id"]] = json.loads(data)
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    """An hour (or 20 min) of audio each; every one decodes to over 100 MB of float32."""
    d = tmp_path_factory.mktemp("bombs")
    flac = _flac_tone(d / "tone_hour.flac", 3600)
    wav = _write_sf(d / "u8.wav", np.tile(_speech(10.0, 44100), (60, 1)), 44100, "WAV", "PCM_U8")  # 10 min, 26 MB
    short = _speech(10.0, 8000)
    mp3 = _encode_av(d / "ten.mp3", short, 8000, "mp3", "libmp3lame", options={"write_xing": "0", "id3v2_version": "0"})
    adts = _encode_av(d / "ten.aac", _speech(10.0, 16000), 16000, "adts", "aac", bit_rate=16000)
    (d / "hour.mp3").write_bytes(mp3.read_bytes() * 360)  # self-framing: no Xing header, so mpg123 sizes it from the bytes
    (d / "hour.aac").write_bytes(adts.read_bytes() * 360)
    return {
        "flac_tone_hour": flac,  # ~500 KB
        "flac_unknown_length": _flac_unknown_length(flac, d / "unknown.flac"),
        "wav_streaming_sizes": _wav_sizes(wav, d / "streaming.wav", 0xFFFFFFFF, 0xFFFFFFFF),
        "ogg_vorbis_hour": _repeat_packets(_write_sf(d / "ten.ogg", short, 8000, "OGG", "VORBIS"), d / "hour.ogg", 360, "ogg"),
        "mp3_no_xing_hour": d / "hour.mp3",
        "m4a_20min": _repeat_packets(_encode_av(d / "ten.m4a", _speech(10.0, 16000), 16000, "ipod", "aac", bit_rate=16000), d / "long.m4a", 120, "ipod"),
        "adts_hour": d / "hour.aac",
        "webm_opus_20min": _repeat_packets(
            _encode_av(d / "ten.webm", _speech(10.0, 48000), 48000, "webm", "libopus", bit_rate=12000), d / "long.webm", 120, "webm"
        ),
    }


RSS_CASES = [
    (bomb, "load_audio")
    for bomb in (
        "flac_tone_hour",
        "flac_unknown_length",
        "wav_streaming_sizes",
        "ogg_vorbis_hour",
        "mp3_no_xing_hour",
        "m4a_20min",
        "adts_hour",
        "webm_opus_20min",
    )
] + [
    ("flac_unknown_length", "load_audio_bytes"),
    ("adts_hour", "load_audio_bytes"),
    ("flac_unknown_length", "voxcpm_librosa"),
    ("flac_unknown_length", "voxcpm_torchaudio"),
    ("adts_hour", "voxcpm_librosa"),
    ("adts_hour", "voxcpm_torchaudio"),
    ("flac_unknown_length", "f5"),
    ("adts_hour", "f5"),
    ("ogg_vorbis_hour", "f5"),
]


@pytest.fixture(scope="module")
def rss(bombs) -> dict[str, dict]:
    """Each case run in a forked child of one fresh interpreter: its own peak RSS over its own start."""
    cases = [{"id": f"{b}-{loader}", "path": str(bombs[b]), "loader": loader} for b, loader in RSS_CASES]
    out = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps(cases)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_bombs_would_be_big(bombs):
    """The files are small and long: unbounded, each decodes to over 100 MB of float32."""
    assert bombs["flac_tone_hour"].stat().st_size < 700_000
    for name in ("flac_tone_hour", "wav_streaming_sizes", "ogg_vorbis_hour", "mp3_no_xing_hour"):
        with sf.SoundFile(bombs[name]) as f:
            assert f.frames * f.channels * 4 > 100e6, name
    with sf.SoundFile(bombs["flac_unknown_length"]) as f:
        assert f.frames == 2**63 - 1  # libsndfile: unknown length
    for name in ("m4a_20min", "adts_hour", "webm_opus_20min"):
        with av.open(str(bombs[name])) as c:
            assert c.duration / av.time_base * c.streams.audio[0].sample_rate * 4 > 70e6, name


@pytest.mark.parametrize("bomb,loader", RSS_CASES, ids=[f"{b}-{lo}" for b, lo in RSS_CASES])
def test_bomb_is_refused_in_bounded_memory(rss, bomb, loader):
    result = rss[f"{bomb}-{loader}"]
    assert "error" in result, result
    assert "too long" in result["error"] and "at most 30 s" in result["error"], result
    assert result["growth_mb"] < _RSS_LIMIT_MB, result


# -- the engines' own loaders keep a bound when their caller gives none --------------------------
def test_qwen_reference_audio_is_bounded_and_trims_exactly(tmp_path):
    from koe.engines.qwen3_tts.voice import MAX_REF_SECONDS, reference_audio

    rate = 8000
    t = np.arange(int((MAX_REF_SECONDS + 10) * rate)) / rate
    path = tmp_path / "long.flac"
    sf.write(path, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate, format="FLAC")
    with pytest.raises(AudioError, match="the maximum is 30 s. Pass trim=True"):
        reference_audio(path)
    trimmed, sr = reference_audio(path, trim=True)
    full, _ = load_audio(path)
    assert sr == rate and np.array_equal(trimmed, full[: int(MAX_REF_SECONDS * rate)])
