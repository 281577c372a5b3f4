"""OmniVoice's audio edges: silence removal through 16-bit PCM (as upstream's pydub path), the
output's loudness, fades and padding, and the joins of long texts' chunks.

Silence removal (`remove_silence`): the float samples become 16-bit integers as upstream makes
them (`x * 32768`, clipped, truncated toward zero), pydub's `split_on_silence` (-50 dBFS, 10 ms
steps, pauses longer than `mid_ms` cut down to `mid_ms` of margin) glued back together, then
each edge's silence cut to at most `lead_ms` / `trail_ms`, and back to float as `int / 32768`.
The round trip to 16 bits happens even when nothing is cut. Positions are pydub's milliseconds
(`koe.audio.pcm.Pcm`), so lengths can grow by a few zero samples.
"""

from __future__ import annotations

import numpy as np

from koe.audio.pcm import Pcm, concat, converted, silent, sync_params
from koe.audio.silence import WindowRms, leading_silence_ms, reversed_segment, split_on_silence

__all__ = ["cross_fade_chunks", "fade_and_pad", "loudness", "remove_silence"]

SILENCE_DB = -50.0
SEEK_MS = 10


def _to_pcm(samples: np.ndarray, rate: int) -> Pcm:
    ints = (samples.astype(np.float32) * np.float32(32768.0)).clip(-32768, 32767).astype(np.int16)
    return Pcm(ints.astype(np.int64)[:, None], rate, 2)


def _trim_edges(seg: Pcm, lead_ms: int, trail_ms: int) -> Pcm:
    """Leading silence cut to `lead_ms`, then (on the reversed segment) trailing silence to `trail_ms`."""
    start = max(0, leading_silence_ms(seg, SILENCE_DB, SEEK_MS) - lead_ms)
    seg = seg.slice_ms(start, None)
    back = reversed_segment(seg)
    start = max(0, leading_silence_ms(back, SILENCE_DB, SEEK_MS) - trail_ms)
    return reversed_segment(back.slice_ms(start, None))


def remove_silence(samples: np.ndarray, rate: int, mid_ms: int, lead_ms: int, trail_ms: int) -> np.ndarray:
    """Mono float32 samples with long pauses shortened and the edges trimmed (module docstring)."""
    seg = _to_pcm(samples, rate)
    if mid_ms > 0:
        pieces = split_on_silence(seg, mid_ms, SILENCE_DB, WindowRms(seg), mid_ms, SEEK_MS)
        start = silent(0)  # pydub starts from an empty 11025 Hz segment and appends each piece
        channels, out_rate, width = sync_params(start, *pieces)
        seg = concat([converted(p, channels, out_rate, width) for p in [start, *pieces]], channels, out_rate, width)
    seg = _trim_edges(seg, lead_ms, trail_ms)
    return (seg.data[:, 0].astype(np.int16).astype(np.float32) / np.float32(32768.0)).astype(np.float32)


def loudness(samples: np.ndarray, ref_rms: float | None) -> np.ndarray:
    """A quiet reference's level (its rms over 0.1) or, without a reference, a 0.5 peak."""
    if ref_rms is not None and ref_rms < 0.1:
        return samples * ref_rms / 0.1
    if ref_rms is None:
        peak = np.abs(samples).max() if samples.size else 0.0
        if peak > 1e-6:
            return samples / peak * 0.5
    return samples


def fade_and_pad(samples: np.ndarray, rate: int, pad_s: float = 0.1, fade_s: float = 0.1) -> np.ndarray:
    """Linear float32 fades of `fade_s` (at most half the clip) at both ends, then `pad_s` of zeros on each side."""
    if samples.shape[-1] == 0:
        return samples
    fade, pad = int(fade_s * rate), int(pad_s * rate)
    out = samples.copy()
    k = min(fade, out.shape[-1] // 2)
    if fade > 0 and k > 0:
        out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
    if pad > 0:
        zeros = np.zeros(pad, dtype=out.dtype)
        out = np.concatenate([zeros, out, zeros])
    return out


def cross_fade_chunks(chunks: list[np.ndarray], rate: int, gap_s: float = 0.3) -> np.ndarray:
    """Chunks joined by a linear fade-out, a third of `gap_s` of zeros, and a linear fade-in (no overlap)."""
    if len(chunks) == 1:
        return chunks[0]
    n = int(gap_s * rate) // 3
    merged = chunks[0].copy()
    for chunk in chunks[1:]:
        k = min(n, merged.shape[-1])
        if k > 0:
            merged[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
        head = chunk.copy()
        k = min(n, head.shape[-1])
        if k > 0:
            head[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        merged = np.concatenate([merged, np.zeros(n, dtype=np.float32), head])
    return merged
