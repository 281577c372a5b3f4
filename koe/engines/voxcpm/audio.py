"""VoxCPM's prompt / reference audio, sample for sample as upstream (voxcpm 2.0.3) reads it.

Upstream reads a clip from a path in one of two ways, and `load_prompt_audio(..., method=...)`
reproduces each:

* `"librosa"`, VoxCPM2 (`VoxCPM2Model._encode_wav`): `librosa.load(path, sr=16000, mono=True)`.
  librosa 0.11 opens the file with soundfile and reads float32 `(frames, channels)`, transposes
  it to `(channels, frames)`, averages over the channel axis in float32 (`librosa.to_mono`:
  `np.mean(y, axis=0)`), then `librosa.resample(res_type="soxr_hq")`: `soxr.resample` of the
  float32 row, trimmed or zero-padded to `ceil(frames * target / rate)`, float32
  (`koe.audio.resample.resample` is that call). A file libsndfile cannot open makes librosa fall
  back to audioread, which (with FFmpeg installed) pipes `ffmpeg -i path -f s16le -`: 16-bit PCM,
  read back as `int / 32768`. koe decodes such files with PyAV (FFmpeg's libraries) and rounds to
  16 bits as FFmpeg's float-to-s16 conversion does (`clip(rint(x * 32768))`).
* `"torchaudio"`, VoxCPM 1.5 and 0.5B (`VoxCPMModel.build_prompt_cache`): `torchaudio.load(path)`
  (torchaudio 2.11 decodes with torchcodec, i.e. FFmpeg, to float32 `(channels, frames)`), then
  `audio.mean(dim=0, keepdim=True)` if there is more than one channel, then
  `torchaudio.functional.resample(audio, rate, target)` if the rates differ: the Hann-windowed
  sinc at its defaults (6 zero crossings, roll-off 0.99) with the kernel built in float32
  (`koe.audio.sinc_resample.resample_sinc(..., kernel_dtype=torch.float32)`; the transform
  `torchaudio.transforms.Resample` builds it in float64 and gives other bits). For PCM / float
  WAV, W64, RF64, AIFF and FLAC, FFmpeg's float32 samples are libsndfile's (integer / 2**(bits-1),
  floats as stored), so koe reads those with soundfile; everything else with PyAV as torchcodec
  does with FFmpeg.

Bit-exact (the same float32 samples as upstream on the same numpy / soxr / torch builds): WAV
(8/16/24/32-bit PCM, float, double), FLAC, AIFF, W64, RF64 with either method; with
`"librosa"` also every other format libsndfile reads (ogg/vorbis, ogg/opus, mp3, ...), since
upstream reads them through the same libsndfile. Not guaranteed: formats only FFmpeg reads
(m4a/aac, webm, ...) with `"librosa"` (koe's PyAV build against whatever `ffmpeg` upstream's
audioread runs; 32-bit integer codecs such as 24-bit ALAC are rounded, FFmpeg truncates), and
non-PCM formats with `"torchaudio"` (PyAV's FFmpeg libraries against torchcodec's).

`source` may be a path, the bytes of a file, a binary file object (read to its end), or
`(samples, sample_rate)`: samples as a decoder gives them, float32 `(frames,)` or
`(frames, channels)` (a `(channels, frames)` array with at most 16 channels and more frames is
accepted too, as `koe.audio.io` does), float64 cast to float32, integer PCM scaled by
`1 / 2**(bits-1)` as libsndfile reads it. Upstream takes only a path; bytes and file objects are
read as that file would be.

Beyond upstream, koe refuses what a voice clone cannot use (`AudioError`): unreadable or
truncated files, no samples, non-finite samples, a silent clip (peak of the mono signal below
`SILENT_PEAK`, 1e-4, i.e. -80 dBFS: at most 3 steps of 16-bit PCM), and clips shorter than
`min_seconds` or longer than `max_seconds` (the source's duration, checked before resampling: from
the header where it gives one, and while decoding, which `koe.audio.decode` stops at
`max_seconds`, so a small file that expands to hours of audio is never decoded in full), sample
rates outside 8000-384000 Hz and more than 64 channels.
"""

