"""Sample-rate conversion matching `librosa.resample`'s default (`res_type="soxr_hq"`).

librosa 0.11 does, for its default arguments:
  1. `orig_sr == target_sr` -> the input is returned as is;
  2. `n_out = int(np.ceil(n_in * (float(target_sr) / orig_sr)))`;
  3. `soxr.resample(row, orig_sr, target_sr, quality="soxr_hq")` on each 1-D row (same dtype in and out);
  4. `fix_length`: trim to `n_out`, or zero-pad at the end up to it;
  5. cast back to the input's dtype.
This module calls `soxr` directly with the same arguments, so the samples are the same bits.
"""

from __future__ import annotations

import numpy as np
import soxr

from koe.audio.errors import AudioError

__all__ = ["resample"]


def _fix_length(y: np.ndarray, size: int) -> np.ndarray:
    """Trim or zero-pad the last axis to exactly `size` samples."""
    n = y.shape[-1]
    if n > size:
        return y[..., :size]
    if n < size:
        pad = [(0, 0)] * (y.ndim - 1) + [(0, size - n)]
        return np.pad(y, pad, mode="constant")
    return y


def resample(x: np.ndarray, orig_sr: int | float, target_sr: int | float) -> np.ndarray:
    """Resample `x` (shape `(..., n)`, float32/float64) along its last axis from `orig_sr` to `target_sr`.

    Returns the same samples as `librosa.resample(x, orig_sr=orig_sr, target_sr=target_sr)`; the output
    has `ceil(n * target_sr / orig_sr)` samples and the input's dtype. Raises `AudioError` for a
    non-float, empty or non-finite input, or a non-positive rate.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating) or x.dtype not in (np.float32, np.float64):
        raise AudioError(f"resample needs float32 or float64 samples, got {x.dtype}")
    if x.ndim < 1 or x.shape[-1] == 0:
        raise AudioError("resample got no samples")
    if orig_sr <= 0 or target_sr <= 0:
        raise AudioError(f"sample rates must be positive, got {orig_sr} -> {target_sr}")
    if not np.isfinite(x).all():
        raise AudioError("audio contains NaN or infinite samples")
    if orig_sr == target_sr:
        return x

    ratio = float(target_sr) / orig_sr
    n_out = int(np.ceil(x.shape[-1] * ratio))

    rows = x.reshape(-1, x.shape[-1])  # (channels, n): each row is resampled on its own
    out_rows = [soxr.resample(np.ascontiguousarray(row), orig_sr, target_sr, quality="soxr_hq") for row in rows]
    y = np.stack(out_rows).reshape(*x.shape[:-1], -1)  # (..., n_soxr)
    y = _fix_length(y, n_out)
    return np.asarray(y, dtype=x.dtype)
