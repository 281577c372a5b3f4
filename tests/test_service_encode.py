"""Output encoding: every format really is that format (decoded back with PyAV), streamed or whole; speed keeps pitch."""

import io

import av
import numpy as np
import pytest

from koe.service.errors import InvalidRequest
from koe.service.synthesis.encode import FORMATS, StreamEncoder, encode_audio, format_for_path, get_format
from koe.service.synthesis.tempo import TempoChanger, atempo_chain, change_speed, check_speed

SR = 24000
# format -> (FFmpeg container name, decoder name, decoded sample rate)
EXPECTED = {
    "wav": ("wav", "pcm_s16le", SR),
    "flac": ("flac", "flac", SR),
    "mp3": ("mp3", "mp3float", SR),
    "opus": ("ogg", "opus", 48000),
    "aac": ("aac", "aac", SR),
    "m4a": ("mov,mp4,m4a,3gp,3g2,mj2", "aac", SR),
}


def tone(seconds: float = 1.0, freq: float = 220.0, sr: int = SR) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def decode(data: bytes) -> tuple[str, str, int, np.ndarray]:
    """(container, codec, sample rate, mono float samples) of an encoded file."""
    with av.open(io.BytesIO(data)) as c:
        stream = c.streams.audio[0]
        frames = [_as_float(f).reshape(len(f.layout.channels), -1) for f in c.decode(stream)]
        rate = stream.codec_context.sample_rate
        return c.format.name, stream.codec_context.name, rate, np.concatenate(frames, axis=1)[0]


def _as_float(frame) -> np.ndarray:
    x = frame.to_ndarray()
    scale = {"s16": 32768.0, "s32": 2147483648.0}.get(frame.format.name.rstrip("p"), 1.0)
    return (x.astype(np.float64) / scale).astype(np.float32)


def dominant_freq(x: np.ndarray, sr: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spectrum) * sr / len(x))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_whole_file_is_that_format(name):
    x = tone(1.0)
    enc = encode_audio(x, SR, name)
    container, codec, rate, y = decode(enc.data)
    assert (container, codec, rate) == EXPECTED[name]
    assert enc.sample_rate == rate and enc.format.name == name
    assert abs(len(y) / rate - 1.0) < 0.08  # lossy codecs add priming/padding of a few ms
    assert abs(dominant_freq(y[: rate // 2], rate) - 220) < 10


@pytest.mark.parametrize("name", list(EXPECTED))
def test_streamed_output_decodes_and_arrives_early(name):
    x = tone(2.0)
    enc = StreamEncoder(name, SR)
    parts = [enc.feed(x[i : i + 2400]) for i in range(0, len(x), 2400)]  # 0.1 s chunks
    tail = enc.finish()
    assert sum(len(p) for p in parts) > 0, "nothing came out before finish()"
    container, codec, rate, y = decode(b"".join(parts) + tail)
    assert (container, codec, rate) == EXPECTED[name]
    assert abs(len(y) / rate - 2.0) < 0.1
    assert enc.duration == pytest.approx(2.0)


def test_streamed_wav_has_unknown_length_header_and_exact_pcm():
    x = tone(0.5)
    enc = StreamEncoder("wav", SR)
    data = enc.feed(x) + enc.finish()
    assert data[:4] == b"RIFF" and data[4:8] == b"\xff\xff\xff\xff" and data[8:12] == b"WAVE"
    _, _, _, y = decode(data)
    np.testing.assert_allclose(y, x, atol=2e-4)


def test_whole_wav_has_exact_sizes():
    data = encode_audio(tone(0.5), SR, "wav").data
    assert int.from_bytes(data[4:8], "little") == len(data) - 8


def test_pcm_is_raw_s16le():
    x = tone(0.25)
    enc = StreamEncoder("pcm", SR)
    data = enc.feed(x[:1000]) + enc.feed(x[1000:]) + enc.finish()
    assert len(data) == 2 * len(x)
    y = np.frombuffer(data, "<i2").astype(np.float32) / 32767
    np.testing.assert_allclose(y, x, atol=1e-4)
    assert encode_audio(x, SR, "pcm").data == data


@pytest.mark.parametrize("speed", [0.25, 0.5, 1.5, 2.0, 4.0])
def test_speed_changes_duration_keeps_pitch(speed):
    x = tone(2.0, 440.0)
    y = change_speed(x, SR, speed)
    assert len(x) / len(y) == pytest.approx(speed, rel=0.03)
    mid = y[len(y) // 4 : len(y) // 4 + SR // 4]
    assert dominant_freq(mid, SR) == pytest.approx(440.0, abs=12)


def test_speed_streamed_matches_ratio_and_encodes():
    x = tone(2.0)
    t = TempoChanger(SR, 2.0)
    pieces = [t.feed(x[i : i + 1200]) for i in range(0, len(x), 1200)] + [t.finish()]
    assert len(x) / sum(len(p) for p in pieces) == pytest.approx(2.0, rel=0.03)
    enc = StreamEncoder("mp3", SR, speed=0.5)
    data = b"".join(enc.feed(x[i : i + 4800]) for i in range(0, len(x), 4800)) + enc.finish()
    _, codec, rate, y = decode(data)
    assert codec == "mp3float" and abs(len(y) / rate - 4.0) < 0.15


def test_speed_one_is_untouched():
    x = tone(0.3)
    np.testing.assert_array_equal(change_speed(x, SR, 1.0), x)


@pytest.mark.parametrize("bad", [0.1, 4.5, 0, -1, float("nan"), "fast"])
def test_speed_out_of_range_is_rejected(bad):
    with pytest.raises(InvalidRequest, match="speed"):
        check_speed(bad)


def test_atempo_chain_stays_in_filter_range():
    for speed in (0.25, 0.3, 0.5, 1.0, 3.0, 4.0):
        chain = atempo_chain(speed)
        assert all(0.5 <= f <= 2.0 for f in chain)
        assert np.prod(chain) == pytest.approx(speed)


def test_format_names_and_extensions():
    assert format_for_path("x.mp3").name == "mp3"
    assert format_for_path("x.ogg").name == "opus"
    assert format_for_path("x.m4a").name == "m4a"
    assert format_for_path("x.bin", "flac").name == "flac"
    assert get_format("MP3") is FORMATS["mp3"]
    with pytest.raises(InvalidRequest, match="cannot tell"):
        format_for_path("x.xyz")
    with pytest.raises(InvalidRequest, match="unsupported audio format 'ogg3'"):
        get_format("ogg3")


def test_encoder_handles_empty_and_clipping_input():
    enc = encode_audio(np.array([2.0, -2.0, np.nan] * 1000, dtype=np.float32), SR, "flac")
    _, _, _, y = decode(enc.data)
    assert np.all(np.abs(y) <= 1.0)
    assert StreamEncoder("wav", SR).finish()[:4] == b"RIFF"