from __future__ import annotations

import os
from typing import BinaryIO

import numpy as np
import torch

from koe.audio.decode import EncodedAudio, Reduce, array_frames, check_complete, check_sample_rate, decode_pyav, open_soundfile, read_soundfile, to_mono
from koe.audio.errors import AudioError
from koe.audio.pcm import pcm_from_decoded
from koe.audio.resample import resample as soxr_hq_resample
from koe.audio.sinc_resample import resample_sinc

__all__ = ["METHODS", "SILENT_PEAK", "PromptAudioSource", "load_prompt_audio", "pad_to_patches"]

METHODS = ("librosa", "torchaudio")  # VoxCPM2; VoxCPM 1.5 / 0.5B
SILENT_PEAK = 1e-4  # a mono clip whose largest |sample| is below this is "silent" (-80 dBFS)

PromptAudioSource = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO | tuple

# libsndfile reads these to the same float32 samples as FFmpeg's decoders (hence torchcodec)
_FFMPEG_EQUAL_FORMATS = frozenset({"WAV", "WAVEX", "W64", "RF64", "AIFF", "FLAC"})
_FFMPEG_EQUAL_SUBTYPES = frozenset({"PCM_S8", "PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"})


def load_prompt_audio(
    source: PromptAudioSource,
    target_rate: int,
    method: str,
    *,
    min_seconds: float = 0.0,
    max_seconds: float | None = None,
) -> np.ndarray:
    """The clip as upstream hands it to the audio VAE: float32 mono `(n,)` at `target_rate`.

    `method`: "librosa" (VoxCPM2: `librosa.load(path, sr=target_rate, mono=True)`) or
    "torchaudio" (VoxCPM 1.x: `torchaudio.load`, channel mean, `torchaudio.functional.resample`).
    Raises `AudioError` for unreadable, empty, non-finite or silent audio, or a source duration
    outside `[min_seconds, max_seconds]`; `ValueError` for an unknown method or bad target rate.
    """
    if method not in METHODS:
        raise ValueError(f"unknown prompt audio method {method!r}: expected one of {', '.join(METHODS)}")
    if int(target_rate) != target_rate or target_rate <= 0:
        raise ValueError(f"target sample rate must be a positive whole number, got {target_rate!r}")
    target_rate = int(target_rate)

    if isinstance(source, tuple):
        frames, rate = _from_array(source)
        _check_duration(frames.shape[0], rate, min_seconds, max_seconds)
    else:
        frames, rate = _decode(source, method, max_seconds)
        _check_duration(frames.shape[0], rate, min_seconds, max_seconds)

    if method == "librosa":
        mono = to_mono(frames)  # librosa.to_mono of the transposed read (files: mixed block by block already)
    else:
        by_channel = torch.from_numpy(np.ascontiguousarray(frames.reshape(frames.shape[0], -1).T))  # (channels, n)
        if by_channel.size(0) > 1:
            by_channel = by_channel.mean(dim=0, keepdim=True)
        mono = by_channel[0].numpy()
    _check_signal(mono)

    if method == "librosa":
        out = soxr_hq_resample(mono, rate, target_rate)
    else:
        audio = torch.from_numpy(mono)[None]
        if rate != target_rate:
            audio = resample_sinc(audio, rate, target_rate, kernel_dtype=torch.float32)
        out = audio[0].numpy()
    return np.ascontiguousarray(out, dtype=np.float32)


def pad_to_patches(audio, patch_len: int, left: bool):
    """Zero-pad the last axis of `audio` (numpy array or torch tensor) to a multiple of `patch_len`.

    Upstream pads to `patch_size * chunk_size` samples: on the left for prompt / continuation
    audio (so the real audio ends the sequence), on the right for VoxCPM2's structural reference.
    A length already a multiple is returned unchanged (upstream pads nothing then, not a patch).
    """
    patch_len = int(patch_len)
    if patch_len <= 0:
        raise ValueError(f"patch_len must be positive, got {patch_len}")
    n = audio.shape[-1]
    if n % patch_len == 0:
        return audio
    pad = patch_len - n % patch_len
    before, after = (pad, 0) if left else (0, pad)
    if isinstance(audio, torch.Tensor):
        return torch.nn.functional.pad(audio, (before, after))
    audio = np.asarray(audio)
    return np.pad(audio, [(0, 0)] * (audio.ndim - 1) + [(before, after)], mode="constant")


