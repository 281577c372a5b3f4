"""Output encoding: wav, flac, mp3, opus (Ogg), aac (ADTS), m4a (MP4) and raw pcm (s16le).

Every format goes through one `StreamEncoder` (`feed(samples) -> bytes`, `finish() -> bytes`), so
audio can be sent as it is made; `encode_audio` is the one-shot view of it. Streamed WAV carries a
header of unknown length (sizes 0xFFFFFFFF, as OpenAI's streamed WAV does); one-shot files get exact
headers (and the MP3 gapless info) because they are written to a seekable buffer. A speed change
(`speed`, pitch kept) runs in front of the encoder, streamed too.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from koe.service.errors import InvalidRequest
from koe.service.synthesis.tempo import TempoChanger


@dataclass(frozen=True)
class AudioFormat:
    """An output format: the FFmpeg muxer and encoder that make it, and how it is served."""

    name: str
    extension: str
    media_type: str
    container: str | None  # FFmpeg muxer; None for raw pcm
    codec: str
    sample_format: str  # what the encoder is fed
    bit_rate: int | None = None
    fixed_rate: int | None = None  # a rate the codec needs (Opus: 48 kHz); None keeps the input's
    stream_options: dict[str, str] = field(default_factory=dict)  # muxer options when streaming
    file_options: dict[str, str] = field(default_factory=dict)  # muxer options for a whole file

    def output_rate(self, input_rate: int) -> int:
        return self.fixed_rate or int(input_rate)


FORMATS: dict[str, AudioFormat] = {
    f.name: f
    for f in (
        AudioFormat("wav", ".wav", "audio/wav", "wav", "pcm_s16le", "s16"),
        AudioFormat("flac", ".flac", "audio/flac", "flac", "flac", "s16"),
        AudioFormat("mp3", ".mp3", "audio/mpeg", "mp3", "libmp3lame", "fltp", bit_rate=96_000),
        AudioFormat("opus", ".ogg", "audio/ogg", "ogg", "libopus", "flt", bit_rate=48_000, fixed_rate=48_000, stream_options={"page_duration": "100000"}),
        AudioFormat("aac", ".aac", "audio/aac", "adts", "aac", "fltp", bit_rate=96_000),
        AudioFormat(
            "m4a",
            ".m4a",
            "audio/mp4",
            "mp4",
            "aac",
            "fltp",
            bit_rate=96_000,
            stream_options={"movflags": "frag_keyframe+empty_moov+default_base_moof", "frag_duration": "200000"},
        ),
        AudioFormat("pcm", ".pcm", "audio/pcm", None, "pcm_s16le", "s16"),
    )
}

EXTENSIONS: dict[str, str] = {
    ".wav": "wav",
    ".wave": "wav",
    ".flac": "flac",
    ".mp3": "mp3",
    ".ogg": "opus",
    ".opus": "opus",
    ".oga": "opus",
    ".aac": "aac",
    ".adts": "aac",
    ".m4a": "m4a",
    ".mp4": "m4a",
    ".pcm": "pcm",
    ".raw": "pcm",
}


def get_format(name: str | AudioFormat) -> AudioFormat:
    """The `AudioFormat` called `name` (case-insensitive), else `InvalidRequest` listing the valid ones."""
    if isinstance(name, AudioFormat):
        return name
    fmt = FORMATS.get(str(name).strip().lower().lstrip("."))
    if fmt is None:
        raise InvalidRequest(f"unsupported audio format {name!r}; choose one of {', '.join(FORMATS)}", param="response_format")
    return fmt


def format_for_path(path: str | os.PathLike, explicit: str | None = None) -> AudioFormat:
    """The format to write `path` in: `explicit` if given, else from its extension (`InvalidRequest` if unknown)."""
    if explicit:
        return get_format(explicit)
    ext = Path(path).suffix.lower()
    if ext not in EXTENSIONS:
        known = ", ".join(sorted(EXTENSIONS))
        raise InvalidRequest(f"cannot tell the audio format from {Path(path).name!r}; use one of {known} or pass --format")
    return FORMATS[EXTENSIONS[ext]]


class _Sink:
    """A write-only, non-seekable byte sink: FFmpeg muxes as it would to a pipe."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


