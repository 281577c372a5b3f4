"""Fish Speech S2's codec decoded frame by frame (`koe_fish_speech.stream.StreamDecoder`) against its
one-shot `FishCodec.decode`, on koe's seeded tiny codec.

What is exact and what is not (measured on the CPU in float32, one thread, MKL_CBWR=AUTO,STRICT):
one push of every frame gives `decode`'s bits (the stream runs the one-shot's ops in its order);
smaller pushes give the same samples up to float32 rounding (max abs ~1e-6, ~120 dB), because
torch's CPU kernels round by the length they are given: a conv picks oneDNN or its im2col path by
input size (C_in x width > 20480) and oneDNN's blocking by width, and the flash attention kernel
sums a row's last keys past a multiple of 16 by another path. The one-shot itself is not
prefix-stable (`decode(codes[:, :a])` is not the first a frames of `decode(codes)`), so no causal
stream can give its bits for every length.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from koe_fish_speech.codec import load_codec, window_mask
from koe_fish_speech.fixtures_codec import random_codec_state
from koe_fish_speech.stream import StreamDecoder, stream_mask

FRAMES = 24


@pytest.fixture(scope="module")
def codec():
    return load_codec(random_codec_state("tiny", 0))


def random_codes(codec, frames: int, seed: int) -> torch.Tensor:
    c = codec.config
    g = torch.Generator().manual_seed(seed)
    semantic = torch.randint(0, c.semantic_codebook_size, (1, frames), generator=g)
    return torch.cat([semantic, torch.randint(0, c.codebook_size, (c.n_codebooks, frames), generator=g)])


@pytest.fixture(scope="module")
def codes(codec):
    return random_codes(codec, FRAMES, 1)


@pytest.fixture(scope="module")
def one_shot(codec, codes):
    torch.set_num_threads(1)
    return codec.decode(codes).numpy()


def streamed(codec: object, codes: torch.Tensor, chunk: int) -> tuple[np.ndarray, list[int]]:
    decoder = StreamDecoder(codec)
    pieces = [decoder.push(codes[:, i : i + chunk]) for i in range(0, codes.shape[1], chunk)]
    sizes = [p.size for p in pieces]
    tail = decoder.flush()
    assert tail.dtype == np.float32 and tail.size == 0  # nothing held back: no layer looks ahead
    return np.concatenate(pieces), sizes


def test_one_push_is_the_one_shot(codec, codes, one_shot):
    out, sizes = streamed(codec, codes, FRAMES)
    assert out.dtype == np.float32 and sizes == [FRAMES * codec.config.frame_length]
    assert np.array_equal(out, one_shot)


@pytest.mark.parametrize("chunk", [1, 4, 7])
def test_frames_pushed_give_their_samples(codec, codes, one_shot, chunk):
    out, sizes = streamed(codec, codes, chunk)
    frame = codec.config.frame_length
    assert sizes == [min(chunk, FRAMES - i) * frame for i in range(0, FRAMES, chunk)]  # each push gives exactly its frames
    assert out.shape == one_shot.shape
    error = np.abs(out - one_shot)
    snr = 10 * np.log10(np.sum(one_shot.astype(np.float64) ** 2) / max(np.sum(error.astype(np.float64) ** 2), 1e-30))
    assert error.max() < 1e-5 and snr > 100, (error.max(), snr)  # float32 rounding, not a state bug


def test_state_is_kept_between_pushes(codec, codes, one_shot):
    """A second decoder fed only the second half starts from silence: its samples are not the
    one-shot's, which a stream that forgot its state would give too."""
    half = FRAMES // 2
    frame = codec.config.frame_length
    fresh = StreamDecoder(codec).push(codes[:, half:])
    kept = StreamDecoder(codec)
    kept.push(codes[:, :half])
    second = kept.push(codes[:, half:])
    assert np.abs(second - one_shot[half * frame :]).max() < 1e-5
    assert np.abs(fresh - one_shot[half * frame :]).max() > 1e-3


def test_window_outlives_its_keys(codec):
    """Past the transformer's 128-frame window the stream keeps only the window's keys: 132 frames
    pushed in pieces still give the one-shot's samples (to rounding)."""
    frames, chunk = 132, 44
    codes = random_codes(codec, frames, 2)
    decoder = StreamDecoder(codec)
    out = np.concatenate([decoder.push(codes[:, i : i + chunk]) for i in range(0, frames, chunk)])
    assert all(cache.k.shape[2] == 127 for cache in decoder.transformer.caches)
    last = slice(129 * codec.config.frame_length, None)  # frames whose window starts past frame 0
    assert np.abs(out[last] - codec.decode(codes).numpy()[last]).max() < 1e-5


def test_mask_rows_are_the_window_mask():
    full = window_mask(300, 128)
    for first, n, keys_from in [(0, 1, 0), (5, 4, 0), (200, 21, 73), (299, 1, 172)]:
        assert torch.equal(stream_mask(first, n, keys_from, 128), full[..., first : first + n, keys_from : first + n])


def test_codes_are_clamped_as_decode_clamps(codec, codes):
    c = codec.config
    big = codes[:, :3].clone()
    big[0, 0], big[1, 1] = c.semantic_codebook_size + 5, c.codebook_size + 7
    assert np.array_equal(StreamDecoder(codec).push(big), codec.decode(big).numpy())
    assert big[0, 0] == c.semantic_codebook_size + 5  # the caller's codes are left as they were


def test_bad_codes_are_refused(codec, codes):
    decoder = StreamDecoder(codec)
    assert decoder.push(codes[:, :0]).size == 0
    with pytest.raises(ValueError, match="integers"):
        decoder.push(codes[:3])
    with pytest.raises(ValueError, match="integers"):
        decoder.push(codes.float())
    with pytest.raises(ValueError, match="negative"):
        decoder.push(-codes[:, :2] - 1)


def test_bf16_autocast_is_followed(codec, codes):
    """The engine's bf16 mode decodes the float32 codec under bfloat16 autocast (`decode_autocast`):
    the stream does too (one push: `decode`'s bits; pieces: near them)."""
    codec.decode_autocast = torch.bfloat16
    try:
        one_shot = codec.decode(codes).float().numpy()
        whole, _ = streamed(codec, codes, FRAMES)
        pieces, _ = streamed(codec, codes, 4)
    finally:
        codec.decode_autocast = None
    assert np.array_equal(whole, one_shot)
    assert np.abs(pieces - one_shot).max() < 0.1  # bfloat16 products: the rounding is bfloat16's