# ---------------------------------------------------------------------------------------------
# sources


def _from_array(source: tuple) -> tuple[np.ndarray, int]:
    """`(samples, rate)` -> float32 `(frames,)` / `(frames, channels)`, as a decoder would give."""
    if len(source) != 2 or not isinstance(source[0], np.ndarray):
        raise AudioError("a tuple audio source must be (numpy array, sample_rate)")
    samples, rate = source
    try:
        if int(rate) != rate:
            raise ValueError
        rate = int(rate)
    except (TypeError, ValueError) as exc:
        raise AudioError(f"invalid sample rate: {rate!r}") from exc
    check_sample_rate(rate)
    frames = array_frames(samples)
    if frames.ndim == 2 and frames.shape[1] == 1:
        frames = frames[:, 0]
    return frames, rate


def _decode(source, method: str, max_seconds: float | None) -> tuple[np.ndarray, int]:
    """A path, bytes or file object -> float32 `(frames,)` / `(frames, channels)` and its rate.

    Bounded by `max_seconds` (koe.audio.decode): the librosa method mixes to mono block by block,
    so it holds one channel; the torchaudio method keeps the channels for torch's mean.
    """
    enc = EncodedAudio.read(source)
    check_complete(enc)

    decoded = _read_soundfile(enc, method, max_seconds)
    if decoded is not None:
        return decoded
    # librosa's fallback, audioread's FFmpeg pipe: 16-bit PCM, read back as int / 32768
    reduce = _librosa_ffmpeg_block if method == "librosa" else None
    frames, rate = decode_pyav(enc, max_seconds=max_seconds, reduce=reduce)
    return (frames[:, 0] if frames.ndim == 2 and frames.shape[1] == 1 else frames), rate


def _read_soundfile(enc: EncodedAudio, method: str, max_seconds: float | None) -> tuple[np.ndarray, int] | None:
    """libsndfile's float32 read; None where upstream's decoder for `method` is FFmpeg's instead."""
    f = open_soundfile(enc)
    if f is None:
        return None
    with f:
        if method == "torchaudio" and (f.format not in _FFMPEG_EQUAL_FORMATS or f.subtype not in _FFMPEG_EQUAL_SUBTYPES):
            return None
        reduce: Reduce | None = to_mono if method == "librosa" else None
        return read_soundfile(f, enc.name, max_seconds=max_seconds, reduce=reduce), int(f.samplerate)


def _librosa_ffmpeg_block(block: np.ndarray) -> np.ndarray:
    """A PyAV block as librosa's audioread fallback reads it: rounded to 16 bits, then mixed to mono."""
    ints, _ = pcm_from_decoded(block, float_source=False)
    return to_mono((ints.astype(np.float64) * (1.0 / 32768.0)).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# checks


def _check_max(frames: int, rate: int, max_seconds: float | None) -> None:
    if max_seconds is not None and rate > 0 and frames / rate > max_seconds:
        raise AudioError(f"reference audio is too long: {frames / rate:.2f} s; give at most {max_seconds:g} s")


def _check_duration(frames: int, rate: int, min_seconds: float, max_seconds: float | None) -> None:
    if frames == 0:
        raise AudioError("reference audio has no samples (empty or zero-length)")
    _check_max(frames, rate, max_seconds)
    if frames / rate < min_seconds:
        raise AudioError(f"reference audio is too short: {frames / rate:.2f} s; give at least {min_seconds:g} s")


def _check_signal(mono: np.ndarray) -> None:
    if not np.isfinite(mono).all():
        raise AudioError("reference audio contains NaN or infinite samples")
    peak = float(np.max(np.abs(mono)))
    if peak < SILENT_PEAK:
        raise AudioError(f"the reference is silent (its loudest sample is {peak:.1e}, below {SILENT_PEAK:g})")