class StreamEncoder:
    """Encode float32 mono audio to `fmt` as it arrives.

    `feed(samples)` returns the bytes ready so far (maybe none); `finish()` returns the rest; the
    concatenation is one complete, decodable file/stream. With `seekable=True` (one-shot files) all
    bytes come from `finish()`, and headers carry exact lengths. `speed` (0.25-4.0) stretches time
    and keeps pitch. `duration` is the seconds of audio encoded so far.
    """

    def __init__(self, fmt: str | AudioFormat, sample_rate: int, *, speed: float = 1.0, seekable: bool = False) -> None:
        self.format = get_format(fmt)
        self.input_rate = int(sample_rate)
        if self.input_rate <= 0:
            raise InvalidRequest(f"sample rate must be positive, got {sample_rate}")
        self.sample_rate = self.format.output_rate(self.input_rate)
        self.seekable = seekable
        self._tempo = TempoChanger(self.input_rate, speed)
        self._samples_out = 0  # at the input rate, after the speed change
        self._finished = False
        self._raw = self.format.container is None
        if not self._raw:
            self._open_container()

    @property
    def duration(self) -> float:
        return self._samples_out / self.input_rate

    def _open_container(self) -> None:
        fmt = self.format
        self._sink: io.BytesIO | _Sink = io.BytesIO() if self.seekable else _Sink()
        options = dict(fmt.file_options if self.seekable else {"flush_packets": "1", **fmt.stream_options})
        self._container = av.open(self._sink, mode="w", format=fmt.container, options=options, buffer_size=4096)
        self._stream = self._container.add_stream(fmt.codec, rate=self.sample_rate, layout="mono")
        if fmt.bit_rate:
            self._stream.codec_context.bit_rate = fmt.bit_rate
        frame_size = self._stream.codec_context.frame_size or None
        self._resampler = av.AudioResampler(format=fmt.sample_format, layout="mono", rate=self.sample_rate, frame_size=frame_size)
        self._pts = 0

    def feed(self, samples: np.ndarray) -> bytes:
        """Encode more float32 mono samples (values in [-1, 1]); returns the bytes ready now."""
        if self._finished:
            raise RuntimeError("StreamEncoder.feed after finish")
        return self._encode(self._tempo.feed(samples))

    def finish(self) -> bytes:
        """Flush everything; returns the last bytes (all of them when seekable)."""
        if self._finished:
            return b""
        out = self._encode(self._tempo.finish())
        self._finished = True
        if self._raw:
            return out
        self._mux(self._resampler.resample(None))
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.start_encoding()  # writes the header even for an empty utterance (no-op otherwise)
        self._container.close()
        if isinstance(self._sink, io.BytesIO):
            return self._sink.getvalue()
        return out + self._sink.take()

    def _encode(self, x: np.ndarray) -> bytes:
        x = np.clip(np.nan_to_num(np.asarray(x, dtype=np.float32).reshape(-1)), -1.0, 1.0)
        self._samples_out += x.size
        if self._raw:
            return _to_s16le(x)
        if x.size == 0:
            return b""
        frame = av.AudioFrame.from_ndarray(x[None, :], format="flt", layout="mono")  # (1, n) packed mono
        frame.sample_rate = self.input_rate
        frame.time_base = Fraction(1, self.input_rate)
        frame.pts = self._pts
        self._pts += x.size
        self._mux(self._resampler.resample(frame))
        return b"" if isinstance(self._sink, io.BytesIO) else self._sink.take()

    def _mux(self, frames: list) -> None:
        for f in frames:
            for packet in self._stream.encode(f):
                self._container.mux(packet)

    def close(self) -> None:
        """Abandon an unfinished encoding (e.g. a cancelled stream) and free FFmpeg's buffers."""
        if not self._finished and not self._raw:
            self._finished = True
            with contextlib.suppress(av.error.FFmpegError, ValueError):
                self._container.close()


def _to_s16le(x: np.ndarray) -> bytes:
    """float32 -> s16le as FFmpeg converts for the other formats (`lrintf(x * 32768)`, clipped), so
    raw pcm carries the same samples as wav and flac."""
    return np.clip(np.rint(x * np.float32(32768.0)), -32768, 32767).astype("<i2").tobytes()


@dataclass(frozen=True)
class EncodedAudio:
    """A whole encoded file: its bytes, format, sample rate and duration in seconds."""

    data: bytes
    format: AudioFormat
    sample_rate: int
    duration: float


def encode_audio(samples: np.ndarray, sample_rate: int, fmt: str | AudioFormat, *, speed: float = 1.0) -> EncodedAudio:
    """Encode float32 mono `samples` to a complete file in `fmt` (speed-changed first when speed != 1)."""
    enc = StreamEncoder(fmt, sample_rate, speed=speed, seekable=True)
    data = enc.feed(samples) + enc.finish()
    return EncodedAudio(data, enc.format, enc.sample_rate, enc.duration)
