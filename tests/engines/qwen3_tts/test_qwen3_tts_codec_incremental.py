"""The incremental (stateful) codec decoder equals the one-shot chunked decode, at a flat cost per frame."""

from __future__ import annotations

import pytest
import torch
from fixtures_models import push_all
from torch import nn

from koe.engines.qwen3_tts.codec import SpeechTokenizer
from koe.engines.qwen3_tts.codec.incremental import IncrementalDecoder
from koe.engines.qwen3_tts.codec.random_weights import write_random_speech_tokenizer

# Largest |incremental - one-shot| seen on the tiny codec is ~3.4e-6 (samples in [-1, 1]): the same
# sums in other matrix shapes, and the transposed convs add their bias after the overlap.
SAMPLE_BOUND = 1e-5
SPF = 1920  # samples per frame
IRREGULAR = (5, 1, 17, 3, 40, 2, 29)


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("codec_tiny")
    write_random_speech_tokenizer(folder, size="tiny")
    return SpeechTokenizer.from_folder(folder).decoder


def _codes(frames: int, seed: int = 0) -> torch.Tensor:
    """(T, 16) random codes."""
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


def _one_shot(decoder, codes: torch.Tensor, **plan) -> torch.Tensor:
    with torch.inference_mode():
        return decoder.chunked_decode(codes.T[None], **plan)[0, 0]  # (T * SPF,)


@pytest.mark.parametrize(
    "frames, sizes",
    [
        (1, (1,)),
        (7, (1,)),
        (80, (1,)),
        (310, (1,)),
        (7, (3,)),
        (80, (3,)),
        (310, (3,)),
        (650, (3,)),
        (1, (12,)),
        (7, (12,)),
        (80, (12,)),
        (310, (12,)),
        (650, (12,)),
        (80, IRREGULAR),
        (310, IRREGULAR),
        (650, IRREGULAR),
        (650, (650,)),
    ],
)
def test_incremental_equals_one_shot(decoder, frames, sizes):
    """Across the 72-frame attention window (80) and the 300-frame chunk boundaries (310, 650)."""
    codes = _codes(frames, seed=frames)
    out = push_all(IncrementalDecoder(decoder), codes, sizes)
    ref = _one_shot(decoder, codes)
    assert out.shape == ref.shape
    assert (out - ref).abs().max() <= SAMPLE_BOUND


@pytest.mark.parametrize("prefix_frames, frames", [(40, 50), (290, 30), (300, 20), (310, 40)])
def test_prefix_is_context_only(decoder, prefix_frames, frames):
    """A prefix (ICL reference) counts in the chunk plan but is not emitted."""
    codes = _codes(prefix_frames + frames, seed=prefix_frames)
    inc = IncrementalDecoder(decoder, prefix=codes[:prefix_frames])
    out = push_all(inc, codes[prefix_frames:], IRREGULAR)
    ref = _one_shot(decoder, codes)[prefix_frames * SPF :]
    assert out.shape == ref.shape
    assert (out - ref).abs().max() <= SAMPLE_BOUND


def test_empty_push_and_bad_shape(decoder):
    inc = IncrementalDecoder(decoder)
    assert inc.push(torch.zeros(0, 16, dtype=torch.long)).shape == (0,)
    with pytest.raises(ValueError):
        inc.push(torch.zeros(3, 8, dtype=torch.long))


def _count_steps(decoder) -> tuple[list[int], list]:
    """Time steps fed to every conv and linear layer of the decoder, summed into counter[0]."""
    counter = [0]

    def hook(module, args, output):
        counter[0] += args[0].shape[-1] if isinstance(module, nn.Conv1d) else args[0].shape[-2]

    handles = [m.register_forward_hook(hook) for m in decoder.modules() if isinstance(m, (nn.Conv1d, nn.Linear))]
    return counter, handles


def test_cost_per_frame_is_flat(decoder):
    """Pushing frames one at a time, every push does the same work, except a chunk's first frame,
    which also warms up on the left context; the KV caches stay within the sliding window."""
    chunk, context, frames = 40, 5, 100  # a small plan, so that the test crosses two boundaries quickly
    codes = _codes(frames)
    inc = IncrementalDecoder(decoder, chunk_size=chunk, left_context=context)
    counter, handles = _count_steps(decoder)
    work, pieces = [], []
    try:
        for t in range(frames):
            before = counter[0]
            pieces.append(inc.push(codes[t : t + 1]))
            work.append(counter[0] - before)
    finally:
        for h in handles:
            h.remove()
    per_frame = work[1]
    assert all(w == per_frame for t, w in enumerate(work) if t % chunk)
    assert all(per_frame < w <= (context + 1) * per_frame for t, w in enumerate(work) if t and not t % chunk)
    window = decoder.config.sliding_window
    assert all(c.k.shape[2] <= window - 1 for c in inc.transformer.caches)
    ref = _one_shot(decoder, codes, chunk_size=chunk, left_context=context)
    assert (torch.cat(pieces) - ref).abs().max() <= SAMPLE_BOUND
