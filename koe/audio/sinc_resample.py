"""Band-limited (windowed-sinc) resampling, bit for bit as `torchaudio.transforms.Resample` does it.

F5-TTS brings its reference clip to 24 kHz with `torchaudio.transforms.Resample(sr, 24000)` at its
defaults: a Hann-windowed sinc, 6 zero crossings each side, roll-off 0.99. koe must not depend on
torchaudio, so this module rebuilds the same arithmetic with plain torch ops:

* Both rates are divided by their gcd; `orig`, `new` below are the reduced rates.
* The cut-off is `min(orig, new) * rolloff` (a Python float) and the filter reaches
  `width = ceil(6 * orig / cutoff)` input samples beyond each side of a block of `orig` samples.
* The kernel is evaluated in float64, except for one detail of the transform's defaults: the output
  phases `-j / new` are an integer range divided in the default float dtype (float32), and only
  then widened to float64 when the input offsets (float64) are added. The window is
  `cos(t * pi / 6 / 2) ** 2`, the sinc `sin(t) / t` (1 where t == 0), both scaled by
  `cutoff / orig`, and the whole kernel is stored as float32 (the transform caches it so).
* Application: zero pad `width` on the left and `width + orig` on the right, `conv1d` with stride
  `orig` (one output channel per phase), interleave the phases, and keep
  `ceil(new * length / orig)` samples, where that quotient is first rounded to float32 (the
  transform builds it with `torch.as_tensor` of a Python float).

The ops are torch's own (its float64 sin/cos and float32 conv1d), called in the same order on the
same shapes, so the output bits match the transform's on the same torch build and thread count.

`torchaudio.functional.resample` (VoxCPM 1.x) builds the same kernel in the waveform's dtype
instead: the offsets, phases, window and sinc all in float32, nothing widened, no final cast.
`kernel_dtype=torch.float32` selects that; the bits differ from the transform's by up to ~1e-5.
"""

from __future__ import annotations

import functools
import math

import torch

__all__ = ["resample_sinc", "sinc_resample_kernel"]

LOWPASS_FILTER_WIDTH = 6  # zero crossings of the sinc kept on each side
ROLLOFF = 0.99  # cut-off as a fraction of the lower Nyquist frequency


def _reduced(orig_freq: int, new_freq: int) -> tuple[int, int]:
    if int(orig_freq) != orig_freq or int(new_freq) != new_freq:
        raise ValueError(f"sample rates must be whole numbers, got {orig_freq} and {new_freq}")
    orig_freq, new_freq = int(orig_freq), int(new_freq)
    if orig_freq <= 0 or new_freq <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_freq} and {new_freq}")
    g = math.gcd(orig_freq, new_freq)
    return orig_freq // g, new_freq // g


@functools.lru_cache(maxsize=16)
def _kernel_cached(orig: int, new: int, lowpass_filter_width: int, rolloff: float, kernel_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, int]:
    cutoff = min(orig, new) * rolloff  # Python float: the anti-aliasing cut-off in reduced units
    width = math.ceil(lowpass_filter_width * orig / cutoff)

    # input offsets of one block, relative to the block start, in units of input periods: (1, 1, K)
    offsets_dtype = torch.float64 if kernel_dtype is None else kernel_dtype
    offsets = torch.arange(-width, width + orig, dtype=offsets_dtype)[None, None] / orig
    # output phase j sits at -j / new; the range divides in float32 (the default dtype)
    phases = torch.arange(0, -new, -1, dtype=kernel_dtype)[:, None, None] / new  # (new, 1, 1) float32
    t = phases + offsets  # transform: float32 + float64 -> (new, 1, K) float64; functional: kernel_dtype
    t *= cutoff
    t = t.clamp_(-lowpass_filter_width, lowpass_filter_width)

    hann = torch.cos(t * math.pi / lowpass_filter_width / 2) ** 2
    t *= math.pi
    gain = cutoff / orig
    sinc = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    sinc *= hann * gain
    kernel = sinc.to(dtype=torch.float32) if kernel_dtype is None else sinc  # (new, 1, K), K = 2 * width + orig
    kernel.requires_grad_(False)
    return kernel, width


def sinc_resample_kernel(
    orig_freq: int,
    new_freq: int,
    lowpass_filter_width: int = LOWPASS_FILTER_WIDTH,
    rolloff: float = ROLLOFF,
    kernel_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, int]:
    """The conv kernel `(new, 1, 2 * width + orig)` (reduced rates) and its `width`: float32 built
    in float64 (the transform's), or built in `kernel_dtype` (`torchaudio.functional.resample`'s)."""
    if lowpass_filter_width <= 0:
        raise ValueError("lowpass_filter_width must be positive")
    orig, new = _reduced(orig_freq, new_freq)
    kernel, width = _kernel_cached(orig, new, int(lowpass_filter_width), float(rolloff), kernel_dtype)
    return kernel.clone(), width


def resample_sinc(
    waveform: torch.Tensor,
    orig_freq: int,
    new_freq: int,
    lowpass_filter_width: int = LOWPASS_FILTER_WIDTH,
    rolloff: float = ROLLOFF,
    kernel_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Resample `waveform` `(..., time)` from `orig_freq` to `new_freq` Hz; returns `(..., new_time)`.

    Equal to `torchaudio.transforms.Resample(orig_freq, new_freq)(waveform)` for float32 input;
    with `kernel_dtype=waveform.dtype`, to `torchaudio.functional.resample(waveform, orig_freq, new_freq)`.
    The same rate returns `waveform` itself (unchanged, not a copy), as the transform does.
    `new_time = ceil(new * time / orig)` (reduced rates; quotient rounded to float32 first).
    """
    if not waveform.is_floating_point():
        raise TypeError(f"resample_sinc needs a floating point waveform, got {waveform.dtype}")
    orig, new = _reduced(orig_freq, new_freq)
    if int(orig_freq) == int(new_freq):
        return waveform
    if lowpass_filter_width <= 0:
        raise ValueError("lowpass_filter_width must be positive")
    kernel, width = _kernel_cached(orig, new, int(lowpass_filter_width), float(rolloff), kernel_dtype)
    kernel = kernel.to(device=waveform.device, dtype=waveform.dtype)

    shape = waveform.size()
    flat = waveform.view(-1, shape[-1])  # (signals, time)
    signals, length = flat.shape
    padded = torch.nn.functional.pad(flat, (width, width + orig))
    phased = torch.nn.functional.conv1d(padded[:, None], kernel, stride=orig)  # (signals, new, blocks)
    out = phased.transpose(1, 2).reshape(signals, -1)  # interleave phases: (signals, blocks * new)
    keep = torch.ceil(torch.as_tensor(new * length / orig, dtype=torch.float32)).long()
    out = out[..., :keep]
    return out.view(shape[:-1] + out.shape[-1:])
