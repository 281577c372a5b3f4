"""F5-TTS's reference clip: upstream's preprocessing, sample for sample, without pydub or torchaudio.

Upstream (`f5_tts.infer.utils_infer`, f5-tts 1.1.22) prepares a reference like this:

1. `AudioSegment.from_file(path)`: for a `.wav`, pydub's own RIFF reader (integer PCM; 8-bit made
   signed; 24-bit widened to 32-bit by prepending a sign-fill byte, i.e. `v * 256 + (255 if v < 0
   else 0)`); anything else through ffmpeg.
2. `split_on_silence(min_silence_len=1000, silence_thresh=-50, keep_silence=1000, seek_step=10)`,
   then the pieces are appended until the total would pass 12 s (once past 6 s); if that is still
   over 12 s the same with `(100 ms, -40 dBFS)`; if still over 12 s, a hard cut at 12000 ms.
3. `remove_silence_edges`: `detect_leading_silence(-42 dBFS, 10 ms chunks)` at both ends.
4. `+ AudioSegment.silent(50)`: 50 ms of zeros, made at 11025 Hz 16-bit mono and converted by
   pydub's `_sync` to the clip's channels, rate (`audioop.ratecv`) and sample width. Appending to
   `AudioSegment.silent(0)` in step 2 syncs the other way too: a clip below 11025 Hz is resampled
   piece by piece with `ratecv` to 11025 Hz, and 8-bit audio widened to 16-bit.
5. Export as WAV (the sample width kept: 16 or 32 bit), `torchaudio.load` it (float32
   `int / 2**(bits-1)`, `(channels, frames)`), and in `infer_batch_process` average the channels
   (`torch.mean(dim=0, keepdim=True)`), raise the level to `target_rms` if below it, and resample to
   24 kHz with `torchaudio.transforms.Resample`.

This module reproduces every step on integer sample arrays: millisecond positions become frames as
pydub computes them (`int(ms * (rate / 1000.0))`, lengths `round(1000 * frames / rate)`, slices
capped at the length and zero-filled when the rounded length runs past the data), rms as
`audioop.rms` (`trunc(sqrt(sum of squares / samples))` over all interleaved samples) and the dBFS
comparisons with pydub's own float formulas. Silence is found with prefix sums of squared samples
instead of pydub's window-by-window loop, with the same cut points. For 16-bit (and 8-bit) audio
the prefix sums are exact integers and so equal to audioop's double sums; for 32-bit samples
(24-bit files included) audioop's double sum can round, so a window whose rms sits within rounding
distance of an integer is recomputed the way audioop adds (sequential float64).

Deliberate differences from upstream: a missing transcript is an error (upstream would run Whisper),
and audio that is empty, all silent or too short after trimming is refused instead of becoming a
50 ms clip of silence.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from koe.audio.decode import EncodedAudio, check_channels, check_sample_rate, decode, frame_limit, header_frames, open_soundfile
from koe.audio.errors import AudioError, AudioTooLong
from koe.audio.pcm import SILENT_RATE, Pcm, concat, converted, ms_of, parse_wav, pcm16_from_float, pcm_from_decoded, silent, sync_params, widen_24_bit
from koe.audio.silence import WindowRms, remove_silence_edges, split_on_silence
from koe.audio.sinc_resample import resample_sinc
from koe.engines.base import UnsupportedVoice
from koe.engines.f5_tts.spec import MIN_REFERENCE_S, SAMPLE_RATE
from koe.engines.f5_tts.text import end_ref_text

__all__ = [
    "MIN_REFERENCE_SECONDS",
    "TARGET_SAMPLE_RATE",
    "ReferenceClip",
    "ReferenceSource",
    "load_reference",
    "normalised_reference",
    "prepare_reference",
]

TARGET_SAMPLE_RATE = SAMPLE_RATE  # F5-TTS's mel rate
MIN_REFERENCE_SECONDS = MIN_REFERENCE_S  # koe's floor on what is left after silence trimming

# upstream's preprocessing constants (preprocess_ref_audio_text / remove_silence_edges)
_LONG_SILENCE = (1000, -50.0)  # (min_silence_len ms, silence_thresh dBFS), first pass
_SHORT_SILENCE = (100, -40.0)  # second pass, when the first leaves more than 12 s
_KEEP_SILENCE_MS = 1000
_SEEK_STEP_MS = 10
_MAX_MS = 12000
_MIN_MS_BEFORE_STOP = 6000
_EDGE_THRESHOLD_DB = -42.0
_EDGE_CHUNK_MS = 10
_PAD_MS = 50

ReferenceSource = str | os.PathLike | bytes | bytearray | memoryview | tuple


# ---------------------------------------------------------------------------------------------
# the result


@dataclass(frozen=True)
class ReferenceClip:
    """A reference clip as upstream hands it to the model, before level and rate normalisation.

    `samples`: float32 mono `(n,)` at `sample_rate` (the rate of upstream's temporary WAV: the
    source rate, or 11025 Hz for sources below it); the channel mean of `int / 2**(bits-1)`.
    `text`: the transcript with upstream's ending fix-up. `clip_steps`: which of upstream's three
    12-second clippings fired (1: at a long silence, 2: at a short silence, 3: hard cut), in order.
    `leading_trim_ms` / `trailing_trim_ms`: silence removed at the edges (pydub ms). `seconds` is the
    clip's length including the 50 ms of silence upstream appends; `source_seconds` the input's.
    """

    samples: np.ndarray
    sample_rate: int
    text: str
    channels: int
    sample_width: int
    source_seconds: float
    clip_steps: tuple[int, ...] = ()
    leading_trim_ms: int = 0
    trailing_trim_ms: int = 0

    @property
    def clipped(self) -> bool:
        return bool(self.clip_steps)

    @property
    def seconds(self) -> float:
        return self.samples.shape[0] / self.sample_rate

    @property
    def info(self) -> dict:
        """What preprocessing did, JSON-friendly (for a voice prompt's metadata)."""
        return {
            "source_seconds": round(self.source_seconds, 3),
            "clipped": self.clipped,
            "clip_steps": list(self.clip_steps),
            "leading_trim_ms": self.leading_trim_ms,
            "trailing_trim_ms": self.trailing_trim_ms,
            "channels": self.channels,
            "sample_width": self.sample_width,
        }


def _gather(pieces: list[Pcm]) -> tuple[Pcm, bool]:
    """upstream's loop: append pieces to `silent(0)` until, once past 6 s, the next would pass 12 s.

    Each `+=` syncs: every piece is converted to (channels, max(rate, 11025), max(width, 2)).
    Returns the result and whether the loop stopped early.
    """
    params = sync_params(silent(0), *pieces) if pieces else (1, SILENT_RATE, 2)
    channels, rate, width = params
    kept: list[Pcm] = []
    frames = 0
    stopped = False
    for piece in pieces:
        piece = converted(piece, channels, rate, width)
        if ms_of(frames, rate) > _MIN_MS_BEFORE_STOP and ms_of(frames + piece.frames, rate) > _MAX_MS:
            stopped = True
            break
        kept.append(piece)
        frames += piece.frames
    return concat(kept, channels, rate, width), stopped


def _decode_other(enc: EncodedAudio, max_seconds: float | None) -> Pcm:
    """Non-WAV (or non-integer WAV) bytes: decode with koe's loaders (bounded), to integer PCM block by block."""
    float_source = enc.head[:4] == b"RIFF" and enc.head[8:12] == b"WAVE"  # a float WAV: ffmpeg picks pcm_s32le
    ints, rate = decode(enc, max_seconds=max_seconds, reduce=lambda block: pcm_from_decoded(block, float_source)[0])
    if ints.ndim == 1:
        ints = ints[:, None]
    return Pcm(ints, int(rate), 4 if float_source else 2)


def _refuse_long_wav(enc: EncodedAudio, max_seconds: float) -> None:
    """Refuse a WAV whose header is over `max_seconds` before pydub's reader takes all of it in."""
    f = open_soundfile(enc)
    if f is None:
        return
    with f:
        frames, rate = header_frames(f), int(f.samplerate)
    if frames is not None and rate > 0 and frames > frame_limit(max_seconds, rate):
        raise AudioTooLong(max_seconds, frames / rate)


# ---------------------------------------------------------------------------------------------
# transcript


def _checked_transcript(text: str | None) -> str:
    if text is None or not isinstance(text, str) or not text.strip():
        raise UnsupportedVoice(
            "F5-TTS needs the reference's transcript: pass the exact words spoken in the clip as its text "
            "(upstream would transcribe the clip with Whisper; koe does not run an ASR model)"
        )
    return text


# ---------------------------------------------------------------------------------------------
# the pipeline


def _prepare(seg: Pcm, text: str) -> ReferenceClip:
    text = end_ref_text(_checked_transcript(text))
    if seg.frames == 0:
        raise AudioError("reference audio has no samples (empty or zero-length)")
    if seg.width == 3:
        seg = widen_24_bit(seg)
    source_seconds = seg.frames / seg.rate

    rms = WindowRms(seg)
    steps: list[int] = []
    pieces = split_on_silence(seg, *_LONG_SILENCE, rms, _KEEP_SILENCE_MS, _SEEK_STEP_MS)
    if not pieces:
        raise AudioError("reference audio is silent (nothing louder than -50 dBFS)")
    wave, stopped = _gather(pieces)
    if stopped:
        steps.append(1)
    if wave.ms() > _MAX_MS:
        wave, stopped = _gather(split_on_silence(seg, *_SHORT_SILENCE, rms, _KEEP_SILENCE_MS, _SEEK_STEP_MS))
        if stopped:
            steps.append(2)
    if wave.ms() > _MAX_MS:
        wave = wave.slice_ms(None, _MAX_MS)
        steps.append(3)

    trimmed, lead, tail = remove_silence_edges(wave, _EDGE_THRESHOLD_DB, _EDGE_CHUNK_MS)
    if trimmed.frames == 0:
        raise AudioError("reference audio is silent: nothing is left above -42 dBFS once the silent edges are trimmed")
    if trimmed.frames / trimmed.rate < MIN_REFERENCE_SECONDS:
        raise AudioError(
            f"reference audio is too short: {trimmed.frames / trimmed.rate:.2f} s of sound once silence is trimmed; "
            f"give at least {MIN_REFERENCE_SECONDS} s of speech (F5-TTS works best with 3-12 s)"
        )
    channels, rate, width = sync_params(trimmed, silent(_PAD_MS))
    final = concat([converted(trimmed, channels, rate, width), converted(silent(_PAD_MS), channels, rate, width)], channels, rate, width)

    # the exported WAV read back as float32 (channels, frames), then upstream's channel mean
    scale = float(2 ** (8 * final.width - 1))
    by_channel = torch.from_numpy((final.data.T / scale).astype(np.float32))
    if by_channel.shape[0] > 1:
        by_channel = torch.mean(by_channel, dim=0, keepdim=True)
    return ReferenceClip(
        samples=by_channel[0].numpy().copy(),
        sample_rate=final.rate,
        text=text,
        channels=final.channels,
        sample_width=final.width,
        source_seconds=source_seconds,
        clip_steps=tuple(steps),
        leading_trim_ms=lead,
        trailing_trim_ms=tail,
    )


def prepare_reference(pcm: np.ndarray, sample_rate: int, sample_width_bytes: int, text: str) -> ReferenceClip:
    """Upstream's reference preprocessing of integer PCM `(frames, channels)` (or `(frames,)`).

    `sample_width_bytes`: 2 for 16-bit, 3 for 24-bit (values in the 24-bit range; widened as pydub
    widens them), 4 for 32-bit, 1 for 8-bit (signed values, as pydub holds them). Raises
    `UnsupportedVoice` without a transcript and `AudioError` for empty, silent or too short audio, a
    sample rate outside 8000-384000 Hz or more than 64 channels.
    """
    pcm = np.asarray(pcm)
    if not np.issubdtype(pcm.dtype, np.integer):
        raise AudioError(f"prepare_reference needs integer PCM, got {pcm.dtype}")
    if pcm.ndim == 1:
        pcm = pcm[:, None]
    if pcm.ndim != 2 or pcm.shape[1] < 1:
        raise AudioError(f"PCM must be (frames, channels), got shape {pcm.shape}")
    if sample_width_bytes not in (1, 2, 3, 4):
        raise AudioError(f"sample width must be 1, 2, 3 or 4 bytes, got {sample_width_bytes}")
    check_sample_rate(int(sample_rate))
    check_channels(pcm.shape[1])
    limit = 1 << (8 * sample_width_bytes - 1)
    if pcm.size and (pcm.min() < -limit or pcm.max() >= limit):
        raise AudioError(f"PCM values out of range for {8 * sample_width_bytes}-bit samples")
    return _prepare(Pcm(pcm.astype(np.int64), int(sample_rate), int(sample_width_bytes)), text)


def load_reference(source: ReferenceSource, text: str, *, max_seconds: float | None = None) -> ReferenceClip:
    """Load and prepare a reference: a file path, the bytes of a file, a binary file object, or `(samples, sample_rate)`.

    Integer PCM WAV (8/16/24/32-bit, any extension) is read as pydub reads it, so the result is
    upstream's bit for bit. Other formats are decoded by koe's loaders (libsndfile, else PyAV) and
    turned into 16-bit PCM as ffmpeg would (float WAV: 32-bit), which matches upstream only as far
    as the decoders agree. A `(float array (n,) or (n, channels), sample_rate)` tuple is stored as
    16-bit PCM the way `soundfile.write` writes PCM_16 (`pcm16_from_float`), as if saved to a WAV
    first; int16 / int32 arrays are taken as 16 / 32-bit PCM.

    `max_seconds`: refuse a longer source (`AudioTooLong`) before preparing it; a compressed file
    is then decoded only up to that length (koe.audio.decode), whatever it expands to. Sample
    rates outside 8000-384000 Hz and more than 64 channels are refused.
    """
    if isinstance(source, tuple):
        _checked_transcript(text)
        return _prepare(_within(_from_array(source), max_seconds), text)
    enc = EncodedAudio.read(source, "reference audio")
    _checked_transcript(text)
    data = enc.source
    if max_seconds is not None and enc.head[:4] in (b"RIFF", b"RIFX"):
        _refuse_long_wav(enc, max_seconds)
    seg = parse_wav(data)
    if seg is None:
        seg = _decode_other(enc, max_seconds)
    return _prepare(_within(seg, max_seconds, enc.name), text)


def _within(seg: Pcm, max_seconds: float | None, name: str | None = None) -> Pcm:
    """`seg` if its rate, channels and length are ones koe accepts."""
    check_sample_rate(seg.rate, name)
    check_channels(seg.channels, name)
    if max_seconds is not None and seg.frames > frame_limit(max_seconds, seg.rate):
        raise AudioTooLong(max_seconds, seg.frames / seg.rate)
    return seg


def _from_array(source: tuple) -> Pcm:
    if len(source) != 2 or not isinstance(source[0], np.ndarray):
        raise AudioError("a tuple audio source must be (numpy array, sample_rate)")
    samples, rate = source
    try:
        rate = int(rate)
    except (TypeError, ValueError) as exc:
        raise AudioError(f"invalid sample rate: {rate!r}") from exc
    check_sample_rate(rate)
    if samples.ndim == 1:
        samples = samples[:, None]
    if samples.ndim != 2 or samples.shape[1] < 1:
        raise AudioError(f"waveform must be (n,) or (n, channels), got shape {samples.shape}")
    if samples.dtype == np.int16:
        return Pcm(samples.astype(np.int64), rate, 2)
    if samples.dtype == np.int32:
        return Pcm(samples.astype(np.int64), rate, 4)
    if not np.issubdtype(samples.dtype, np.floating):
        raise AudioError(f"waveform dtype {samples.dtype} is not float32/float64 (or int16/int32 PCM)")
    if not np.isfinite(samples).all():
        raise AudioError("audio contains NaN or infinite samples")
    return Pcm(pcm16_from_float(samples).astype(np.int64), rate, 2)


def normalised_reference(clip: ReferenceClip, target_rms: float = 0.1) -> tuple[torch.Tensor, float]:
    """The clip as F5-TTS conditions on it: float32 `(1, n)` at 24 kHz, and the clip's rms.

    `clip` is a `ReferenceClip` or anything with its `samples` (float32 mono) and `sample_rate`.

    upstream's `infer_batch_process`: `rms = sqrt(mean(square(audio)))` in float32 torch ops; a clip
    quieter than `target_rms` is scaled by `target_rms / rms` (as `audio * target_rms / rms`);
    then `Resample(sr, 24000)` (here `resample_sinc`). The rms returned is the float32 value.
    """
    audio = torch.from_numpy(np.ascontiguousarray(clip.samples, dtype=np.float32).copy())[None]  # (1, n)
    rms = torch.sqrt(torch.mean(torch.square(audio)))
    if rms < target_rms:
        audio = audio * target_rms / rms
    if clip.sample_rate != TARGET_SAMPLE_RATE:
        audio = resample_sinc(audio, clip.sample_rate, TARGET_SAMPLE_RATE)
    return audio, float(rms)
